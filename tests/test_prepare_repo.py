"""The repo copy + ``git apply`` in one sandbox command (``workspace.prepare_repo``): the
host-built single-commit repository, the apply fallbacks and git's message on failure, and
the post-apply tree report run in the same command (both backends)."""

from __future__ import annotations

import io
import shutil
import tarfile

import pytest

from proctor import load_task
from proctor.harness.pipeline import open_patched_sandbox
from proctor.harness.pipeline.workspace import repo_archive
from proctor.sandbox import REPO, SandboxSpec
from tests.counting_sandbox import CountingSandbox

pytestmark = pytest.mark.docker
BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]


def _env(request, backend: str) -> str:
    return request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")


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
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), patch)
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
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), patch)
    with sb:
        assert not applied.applied and applied.strategy is None
        assert "error" in applied.output and "@@proctor" not in applied.output
        status = sb.run(["git", "status", "--porcelain"], timeout=30, cwd=REPO)
        assert status.ok and status.output == ""


def test_harness_mount_holds_exactly_what_install_harness_puts(tmp_path, monkeypatch):
    from proctor.harness.pipeline.suites_in_sandbox import _PutRecorder, harness_mount
    from proctor.sandbox import HARNESS_DIR
    from proctor.suites import install_harness

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
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), None)
    with sb:
        res = sb.run(["sh", "-c", "ls /proctor/harness; touch /proctor/harness/x"],
                     timeout=30, user="0:0")
        assert "run_pytest.py" in res.output and "Read-only file system" in res.output


def test_repo_archive_is_built_once_per_task_and_kept_on_disk(toolz_task, tmp_path,
                                                              monkeypatch):
    from proctor.harness.pipeline import workspace

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


@pytest.mark.parametrize("backend", BACKENDS)
def test_tree_report_runs_in_the_apply_command_and_matches_the_report_of_its_own(
        toolz_task, request, backend):
    from proctor.harness.tamper import inspect_patched_tree, read_patched_tree, wanted_texts
    from proctor.patch import parse_patch

    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes()
    summary = parse_patch(patch.decode())
    sb, applied = open_patched_sandbox(task, SandboxSpec(_env(request, backend), backend), patch,
                                       tree_paths=wanted_texts(summary))
    with sb:
        assert applied.applied and applied.strategy == "git_apply"
        assert "@@proctor" not in applied.output and "hashes" not in applied.output
        assert applied.tree_report is not None and not applied.tree_report_cut
        assert 0 < applied.tree_report_s < applied.duration_s + applied.tree_report_s
        counting = CountingSandbox(sb)
        printed = read_patched_tree(counting, REPO, summary, printed=applied.tree_report)
        assert counting.ops == []  # nothing more to run
        assert printed == read_patched_tree(sb, REPO, summary)  # as a command of its own
        assert set(printed.texts) == {"toolz/itertoolz.py"}
        verdict = inspect_patched_tree(counting, task, REPO, summary, 60,
                                       applied.tree_report)
        assert verdict.violations == [] and counting.ops == []
        gone = sb.run(["sh", "-c", "ls -a /work"], timeout=30)
        assert gone.output.split() == [".", "..", "repo"]  # the path list is removed too


def test_tree_report_not_run_when_not_asked_or_when_the_patch_does_not_apply(
        toolz_task, docker_ready):
    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes()
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), patch)
    with sb:
        assert applied.applied and applied.tree_report is None and applied.tree_report_s == 0
    stale = patch.replace(b"\n def ", b"\n def zz", 1)
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), stale, tree_paths=[])
    with sb:
        assert not applied.applied and applied.tree_report is None
        assert not applied.tree_report_cut and "@@proctor" not in applied.output


@pytest.mark.parametrize("backend", BACKENDS)
def test_tree_report_cut_at_the_output_cap_is_read_from_a_file(toolz_task, request, backend):
    from proctor.harness.tamper import read_patched_tree, wanted_texts
    from proctor.patch import parse_patch
    from proctor.sandbox import Limits

    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes()
    summary = parse_patch(patch.decode())
    sb, applied = open_patched_sandbox(
        task, SandboxSpec(_env(request, backend), backend, Limits(output_cap=1500)), patch,
        tree_paths=wanted_texts(summary))
    with sb:
        assert applied.applied and applied.strategy == "git_apply"
        assert applied.tree_report is None and applied.tree_report_cut
        counting = CountingSandbox(sb)
        tree = read_patched_tree(counting, REPO, summary, printed=None, cut=True)
        assert counting.ops == ["run", "get_file"]  # straight to the file
        assert "toolz/itertoolz.py" in tree.hashes and set(tree.texts) == {"toolz/itertoolz.py"}


def test_tree_report_that_fails_in_the_apply_command_runs_again_and_fails_loudly(
        toolz_task, docker_ready, monkeypatch):
    from proctor.errors import InfraError
    from proctor.harness.pipeline import workspace
    from proctor.harness.tamper import read_patched_tree
    from proctor.patch import parse_patch

    # a report script that is not there: the apply still stands, the report is missing
    monkeypatch.setattr(workspace, "tree_report_argv",
                        lambda repo, out, paths: ["/proctor/harness/missing.py"])
    task = load_task(toolz_task)
    patch = task.reference_patch.read_bytes()
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), patch, tree_paths=[])
    with sb:
        assert applied.applied and applied.tree_report is None and not applied.tree_report_cut
        assert "@@proctor" not in applied.output
        summary = parse_patch(patch.decode())
        tree = read_patched_tree(sb, REPO, summary, printed=applied.tree_report)
        assert "toolz/itertoolz.py" in tree.hashes  # the real script, run on its own
        from proctor.harness.tamper import tree as tamper

        monkeypatch.setattr(tamper, "tree_report_argv",  # failing on its own too: loudly
                            lambda repo, out, paths: ["/proctor/harness/missing.py"])
        with pytest.raises(InfraError, match="post-apply tree report failed"):
            read_patched_tree(sb, REPO, summary, printed=applied.tree_report)
