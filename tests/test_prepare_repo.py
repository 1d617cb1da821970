"""The repo copy + ``git apply`` in one sandbox command (``workspace.prepare_repo``): the
host-built single-commit repository, the apply fallbacks and git's message on failure."""

from __future__ import annotations

import io
import shutil
import tarfile

import pytest

from proctor import load_task
from proctor.harness.suites_in_sandbox import open_patched_sandbox
from proctor.harness.workspace import REPO, repo_archive

pytestmark = pytest.mark.docker


def test_repo_archive_is_one_commit_owned_by_the_sandbox_user_without_compiled_files(
        toolz_task, tmp_path):
    shutil.copytree(toolz_task, tmp_path / "task")
    (tmp_path / "task/repo/toolz/__pycache__").mkdir(exist_ok=True)
    (tmp_path / "task/repo/toolz/__pycache__/x.cpython-311.pyc").write_bytes(b"\0")
    data = repo_archive(load_task(tmp_path / "task"), {"extra/a.txt": b"hello"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        names = {m.name for m in members}
        assert tar.extractfile("extra/a.txt").read() == b"hello"
    assert "repo/.git/HEAD" in names and "repo/toolz/itertoolz.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert {(m.uid, m.gid) for m in members} == {(1000, 1000)}


def test_a_task_repo_with_its_own_git_history_gives_none_of_it(toolz_task, tmp_path):
    import subprocess

    shutil.copytree(toolz_task, tmp_path / "task")
    repo = tmp_path / "task/repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    secret = b"the hidden fix, committed after the task's base\n"
    (repo / "future_fix.txt").write_bytes(secret)
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "future"]):
        subprocess.run([*git, *cmd], cwd=repo, check=True, capture_output=True)
    (repo / "future_fix.txt").unlink()
    blob = subprocess.run(["git", "hash-object", "--stdin"], input=secret, cwd=repo,
                          check=True, capture_output=True).stdout.decode().strip()
    data = repo_archive(load_task(tmp_path / "task"))
    out = tmp_path / "out"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch-check"],
                             cwd=out / "repo", check=True, capture_output=True, text=True)
    log = subprocess.run(["git", "log", "--all", "--format=%s"], cwd=out / "repo",
                         check=True, capture_output=True, text=True)
    assert log.stdout == "snapshot\n"
    assert blob not in objects.stdout
    assert not (out / "repo/future_fix.txt").exists()


def test_patch_applies_in_the_copy_command_and_the_repo_has_a_single_commit(
        toolz_task, docker_ready):
    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes()
    sb, applied = open_patched_sandbox(task, docker_ready, patch)
    with sb:
        assert applied.applied and applied.strategy == "git_apply"
        log = sb.run(["git", "log", "--format=%s"], timeout=30, cwd=REPO)
        assert log.ok and log.output == "snapshot\n"
        status = sb.run(["git", "status", "--porcelain"], timeout=30, cwd=REPO)
        assert status.output.strip() == "M toolz/itertoolz.py"
        gone = sb.run(["sh", "-c", "ls -a /work"], timeout=30)
        assert gone.output.split() == [".", "..", "repo"]  # the patch variants are removed
        owner = sb.run(["stat", "-c", "%u", "toolz/itertoolz.py"], timeout=30, cwd=REPO)
        assert owner.output.strip() == "1000"


def test_patch_that_does_not_apply_leaves_the_pristine_repo_and_git_s_message(
        toolz_task, docker_ready):
    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes().replace(b"\n def ", b"\n def zz", 1)
    sb, applied = open_patched_sandbox(task, docker_ready, patch)
    with sb:
        assert not applied.applied and applied.strategy is None
        assert "error" in applied.output and "@@proctor" not in applied.output
        status = sb.run(["git", "status", "--porcelain"], timeout=30, cwd=REPO)
        assert status.ok and status.output == ""


def test_harness_mount_holds_exactly_what_install_harness_puts(tmp_path, monkeypatch):
    from proctor.harness.suites_in_sandbox import _PutRecorder, harness_mount
    from proctor.suites.pytest_runner import HARNESS_DIR, install_harness

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path))
    rec = _PutRecorder()
    install_harness(rec)
    [(_, files, _)] = rec.puts
    mounts = harness_mount()
    where = mounts[HARNESS_DIR]
    assert {p.name: p.read_bytes() for p in where.iterdir()} == files
    assert where.stat().st_mode & 0o777 == 0o555
    assert {p.stat().st_mode & 0o777 for p in where.iterdir()} == {0o444}
    assert harness_mount() == mounts  # content-addressed: written once, then reused
    assert [p.name for p in where.parent.iterdir()] == [where.name]  # no temp dir left


def test_scoring_sandbox_runs_the_harness_from_the_read_only_mount(toolz_task, docker_ready):
    task = load_task(toolz_task)
    sb, applied = open_patched_sandbox(task, docker_ready, None)
    with sb:
        res = sb.run(["sh", "-c", "ls /proctor/harness; touch /proctor/harness/x"],
                     timeout=30, user="0:0")
        assert "run_pytest.py" in res.output and "Read-only file system" in res.output


def test_repo_archive_is_built_once_per_task_and_kept_on_disk(toolz_task, tmp_path,
                                                              monkeypatch):
    from proctor.harness import workspace

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    builds = []
    real = workspace._build_repo_tar
    monkeypatch.setattr(workspace, "_build_repo_tar", lambda repo: builds.append(repo)
                        or real(repo))
    task = load_task(toolz_task)
    workspace._repo_tar.cache_clear()
    first = repo_archive(task)
    workspace._repo_tar.cache_clear()  # another process: reads the file
    assert repo_archive(task) == first and len(builds) == 1
    [kept] = (tmp_path / "cache" / "repos").iterdir()
    assert kept.name.startswith(task.fingerprint) and kept.read_bytes() in first
    workspace._repo_tar.cache_clear()
