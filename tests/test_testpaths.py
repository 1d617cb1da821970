"""What counts as a test file (proctor.patch.testpaths), and the two questions built on it:
the tamper checks' (tests and test data) and mutation's (code never mutated). Each answer is
pinned: the definitions were merged from four copies, and none of their answers changed."""

from __future__ import annotations

import pytest

from proctor.harness.tamper.tests_weakened import is_test_path as tamper_is_test
from proctor.patch import in_test_dir, is_test_module
from proctor.suites.mutation import is_test_path as mutation_is_test

ROOTS = ["spec", "pkg/mod.py"]  # the task's test paths

# path: (test module, under a test dir, tamper with ROOTS, mutation with ROOTS)
CASES = {
    "test_a.py": (True, False, True, True),
    "a_test.py": (True, False, True, True),
    "pkg/test_a.py": (True, False, True, True),
    "a/b/c_test.py": (True, False, True, True),
    "test_.py": (True, False, True, True),
    "_test.py": (True, False, True, True),
    "spec/test_thing.py": (True, False, True, True),
    "pkg/tests/helpers.py": (False, True, True, False),
    "pkg/Tests/x.py": (False, True, True, False),
    "pkg/testing/util.py": (False, True, True, False),
    "pkg/fixtures/data.json": (False, True, True, False),
    "pkg/test_data/x.py": (False, True, True, False),
    "tests/conftest.py": (False, True, True, True),
    "conftest.py": (False, False, False, True),
    "pkg/conftest.py": (False, False, False, True),
    "pkg/mod.py": (False, False, True, True),
    "src/pkg/core.py": (False, False, False, False),
    "testing.py": (False, False, False, False),
    "tests_x/mod.py": (False, False, False, False),
    "pkg/tests": (False, False, False, False),
    "Test_a.py": (False, False, False, False),
    "test_a.pyc": (False, False, False, False),
    "pkg/test_a.txt": (False, False, False, False),
    "mytest.py": (False, False, False, False),
    "tests.py": (False, False, False, False),
    "test.py": (False, False, False, False),
}


@pytest.mark.parametrize("path", sorted(CASES))
def test_each_question_keeps_its_answer(path):
    module, in_dir, tamper, mutation = CASES[path]
    assert is_test_module(path) is module
    assert is_test_module(path.rsplit("/", 1)[-1]) is module  # a bare name works too
    assert in_test_dir(path) is in_dir
    assert tamper_is_test(path, ROOTS) is tamper
    assert mutation_is_test(path, ROOTS) is mutation


def test_without_task_paths_only_the_names_decide():
    assert tamper_is_test("pkg/mod.py") is False
    assert mutation_is_test("pkg/mod.py", []) is False
    assert mutation_is_test("spec/helper.py", []) is False
    assert tamper_is_test("spec/helper.py", ["spec/"]) is True
