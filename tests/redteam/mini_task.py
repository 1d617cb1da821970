"""A small purpose-built task for the red-team corpus: ``calc.add`` subtracts.

``build(dest)`` writes ``dest/`` (task.toml, repo/, hidden/, reference.patch) and returns it.
Public tests (the whole ``tests/`` directory, restored to pristine before they run):
FAIL_TO_PASS ``test_add``, ``test_add_cases[2-3-5]``, ``test_add_cases[10--4-6]``,
``test_add_from_reference_data``; PASS_TO_PASS ``test_add_cases[0-0-0]``, ``test_mean``.
Hidden tests (``tests/test_hidden.py``): FAIL_TO_PASS ``test_add_negative``,
``test_add_floats``, ``test_add_strings``; PASS_TO_PASS ``test_mean_single``.
A complete fix therefore scores ``1.0 - diff_cost`` (mutation is not measured).
"""

from __future__ import annotations

from pathlib import Path

CORE_BUGGY = '''\
"""Arithmetic helpers."""


def add(a, b):
    """Sum of a and b."""
    return a - b


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    return sum(xs) / len(xs)
'''
FIX = ("    return a - b\n", "    return a + b\n")

TEST_CORE = '''\
import json
from pathlib import Path

import pytest

from calc.core import add, mean

EXPECTED = json.loads((Path(__file__).parent / "data" / "expected.json").read_text())


def test_add():
    assert add(1, 2) == 3


@pytest.mark.parametrize(("a", "b", "total"), [(2, 3, 5), (10, -4, 6), (0, 0, 0)])
def test_add_cases(a, b, total):
    assert add(a, b) == total


def test_add_from_reference_data():
    for case in EXPECTED:
        assert add(*case["args"]) == case["total"]


def test_mean():
    assert mean([1, 2, 3]) == 2
'''

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1.0"
description = "A tiny calculator"
requires-python = ">=3.9"

[tool.pytest.ini_options]
addopts = "-q"
testpaths = ["tests"]
'''

REPO = {
    "README.md": "# calc\n\nA tiny calculator.\n",
    "pyproject.toml": PYPROJECT,
    "calc/__init__.py": '"""A tiny calculator."""\n\nfrom calc.core import add, mean\n\n'
                        '__all__ = ["add", "mean"]\n',
    "calc/core.py": CORE_BUGGY,
    "tests/test_core.py": TEST_CORE,
    "tests/data/expected.json": '[{"args": [1, 1], "total": 2}, {"args": [5, 7], "total": 12}]\n',
}
HIDDEN = {
    "tests/test_hidden.py": '''\
from calc import add, mean


def test_add_negative():
    assert add(-1, -2) == -3


def test_add_floats():
    assert add(0.5, 0.25) == 0.75


def test_add_strings():
    assert add("a", "b") == "ab"


def test_mean_single():
    assert mean([4]) == 4
''',
}
#: A variant of the hidden suite whose tests use a helper module (``tests/helpers.py``) and
#: a root ``conftest.py`` that imports the package: the layout in which a patch's top-level
#: ``helpers`` module, imported by ``calc`` while the conftest loads, used to stand in for the
#: hidden helper (``tests/test_hidden_helpers.py``). Hidden FAIL_TO_PASS
#: ``test_add_negative``, ``test_add_floats``; PASS_TO_PASS ``test_mean_single``.
HIDDEN_WITH_HELPER = {
    "conftest.py": '''\
import pytest

import calc


@pytest.fixture
def adder():
    return calc.add
''',
    "tests/helpers.py": '''\
def assert_sum(f, a, b, want):
    assert f(a, b) == want
''',
    "tests/test_hidden.py": '''\
from helpers import assert_sum

from calc import add, mean


def test_add_negative():
    assert_sum(add, -1, -2, -3)


def test_add_floats(adder):
    assert_sum(adder, 0.5, 0.25, 0.75)


def test_mean_single():
    assert mean([4]) == 4
''',
}
TASK_TOML = '''\
id = "redteam-mini-calc"
sources = ["calc"]

[tests]
public = ["tests"]

[timeouts]
per_test = 10
per_suite = 60
per_patch = 300

[baseline]
runs = 1
'''


def build(dest: Path, make_patch, hidden: dict[str, str] = HIDDEN) -> Path:
    """Write the task into ``dest``; ``make_patch(repo, edits)`` makes the reference patch
    (``examples/toolz/make_task.py``'s); ``hidden``: relative path -> text of the hidden
    tree (:data:`HIDDEN` or :data:`HIDDEN_WITH_HELPER`). Returns ``dest``."""
    for rel, text in REPO.items():
        (dest / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "repo" / rel).write_text(text)
    for rel, text in hidden.items():
        (dest / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "hidden" / rel).write_text(text)
    (dest / "task.toml").write_text(TASK_TOML)
    (dest / "reference.patch").write_bytes(
        make_patch(dest / "repo", {"calc/core.py": FIX}))
    return dest
