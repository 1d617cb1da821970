"""The example task built by ``examples/toolz/make_task.py`` is valid and behaves as documented.

Needs PyPI once (the sdist is cached in ``examples/toolz/build/.cache``); skipped if the
download fails. Runs the toolz tests on the host with ``python -m pytest``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.task import load_task

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "toolz" / "make_task.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("toolz_make_task", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mk = _load_script()
PATCH_NAMES = ["empty", "reference", "partial", "violation_hidden_tests", "comment_mentions_hidden"]


def _build(out: Path) -> Path:
    try:
        return mk.build(out)
    except mk.DownloadError as exc:
        pytest.skip(f"PyPI unreachable, cannot download toolz=={mk.VERSION}: {exc}")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The build output dir (``task/`` + ``patches/``), built once for the module."""
    out = tmp_path_factory.mktemp("toolz-example")
    _build(out)
    return out


def _checkout(built: Path, dest: Path, patch: str | None) -> Path:
    """A copy of repo/ with ``patch`` applied and the hidden test copied back in."""
    work = dest / "repo"
    shutil.copytree(built / "task" / "repo", work)
    if patch is not None:
        mk.git(work, "init", "-q")
        mk.git(work, "apply", "--allow-empty", str(built / "patches" / f"{patch}.patch"))
        shutil.rmtree(work / ".git")
    shutil.copyfile(built / "task" / "hidden" / mk.HIDDEN_TEST, work / mk.HIDDEN_TEST)
    return work


def _failing_ids(work: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=no", "-rfE",
           *mk.PUBLIC_TESTS, mk.HIDDEN_TEST]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.MULTILINE)))


def test_task_loads(built):
    task = load_task(built / "task")
    assert task.id == mk.TASK_ID
    assert task.config.tests.public == mk.PUBLIC_TESTS
    assert task.config.sources == ["toolz"]
    assert task.hidden_files == [mk.HIDDEN_TEST]
    assert (task.hidden / mk.HIDDEN_TEST).is_file()
    assert not (task.repo / mk.HIDDEN_TEST).exists()
    assert not list(task.hidden.rglob("__init__.py"))
    assert not (task.repo / "toolz.egg-info").exists()
    assert task.reference_patch.read_bytes() == (built / "patches/reference.patch").read_bytes()


@pytest.mark.parametrize("name", PATCH_NAMES)
def test_patch_applies(built, name, tmp_path):
    patch = built / "patches" / f"{name}.patch"
    assert patch.is_file()
    work = tmp_path / "repo"
    shutil.copytree(built / "task" / "repo", work)
    mk.git(work, "init", "-q")
    mk.git(work, "apply", "--check", "--allow-empty", str(patch))


def _touched(name: str, built: Path) -> list[str]:
    text = (built / "patches" / f"{name}.patch").read_text()
    return re.findall(r"^diff --git a/(\S+) b/", text, re.MULTILINE)


def test_patch_contents(built):
    assert (built / "patches/empty.patch").read_bytes() == b""
    assert _touched("reference", built) == [mk.BUGGY_FILE]
    assert _touched("partial", built) == [mk.BUGGY_FILE]
    assert _touched("violation_hidden_tests", built) == [mk.BUGGY_FILE, mk.HIDDEN_TEST]
    assert _touched("comment_mentions_hidden", built) == [mk.BUGGY_FILE]
    comment = (built / "patches/comment_mentions_hidden.patch").read_text()
    assert mk.HIDDEN_TEST in comment and "conftest.py" in comment


def test_base_repo_fails_expected_tests(built, tmp_path):
    failing = _failing_ids(_checkout(built, tmp_path, None))
    assert failing == sorted(mk.FAIL_TO_PASS_PUBLIC + mk.FAIL_TO_PASS_HIDDEN)


@pytest.mark.parametrize("name", ["reference", "comment_mentions_hidden"])
def test_fix_passes_everything(built, tmp_path, name):
    assert _failing_ids(_checkout(built, tmp_path, name)) == []


def test_partial_fixes_some_but_not_all(built, tmp_path):
    failing = _failing_ids(_checkout(built, tmp_path, "partial"))
    assert failing == mk.STILL_FAILING_PARTIAL
    assert set(failing) < set(mk.FAIL_TO_PASS_HIDDEN)


def test_build_is_deterministic(built, tmp_path):
    again = _build(tmp_path / "again")
    files = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(built / "task") for p in (built / "task").rglob("*") if p.is_file()
    )
    for rel in files:
        assert (again / rel).read_bytes() == (built / "task" / rel).read_bytes(), rel
    for name in PATCH_NAMES:
        rel = Path("patches") / f"{name}.patch"
        assert (tmp_path / "again" / rel).read_bytes() == (built / rel).read_bytes(), name
