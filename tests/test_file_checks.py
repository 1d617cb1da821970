"""``compiled``, static analysis and the restore of the pristine public tests in one sandbox
command (``proctor.suites.file_checks``), on both backends: each part's evidence is what its
own command gave before (command, exit code, run time, details), and a part that fails is
reported as before: the patch's fault a failed step (0.0), the harness's an InfraError."""

from __future__ import annotations

import pytest

from proctor import load_task
from proctor.errors import InfraError
from proctor.harness.pipeline import open_patched_sandbox
from proctor.harness.pipeline.workspace import check_restored, restore_public_tests_step
from proctor.sandbox import REPO, ExecResult, SandboxSpec, Step
from proctor.suites import file_checks, run_file_checks, snapshot_step
from proctor.suites.compile_check import compile_step, judge_compiles
from proctor.suites.snapshot import check_snapshot
from proctor.suites.static_analysis import judge_static, static_step
from tests.counting_sandbox import CountingSandbox

BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]
CORE = "toolz/itertoolz.py"
TEST = "toolz/tests/test_recipes.py"
PATHS = ["toolz/bad.py", CORE, TEST]


@pytest.fixture(scope="module")
def patch(toolz_task, make_toolz_patch) -> bytes:
    """An unused import in the code, a file that does not compile, a public test edited."""
    return make_toolz_patch({
        CORE: ("import operator\n", "import operator\nimport json\n"),
        "toolz/bad.py": (None, "def broken(:\n"),
        TEST: ("def test_countby():\n", "def test_countby():\n    return\n"),
    })


@pytest.fixture
def patched(toolz_task, patch, request, no_leaks):
    """(sandbox with the patch applied, task); closed after."""
    backend = request.param
    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    task = load_task(toolz_task)
    sb, applied = open_patched_sandbox(task, SandboxSpec(env, backend), patch)
    assert applied.applied
    with sb:
        yield sb, task


def _alone(sb, step: Step) -> ExecResult:
    return sb.run(step.argv, timeout=step.timeout, cwd=step.cwd, stdin=step.stdin)


@pytest.mark.parametrize("patched", BACKENDS, indirect=True)
def test_one_command_gives_the_evidence_each_command_of_its_own_gave(patched):
    sb, task = patched
    counting = CountingSandbox(sb)
    checks = run_file_checks(counting, REPO, PATHS, compile_timeout=60, static_timeout=60,
                             then=[restore_public_tests_step(task)])
    assert counting.runs == 1
    # compiled: the same command, exit code and details as the check run on its own
    compiled, evidence = judge_compiles(_alone(sb, compile_step(REPO, PATHS, 60)), 60)
    assert (checks.compiled, checks.compiled_evidence.command) == (0.0, evidence.command)
    assert checks.compiled_evidence.exit_code == evidence.exit_code == 0
    assert checks.compiled_evidence.details == evidence.details
    assert list(evidence.details["failures"]) == ["toolz/bad.py"]
    assert 0 < checks.compiled_evidence.duration_s < 30
    # static analysis: as on a snapshot taken by a command of its own
    assert _alone(sb, snapshot_step(REPO, PATHS, "/tmp/snap")).ok
    static = judge_static(_alone(sb, static_step("/tmp/snap", PATHS, 60)), 60)
    assert checks.static.evidence.details == static.evidence.details
    assert (CORE, "F401") in [(f["path"], f["rule"]) for f in checks.static.new_errors]
    assert checks.static.evidence.command.split()[:3] == static.evidence.command.split()[:3]
    assert checks.static.evidence.exit_code == 0 and checks.static.evidence.duration_s > 0
    # then: the pristine public tests are back (after the checks read the patched ones)
    check_restored(checks.then["restore_public_tests"])
    status = sb.run(["git", "status", "--porcelain"], timeout=30, cwd=REPO).output
    assert sorted(status.split("\n")[:-1]) == [f" M {CORE}", "?? toolz/bad.py"]
    leftovers = sb.run(["sh", "-c", "ls -A /tmp | grep -v '^snap$'"], timeout=10).output
    assert leftovers == ""  # the command's work dir (inputs, snapshot) is gone


@pytest.mark.parametrize("patched", BACKENDS, indirect=True)
def test_without_python_files_only_the_then_steps_run(patched):
    sb, task = patched
    checks = run_file_checks(sb, REPO, [], compile_timeout=60, static_timeout=60,
                             then=[restore_public_tests_step(task)])
    assert (checks.compiled, checks.compiled_evidence, checks.static) == (None, None, None)
    check_restored(checks.then["restore_public_tests"])


@pytest.mark.parametrize("patched", ["docker"], indirect=True)
def test_a_check_that_overruns_its_timeout_fails_its_step_and_the_others_still_run(
        patched, monkeypatch):
    sb, task = patched
    real = file_checks.compile_step
    monkeypatch.setattr(file_checks, "compile_step", lambda repo, paths, timeout: Step(
        "compiled", ["sleep", "60"], timeout, cwd=real(repo, paths, timeout).cwd))
    checks = run_file_checks(sb, REPO, PATHS, compile_timeout=1, static_timeout=60,
                             then=[restore_public_tests_step(task)])
    assert checks.compiled == 0.0
    assert checks.compiled_evidence.details["step_failed"] == "timed out after 1 s"
    assert checks.compiled_evidence.exit_code == 124
    assert "F401" in [f["rule"] for f in checks.static.new_errors]  # measured all the same
    check_restored(checks.then["restore_public_tests"])


@pytest.mark.parametrize("patched", ["docker"], indirect=True)
def test_a_snapshot_that_fails_is_an_infra_error_and_nothing_after_it_runs(patched,
                                                                         monkeypatch):
    sb, task = patched
    monkeypatch.setattr(file_checks, "snapshot_step", lambda repo, paths, dest, **_: Step(
        "snapshot", ["sh", "-c", "echo disk full; exit 1"], 10, required=True))
    with pytest.raises(InfraError, match="cannot snapshot the changed files: disk full"):
        run_file_checks(sb, REPO, PATHS, compile_timeout=60, static_timeout=60,
                        then=[restore_public_tests_step(task)])
    status = sb.run(["git", "status", "--porcelain"], timeout=30, cwd=REPO).output
    assert f" M {TEST}" in status.split("\n")  # the restore did not run either


@pytest.mark.parametrize("patched", ["docker"], indirect=True)
def test_a_checker_that_prints_no_result_is_an_infra_error_as_before(patched, monkeypatch):
    sb, _ = patched
    monkeypatch.setattr(file_checks, "static_step", lambda snapshot, paths, timeout: Step(
        "static_analysis", ["echo", "not json"], timeout))
    with pytest.raises(InfraError, match="static analysis printed no result: not json"):
        run_file_checks(sb, REPO, PATHS, compile_timeout=60, static_timeout=60)


def test_no_result_at_all_is_an_infra_error_for_every_part():
    with pytest.raises(InfraError, match="compile check printed no result"):
        judge_compiles(None, 60)
    with pytest.raises(InfraError, match="static analysis printed no result"):
        judge_static(None, 60)
    with pytest.raises(InfraError, match="cannot snapshot"):
        check_snapshot(None)
    with pytest.raises(InfraError, match="cannot reset public tests: tar: oops"):
        check_restored(ExecResult(("sh",), 2, "tar: oops", 0.1))
    check_restored(ExecResult(("sh",), 0, "", 0.1))
    killed = ExecResult(("python",), 137, "", 0.5)  # killed (memory), not timed out
    score, evidence = judge_compiles(killed, 60)
    assert score == 0.0 and evidence.details["step_failed"] == "killed by signal 9"


@pytest.mark.docker
def test_the_snapshot_step_copies_base_and_patched_versions(toolz_task, patch, docker_ready):
    task = load_task(toolz_task)
    sb, _ = open_patched_sandbox(task, SandboxSpec(docker_ready), patch)
    with sb:
        assert _alone(sb, snapshot_step(REPO, PATHS + ["toolz/gone.py"], "/tmp/s")).ok
        listing = sb.run(["sh", "-c", "cd /tmp/s && find . -type f | sort"], timeout=10)
        assert listing.output.split() == [
            "./base/toolz/itertoolz.py", "./base/toolz/tests/test_recipes.py",
            "./patched/toolz/bad.py", "./patched/toolz/itertoolz.py",
            "./patched/toolz/tests/test_recipes.py"]
        assert "import json" in sb.get_file("/tmp/s/patched/toolz/itertoolz.py").decode()
        assert "import json" not in sb.get_file("/tmp/s/base/toolz/itertoolz.py").decode()
