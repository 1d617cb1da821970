"""New top-level modules that shadow what the sandbox image has installed (design.md section 4).

The integrity phase already refuses the standard library and the pinned tools
(:data:`proctor.harness.integrity.forbidden.TOOLING_MODULES`) without a container. Once the image is
known, :func:`image_top_level_modules` lists every top-level module the harness interpreter
of the image can import (``pkgutil.iter_modules`` over its ``sys.path``: stdlib and every
installed distribution), once per image id, cached next to the baselines
(``$PROCTOR_CACHE_DIR/image-modules/<image id>.json``). When the image cannot be asked, the
static list is the fallback. :func:`shadowing_reasons` (pure) judges a patch with it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable

from proctor import cache_dirs
from proctor.errors import InfraError
from proctor.harness.integrity.forbidden import TOOLING_MODULES, ForbiddenRules
from proctor.patch import PatchSummary, fold
from proctor.sandbox import PYTHON, Limits

#: Names too generic to be taken from an image listing (a sloppy distribution may install a
#: top-level ``tests`` package; a repo adding its own ``tests/`` is no shadowing attack).
GENERIC_NAMES = frozenset({"test", "tests", "testing", "doc", "docs", "example", "examples",
                           "script", "scripts", "bench", "benchmarks", "tools", "src", "build",
                           "conftest", "setup", "main", "__main__"})
_LIST_SCRIPT = (
    "import json, pkgutil, sys\n"
    "print(json.dumps(sorted({m.name for m in pkgutil.iter_modules()}"
    " | set(sys.builtin_module_names))))\n"
)


def image_top_level_modules(backend: str, image: str, image_id: str,
                            limits: Limits = Limits()) -> frozenset[str]:
    """Top-level module names importable by the harness interpreter of ``image`` (the
    environment :func:`proctor.sandbox.backends.resolve_env` gave for ``backend``), cached
    per ``image_id``. Falls back to :data:`TOOLING_MODULES` when the sandbox fails."""
    path = cache_dirs.image_modules() / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', image_id)}.json"
    if path.is_file():
        return frozenset(json.loads(path.read_text()))
    from proctor.sandbox import open_sandbox

    try:
        with open_sandbox(backend, image, limits) as sb:
            res = sb.run([PYTHON, "-I", "-c", _LIST_SCRIPT], timeout=60)
        names = json.loads(res.output) if res.ok else None
    except (InfraError, ValueError):
        names = None
    if not isinstance(names, list) or not names:
        return TOOLING_MODULES
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(names, fh)
    os.replace(tmp, path)
    return frozenset(names)


def shadowing_reasons(summary: PatchSummary, installed: Iterable[str],
                      existing_top_level: Iterable[str]) -> list[str]:
    """``"<path>: <why>"`` for each path the patch creates or edits that is a new top-level
    module named like an installed one. ``existing_top_level``: names at the top of the
    pristine repo (editing those is fine)."""
    names = frozenset(fold(n) for n in installed) - GENERIC_NAMES
    rules = ForbiddenRules(patterns=(), shadow_names=names,
                           existing_top_level=frozenset(fold(n) for n in existing_top_level))
    out: list[str] = []
    for path in sorted({t.path for t in summary.touched
                        if t.kind not in ("deleted", "rename_from", "copy_from")}):
        if why := rules.match(path):
            out.append(f"{path}: {why.replace('test tooling', 'an installed package')}")
    return out
