"""What a repository path says about being a test, by its name alone. Pure.

A *test module* is what pytest collects by default (``python_files``: ``test_*.py`` and
``*_test.py``, matched on the file name, case-sensitive). Callers combine it with what their
own question needs, and say so where they ask it: the tamper checks also count files under
a test directory (:data:`TEST_DIRS`) and the task's public test paths as tests; mutation
also leaves ``conftest.py`` files and the task's public and hidden test paths alone.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

#: pytest's default ``python_files``.
TEST_MODULE_PATTERNS = ("test_*.py", "*_test.py")
#: Directory names whose files are test code or test data (compared case-folded).
TEST_DIRS = frozenset({"test", "tests", "testing", "fixtures", "testdata", "test_data"})


def is_test_module(path: str) -> bool:
    """``path``'s file name matches :data:`TEST_MODULE_PATTERNS` (a bare name works too)."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatchcase(name, pat) for pat in TEST_MODULE_PATTERNS)


def in_test_dir(path: str) -> bool:
    """Some parent directory of ``path`` is named like a test directory (:data:`TEST_DIRS`)."""
    return any(part.casefold() in TEST_DIRS for part in path.split("/")[:-1])


def under(path: str, roots: list[str]) -> bool:
    """``path`` is one of ``roots`` or inside one (directory prefix, not string prefix)."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)
