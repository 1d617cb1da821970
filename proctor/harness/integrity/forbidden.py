"""Forbidden paths for patches: the defaults of design.md section 4 plus a task's own.

Rules match *normalised* repo-relative paths (see
:func:`proctor.harness.integrity.check.normalise_path`), compared case-folded, never the raw
diff text. Pattern syntax is gitignore-like:

* ``conftest.py``, ``*.pth``: no ``/`` inside, so the name matches at any depth;
* ``docs/secret/**``, ``/ci/``: a ``/`` inside or in front anchors it at the repo root;
* a trailing ``/`` matches a directory only (everything under it);
* ``*`` and ``?`` stay inside one path segment, ``**`` crosses segments;
* a pattern also matches everything under a directory it matches (``verifier``
  matches ``verifier/run.py``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from proctor.patch import fold, normalise_path

# (pattern, reason), checked in this order; the first hit gives the reason.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    ("conftest.py", "conftest.py at any depth"),
    *(
        (name, "pytest/tox/setup configuration")
        for name in ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini")
    ),
    ("setup.cfg", "pytest/tox/setup configuration"),
    # Forbidden whole unless the caller judges it per section: check_integrity does when
    # given the pristine texts (proctor.harness.integrity.pyproject_rules), so only edits of
    # [tool.pytest*], [tool.ruff*], [build-system], pytest entry points... are violations.
    ("pyproject.toml", "pyproject.toml (test, tool and build configuration)"),
    # Standalone equivalents of the forbidden pyproject sections (an addition to design.md).
    *((name, "tool configuration") for name in ("ruff.toml", ".ruff.toml", ".coveragerc")),
    ("sitecustomize.py", "interpreter start-up hook"),
    ("usercustomize.py", "interpreter start-up hook"),
    ("*.pth", "path configuration file (*.pth) runs at interpreter start-up"),
    ("*.pyc", "compiled Python file"),
    ("*.pyo", "compiled Python file"),
    *((f"*.{ext}", "native binary") for ext in ("so", "pyd", "dll", "dylib")),
    *(
        (f"/{d}", "verifier or CI directory")
        for d in (
            ".github/",
            ".ci/",
            ".circleci/",
            ".gitlab-ci.yml",
            "ci/",
            "verifier/",
            ".proctor/",
        )
    ),
    (".git*", "git metadata (.git* file or directory)"),
)

#: The reason of the whole-file pyproject.toml rule (replaced by the per-section judgement).
PYPROJECT_REASON = "pyproject.toml (test, tool and build configuration)"

# Test tooling that a new top-level module must not shadow, besides the standard library.
TOOLING_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "pytest_timeout",
        "pytest_cov",
        "xdist",
        "coverage",
        "mutmut",
        "ruff",
        "proctor_report",
        "hypothesis",
        "_hypothesis_pytestplugin",
        "unittest",
        "setuptools",
        "pkg_resources",
        "_distutils_hack",
        "pip",
        "packaging",
        "proctor",
    }
)
# Files with these suffixes are importable modules.
MODULE_SUFFIXES = (".py", ".pyw", ".pyc", ".pyo", ".so", ".pyd")


@dataclass(frozen=True)
class ForbiddenRules:
    """The forbidden paths of one task.

    ``patterns`` and ``reasons`` are parallel tuples (a missing reason reads "forbidden by
    the task"). ``hidden_paths``: repo-relative paths of the hidden tests, forbidden as
    exact files; the executor passes those with no file at the same path in ``repo/``
    (:attr:`proctor.task.Task.hidden_only_files`): a hidden file that replaces a
    visible one (an upstream test module the hidden version extends) leaves the visible
    file the agent's to edit, since the hidden file is placed over or apart from it after
    the patch. ``shadow_names``: top-level module names a patch must not add (stdlib +
    test tooling + any extra). ``existing_top_level``: names already at the top of the
    pristine repo, exempt from the shadowing rule (editing an existing module is fine).
    """

    patterns: tuple[str, ...]
    hidden_paths: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    shadow_names: frozenset[str] = frozenset()
    existing_top_level: frozenset[str] = frozenset()

    @classmethod
    def for_task(
        cls,
        extra: Iterable[str] = (),
        hidden_paths: Iterable[str] = (),
        *,
        extra_shadow_names: Iterable[str] = (),
        existing_top_level: Iterable[str] = (),
    ) -> ForbiddenRules:
        """Defaults (design.md section 4) plus the task's ``forbidden`` patterns.

        ``extra``: patterns from ``task.toml`` (``\\`` read as ``/``, ``./`` dropped).
        ``hidden_paths``: e.g. ``Task.hidden_files``; normalised here (no ``a/`` stripping).
        ``extra_shadow_names``: e.g. top-level names of packages installed in the image.
        ``existing_top_level``: entries at the top of ``repo/`` (names, any case).

        Raises:
            ValueError: a hidden path is empty, absolute, or escapes the repo.
        """
        extras = tuple(p for p in (_normalise_pattern(x) for x in extra) if p)
        return cls(
            patterns=tuple(p for p, _ in DEFAULT_RULES) + extras,
            reasons=tuple(r for _, r in DEFAULT_RULES)
            + tuple(f"forbidden by the task ({p})" for p in extras),
            hidden_paths=tuple(normalise_path(h, strip_prefix=False) for h in hidden_paths),
            shadow_names=frozenset(
                fold(n) for n in (*sys.stdlib_module_names, *TOOLING_MODULES, *extra_shadow_names)
            ),
            existing_top_level=frozenset(fold(n) for n in existing_top_level),
        )

    def match(self, path: str, *, judged_pyproject: bool = False) -> str | None:
        """Why ``path`` (already normalised, repo-relative) is forbidden, or None.

        Case-folded comparison. Order: hidden test, patterns, top-level shadowing.
        ``judged_pyproject``: skip the whole-file ``pyproject.toml`` default rule (the caller
        judges the file per section); a task's own pattern naming it still matches.
        """
        key = fold(path)
        if key in {fold(h) for h in self.hidden_paths}:
            return "hidden test file"
        for i, pattern in enumerate(self.patterns):
            if judged_pyproject and i < len(self.reasons) and self.reasons[i] == PYPROJECT_REASON:
                continue
            if _matches(pattern, key):
                return self.reasons[i] if i < len(self.reasons) else "forbidden by the task"
        return self._shadowing(key)

    def _shadowing(self, key: str) -> str | None:
        top, sep, _ = key.partition("/")
        if sep:  # a file inside a top-level package directory
            if not key.endswith(MODULE_SUFFIXES):
                return None
            name = top
        else:
            if not key.endswith(MODULE_SUFFIXES):
                return None
            name = top.partition(".")[0]
        if name in self.shadow_names and not {top, name} & self.existing_top_level:
            return f"new top-level module {name!r} shadows the standard library or test tooling"
        return None


def _normalise_pattern(raw: str) -> str:
    p = raw.strip().replace("\\", "/")
    p = re.sub(r"/{2,}", "/", p)
    while p.startswith("./"):
        p = p[2:]
    return p


def _matches(pattern: str, key: str) -> bool:
    """Does the gitignore-like ``pattern`` match ``key`` or one of its parent dirs?"""
    regex, dir_only = _compile(pattern)
    parts = key.split("/")
    stop = len(parts) - 1 if dir_only else len(parts)
    return any(regex.fullmatch("/".join(parts[:n])) for n in range(1, stop + 1))


@lru_cache(maxsize=512)
def _compile(pattern: str) -> tuple[re.Pattern[str], bool]:
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    anchored = "/" in body
    body = fold(body.lstrip("/"))
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "[" and (end := body.find("]", i + 2)) != -1:
            cls = body[i + 1 : end]
            out.append("[" + ("^" + cls[1:] if cls.startswith("!") else cls) + "]")
            i = end + 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + "".join(out)), dir_only
