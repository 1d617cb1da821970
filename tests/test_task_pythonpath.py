"""The task field ``pythonpath``: repo directories on ``sys.path`` after the repo, for every
suite and for mutation, so a src layout (``src/pkg``, tests doing ``import pkg``) is a task.

Bad entries are a ``TaskConfigError`` at load (``proctor task check``) naming the entry. End
to end (real sandboxes): a src-layout task whose public tests and hidden tests import the
package only through ``pythonpath = ["src"]``; mutants of ``src/calcpkg`` are judged.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from proctor import load_task, score
from proctor.errors import TaskConfigError
from proctor.patch import code_lines_changed
from proctor.rewards import diff_cost
from tests.test_redteam_corpus import make_patch

CORE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = CORE.replace("return a - b", "return a + b")
PUBLIC = ("from calcpkg import add, mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
          "def test_add():\n    assert add(2, 3) == 5\n")
HIDDEN = ("import calcpkg\n\n\ndef test_add_negative():\n    assert calcpkg.add(-2, -3) == -5\n"
          "\n\ndef test_add_zero():\n    assert calcpkg.add(0, 7) == 7\n\n\n"
          "def test_mul_zero():\n    assert calcpkg.mul(0, 7) == 0\n")
TOML = ('id = "calc-src"\nsources = ["src/calcpkg"]\n{pythonpath}\n'
        '[tests]\npublic = ["tests/test_public.py"]\n\n[baseline]\nruns = 1\n')


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def build(dest: Path, pythonpath: str = 'pythonpath = ["src"]') -> Path:
    """A src-layout task in ``dest``: ``add`` subtracts; ``reference.patch`` fixes it."""
    _write(dest, {"task.toml": TOML.format(pythonpath=pythonpath),
                  "repo/src/calcpkg/__init__.py": "from calcpkg.core import add, mul\n",
                  "repo/src/calcpkg/core.py": CORE, "repo/tests/test_public.py": PUBLIC,
                  "hidden/tests/test_hidden.py": HIDDEN})
    patch = make_patch(dest / "repo", {"src/calcpkg/core.py": FIXED}, dest.parent / "scratch")
    (dest / "reference.patch").write_bytes(patch)
    return dest


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("pythonpath") / "task")


def _with(tmp_path: Path, line: str) -> Path:
    return build(tmp_path / "task", line)


@pytest.mark.parametrize(("line", "why"), [
    ('pythonpath = ["/etc"]', "must be a relative path inside repo/"),
    ('pythonpath = ["../hidden"]', "must be a relative path inside repo/"),
    ('pythonpath = ["lib"]', "'lib' does not exist in repo/"),
    ('pythonpath = ["src/calcpkg/core.py"]', "'src/calcpkg/core.py' is not a directory"),
    ('pythonpath = ["src:lib"]', "cannot hold ':'"),
])
def test_bad_pythonpath_is_a_task_config_error_naming_the_entry(tmp_path, line, why):
    with pytest.raises(TaskConfigError, match="field 'pythonpath'") as exc:
        load_task(_with(tmp_path, line))
    assert why in str(exc.value)


def test_a_symlink_leaving_the_repo_is_a_task_config_error(tmp_path):
    root = _with(tmp_path, 'pythonpath = ["out"]')
    os.symlink(root / "hidden", root / "repo" / "out")
    with pytest.raises(TaskConfigError, match="'out' resolves to .*, outside repo/"):
        load_task(root)


def test_entries_keep_their_order_without_duplicates_or_the_repo_itself(tmp_path):
    root = _with(tmp_path, 'pythonpath = ["src", "./src", ".", "tests"]')
    task = load_task(root)
    assert task.config.pythonpath == ["src", "tests"]
    assert task.pythonpath_in("/work/repo") == ["/work/repo/src", "/work/repo/tests"]


def test_the_default_is_empty_and_changes_no_path(tmp_path):
    task = load_task(_with(tmp_path, ""))
    assert task.config.pythonpath == [] and task.pythonpath_in("/work/repo") == []


@pytest.mark.docker
def test_src_layout_reference_fix_scores_every_component(task_dir):
    patch = (task_dir / "reference.patch").read_bytes()
    rec = score(load_task(task_dir), patch, rollout_id="reference")
    assert rec.status == "scored", rec.error
    assert rec.tests["public"].fail_to_pass == {"tests/test_public.py::test_add": "passed"}
    assert rec.tests["hidden"].fail_to_pass == {
        "tests/test_hidden.py::test_add_negative": "passed",
        "tests/test_hidden.py::test_add_zero": "passed"}
    assert rec.components["public_tests"] == rec.components["hidden_tests"] == 1.0
    # the mutants of `return a + b` in src/calcpkg/core.py are imported as calcpkg.core
    assert rec.components["mutation_score"] == 1.0
    assert rec.evidence["mutation"].details["mutants_selected"] > 0
    assert rec.reward == pytest.approx(1.0 - diff_cost(code_lines_changed(patch.decode())))


@pytest.mark.docker
def test_src_layout_empty_patch_scores_zero(task_dir):
    rec = score(load_task(task_dir), b"", rollout_id="empty")
    assert rec.status == "scored" and rec.reward == 0.0


@pytest.mark.docker
def test_without_pythonpath_the_package_does_not_import(tmp_path):
    """The same task without the field: its tests cannot import ``calcpkg`` on the base repo
    or with the fix, which no patch could be fairly scored against."""
    task = load_task(_with(tmp_path, ""))
    patch = (task.root / "reference.patch").read_bytes()
    rec = score(task, patch, rollout_id="no-pythonpath")
    assert rec.status == "error" and rec.reward is None
    assert rec.error is not None and "task_config" in rec.error.kind


def test_build_leaves_a_valid_task(task_dir):
    assert load_task(task_dir).config.pythonpath == ["src"]
    assert shutil.which("git")
