"""``pyproject.toml`` judged per section (design.md section 4): pure functions.

Edits to harmless parts (``[project]`` description, version, dependencies, classifiers,
``[tool.black]``, ...) are allowed. A change of any *guarded* part is an integrity
violation, as is a patched file that no longer parses (the harness cannot tell what a
broken file would configure) or a rename or copy of a ``pyproject.toml``.

Guarded parts (source: design.md section 4 and what each tool reads):

* ``[build-system]`` (what builds and installs the package);
* ``[tool.pytest*]`` (pytest's own ini: addopts, plugins, testpaths...), ``[tool.coverage*]``,
  ``[tool.mutmut*]``, ``[tool.ruff*]``, ``[tool.proctor*]``, ``[tool.tox*]``;
* ``[project.entry-points.<group>]`` and ``[project.entry_points...]`` for any group whose
  name contains ``pytest`` (``pytest11`` registers plugins that pytest autoloads).

Comparison is on parsed values (``tomllib``), so reformatting a guarded table is allowed.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Callable

#: ``[tool.<name>]`` patterns whose change is a violation.
GUARDED_TOOLS = ("pytest*", "coverage*", "mutmut*", "ruff*", "proctor*", "tox*")
_MISSING = object()


def is_pyproject(path: str) -> bool:
    """Does a normalised repo path name a ``pyproject.toml`` (any depth, any case)?"""
    return path.rsplit("/", 1)[-1].casefold() == "pyproject.toml"


def guarded_parts(doc: dict) -> dict[str, object]:
    """Dotted name -> value of every guarded part present in a parsed pyproject."""
    parts: dict[str, object] = {}
    if "build-system" in doc:
        parts["build-system"] = doc["build-system"]
    tool = doc.get("tool")
    if isinstance(tool, dict):
        for name, value in tool.items():
            if any(fnmatch.fnmatchcase(name.casefold(), p) for p in GUARDED_TOOLS):
                parts[f"tool.{name}"] = value
    elif tool is not None:
        parts["tool"] = tool
    project = doc.get("project")
    if isinstance(project, dict):
        for key in ("entry-points", "entry_points"):
            groups = project.get(key)
            if isinstance(groups, dict):
                for group, value in groups.items():
                    if "pytest" in str(group).casefold():
                        parts[f"project.{key}.{group}"] = value
            elif groups is not None:
                parts[f"project.{key}"] = groups
    return parts


def judge_pyproject(before: str | None, after: str | None) -> list[str]:
    """Why a change of one ``pyproject.toml`` is forbidden; ``[]`` when it is allowed.

    ``before``/``after``: the pristine and patched text, None when the file does not
    exist on that side. A pristine file that does not parse is compared as empty (the
    task author's problem; the patch may fix it only outside guarded parts).
    """
    def parse(text: str | None) -> dict | None:
        if text is None:
            return {}
        try:
            return tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError, MemoryError):
            return None

    old = parse(before) or {}
    new = parse(after)
    if new is None:
        return ["patched pyproject.toml is not valid TOML (cannot tell what it configures)"]
    a, b = guarded_parts(old), guarded_parts(new)
    try:
        return [f"[{name}] changed (guarded section)" for name in sorted(set(a) | set(b))
                if a.get(name, _MISSING) != b.get(name, _MISSING)]
    except RecursionError:  # values nested too deeply to compare: cannot vouch for them
        return ["guarded sections nested too deeply to compare"]


def pyproject_reasons(touched: list[tuple[str, str]], text_before: Callable[[str], str | None],
                      text_after: Callable[[str], str | None | object]) -> dict[str, list[str]]:
    """Per ``pyproject.toml`` path the patch touches: reasons it is forbidden.

    ``touched``: (normalised path, kind) pairs from ``PatchSummary.touched``.
    ``text_before(path)``: pristine text or None. ``text_after(path)``: patched text, None
    when deleted, or :data:`UNKNOWN` when it cannot be computed (hunks do not apply: then
    ``git apply`` fails too, and the post-apply check judges the real content).
    Renames and copies from or to a ``pyproject.toml`` are forbidden outright.
    """
    out: dict[str, list[str]] = {}
    for path, kind in touched:
        if not is_pyproject(path):
            continue
        if kind not in ("modified", "added", "deleted"):
            out.setdefault(path, []).append(f"{kind.replace('_', ' ')} of pyproject.toml")
            continue
        after = text_after(path)
        if after is UNKNOWN:
            continue
        reasons = judge_pyproject(text_before(path), after)  # type: ignore[arg-type]
        if reasons:
            out.setdefault(path, []).extend(r for r in reasons if r not in out.get(path, []))
    return out


UNKNOWN = object()
