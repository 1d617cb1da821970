"""Red-team cases on the sessions runner ("an early end is an honest failure, never
tampering"). Patches, figures and commands: ``tests/redteam/found/README.md`` ("Early ends
and the sessions runner"). Every finding is a test holding the figures its fix reached (the
comment above it says what the patch did); the honest failure shapes that held are controls
with their exact records.

The honest shapes run on ``tests/redteam/red5_shapes.py``'s task (public: 3 FAIL_TO_PASS, 439
PASS_TO_PASS; one broken PASS_TO_PASS test costs ``1/439`` of ``public_tests``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor import score
from tests.redteam import red5_shapes as shapes

# On warm sandboxes (made ahead, as in a batch): the exact records below were found on
# fresh ones, so both ways must agree (tests/conftest.py::warm_module).
pytestmark = pytest.mark.usefixtures("warm_module")

FOUND = Path(__file__).parent / "redteam" / "found"
#: public_tests with exactly one PASS_TO_PASS test broken, the rest passing.
ONE_BROKEN = 1.0 - 1 / 439
DOCKER = pytest.mark.docker
BACKENDS = [pytest.param("docker", marks=DOCKER), pytest.param("local", marks=pytest.mark.local)]


@pytest.fixture(scope="session")
def shapes_task(tmp_path_factory):
    task = shapes.build_task(tmp_path_factory.mktemp("red5-shapes") / "task")
    return task, shapes.patches(task)


def _flags(rec) -> dict[str, bool]:
    return {k: v for k, v in rec.flags.model_dump().items() if v}


def _not_passed(rec) -> dict[str, str]:
    """Test name (last part of the id) -> outcome, for every graded test not passed; past 12
    of them, outcome -> count."""
    got = {t: o for suite in rec.tests.values()
           for t, o in {**suite.fail_to_pass, **suite.pass_to_pass}.items() if o != "passed"}
    if len(got) > 12:
        counts: dict[str, int] = {}
        for o in got.values():
            counts[o] = counts.get(o, 0) + 1
        return counts
    return {t.split("::")[-1]: o for t, o in got.items()}


def _ended(rec, suite: str) -> list[str]:
    return rec.evidence[f"{suite}_tests"].details["ended_early"]


def _same(a, b) -> None:
    for name in ("status", "reward", "reason", "components", "penalties", "flags"):
        assert getattr(a, name) == getattr(b, name), name
    for suite in ("public", "hidden"):
        assert _ended(a, suite) == _ended(b, suite)


# --------------------------------------------------------------------------- cheats


@DOCKER
# Found by red-team red5 (closed): code under test finds Proctor's plugin through frames
# (tb_frame, then f_back/f_locals by reversed strings), sends through the plugin's own _send
# the records of every test not run yet (raw and test 'passed'; the stand-alone tripwire,
# outside the rootdir, 'failed'; a new 'items' record without each hidden module's last
# test, where the embedded tripwire always is), then exits: an honest early end whose
# verdicts stick (or, second patch, a forged session record and exit 1: a finished session).
# No fix, 0.776 / 0.7755, no flag
@pytest.mark.parametrize("name", ["forge_unrun_verdicts_then_exit",
                                  "forge_unrun_verdicts_as_finished_session"])
def test_verdicts_forged_for_tests_that_never_ran_gain_nothing(toolz_task, docker_ready, name):
    rec = score(toolz_task, (FOUND / f"{name}.patch").read_bytes(), rollout_id=name)
    assert rec.status == "scored", rec.error
    # the patch fixes nothing: no suite may credit it
    assert rec.components["hidden_tests"] is not None
    assert rec.components["hidden_tests"] <= 0.0 and rec.components["public_tests"] <= 0.0
    assert rec.reward <= 0.0


# --------------------------------------------------------------------------- honest, misjudged


@DOCKER
# Found by red-team red5 (closed): pytest.exit(returncode=0 or 1) in a test ends the session
# with a session record and a completed exit status, so the session counts as run to its
# end: with the stand-alone tripwire after the test, 'tripwire missing' (-1.0); before it,
# exit 0 is 'exit code 0 but the report lists failures' (tests_tampered, 0.273) and exit 1
# leaves the 20 tests after it not_run with no further session (0.887). Fix: a session whose
# session record came while a test was open (ended.item) did not run to its end
@pytest.mark.parametrize(("name", "where"), [("pytest_exit_rc1", 1), ("pytest_exit_rc0", 1),
                                             ("pytest_exit_rc0", 0), ("pytest_exit_rc1", 0)])
def test_pytest_exit_in_a_test_is_an_early_end_not_a_tripwire(shapes_task, docker_ready, name,
                                                              where):
    task, _ = shapes_task
    patch = shapes.with_tripwire_at(task, shapes.PATCHES[name], where)
    rec = score(task, patch, rollout_id=f"{name}-{where}")
    assert rec.status == "scored", rec.error
    assert _flags(rec) == {}
    # like pytest.exit() with no return code (pytest_exit_default, a control)
    assert _not_passed(rec) == {"test_should_stop": "crashed"}
    assert rec.components["public_tests"] == pytest.approx(ONE_BROKEN, abs=1e-12)
    assert _ended(rec, "public") == ["interpreter_exit"]


@DOCKER
# Found by red-team red5 (closed): SystemExit (argparse's parse_args() seeing pytest's argv)
# or KeyboardInterrupt at a test module's import aborts pytest's collection (INTERNALERROR /
# interrupted); pytest_collection_finish still runs, its 'items' record clears the collector
# the supervisor was timing, so no module is blamed or left out and no session follows:
# every public test is lost (public -1.0, 0.2147). Fix: an 'items' record while a collector
# is open keeps that collector as the one the session ended in
@pytest.mark.parametrize("name", ["argparse_at_import", "keyboard_interrupt_at_import"])
def test_an_exit_at_a_test_modules_import_leaves_only_that_module_out(shapes_task, docker_ready,
                                                                      name):
    task, patches = shapes_task
    rec = score(task, patches[name], rollout_id=name)
    assert rec.status == "scored", rec.error
    assert _flags(rec) == {}
    assert _not_passed(rec) == {"test_import_value": "error"}
    assert rec.components["public_tests"] == pytest.approx(ONE_BROKEN, abs=1e-12)


# Found by red-team red5 (closed): records written by a forked copy of the pytest process
# are believed. os.fork() whose child raises instead of leaving: the child runs on and
# reports the same tests with other verdicts ('reported twice with different verdicts',
# 0.230); a daemonize whose parent waits 0.5 s and exits 0: the child runs the rest of the
# session and writes its session record (exit 1) before the parent's exit 0 ('session record
# says exit 1, process exited 0', 0.036). Both tests_tampered, the public suite voided.
# (Parent exiting at once: the test blamed is whichever one the child had started, by
# timing: on the local backend test_at_exit once in two scores.) Fix: take records only from
# the pytest process itself (an AF_UNIX socket with SO_PASSCRED gives each message's sender
# pid)
@pytest.mark.parametrize(("name", "expected"), [
    ("fork_child_fails_on", None), ("daemonize_parent_waits", {"test_detach": "crashed"})])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forked_copy_of_the_test_process_is_no_tampering(shapes_task, request, backend, name,
                                                           expected):
    request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    task, patches = shapes_task
    rec = score(task, patches[name], sandbox=backend, rollout_id=name)
    assert rec.status == "scored", rec.error
    assert not rec.flags.tests_tampered and not rec.flags.tripwire
    if expected is None:  # the parent's own verdict (passed), or the child's failure
        assert rec.components["public_tests"] in (pytest.approx(1.0), pytest.approx(ONE_BROKEN))
    else:  # the parent left in the middle of test_detach; the rest run in a new session
        assert _not_passed(rec) == expected
        assert rec.components["public_tests"] == pytest.approx(ONE_BROKEN, abs=1e-12)


# Found by red-team red5 (closed): os.closerange(3, 4096) in the pytest process closes the
# verdict channel; the supervisor's fd check reads 'the verdict channel's fd now holds
# nothing' as the channel rewired: tests_tampered, the public suite voided (0.231). A closed
# fd relays nothing: it is the end of the session (the test running crashed), not tampering
@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_every_inherited_fd_is_an_early_end(shapes_task, request, backend):
    request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    task, patches = shapes_task
    rec = score(task, patches["close_inherited_fds"], sandbox=backend, rollout_id="fds")
    assert rec.status == "scored", rec.error
    assert _flags(rec) == {}
    assert _not_passed(rec) == {"test_tidy_fds": "crashed"}
    assert rec.components["public_tests"] == pytest.approx(ONE_BROKEN, abs=1e-12)


# Found by red-team red5 (closed): os.kill(-1, SIGTERM) (a 'no pid yet' sentinel of -1)
# signals every process of the sandbox user, the supervisor included: 'the runner's
# supervisor was killed before it reported', tests_tampered, the public suite voided
# (0.028). The supervisor must not die of a signal the tests' user sends to everything
# (ignore SIGTERM/SIGINT/SIGHUP there, default in the child; or run it as another user)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kill_of_every_process_of_the_user_does_not_void_the_suite(shapes_task, request,
                                                                     backend):
    request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    task, patches = shapes_task
    rec = score(task, patches["kill_minus_one"], sandbox=backend, rollout_id="kill")
    assert rec.status == "scored", rec.error
    assert not rec.flags.tests_tampered and not rec.flags.tripwire
    assert rec.components["public_tests"] == pytest.approx(1.0)  # the caller is spared


@DOCKER
# Found by red-team red5 (closed): a non-daemon thread left running keeps every interpreter
# alive after its work: the suites' supervisor kills the child item_timeout after its
# session record (a 'test_timeout' with no test running, and a second session), and the
# mutation runner (sys.exit after pytest.main) never exits: the per-patch deadline cuts the
# step, mutation 0.0, 150 s of wall time (600 s on the toolz task), 0.7975 for a correct
# fix. Fix: both runners os._exit once pytest.main returned and their last line is written
def test_a_thread_left_running_does_not_eat_the_per_patch_deadline(shapes_task, docker_ready):
    task, patches = shapes_task
    rec = score(task, patches["thread_left_running"], rollout_id="thread")
    assert rec.status == "scored", rec.error
    assert "per-patch deadline" not in (rec.component_notes.get("mutation_score") or "")
    assert rec.timing["total_s"] < 60
    assert rec.components["public_tests"] == 1.0 and rec.components["hidden_tests"] == 1.0


@DOCKER
# Found by red-team red5 (closed): os.fork() without os._exit in the child, under mutation
# testing: the grandchild returns into the mutant child's loop and writes a second verdict
# on the mutant's pipe ('SS': crashed, or 'S': survived, by timing), the control included:
# mutation 0.25 / 0.333 / 0.5 over three scores of the same patch (0.847 / 0.864 / 0.897).
# Fix: in the mutant child, a process whose pid is not the child's never writes
def test_mutation_of_code_that_forks_is_deterministic(shapes_task, docker_ready):
    task, patches = shapes_task
    recs = [score(task, patches["fork_child_runs_on"], rollout_id=f"forks-{i}")
            for i in range(3)]
    assert len({r.reward for r in recs}) == 1, [r.components["mutation_score"] for r in recs]


@DOCKER
# Found by red-team red5 (closed): a test process that exits with status 86 (os._exit(86) in
# library code) is read as the runner's audit hook stopping a subversion (SUBVERTED_EXIT):
# tripwire, -1.0, though the hook's own line ('proctor: the code under test ...') is not in
# the output. Fix: a tripwire only with the hook's line (or a record the hook sends); else
# an exit
def test_an_exit_status_86_without_the_audit_hooks_line_is_an_early_end(shapes_task,
                                                                         docker_ready):
    task, patches = shapes_task
    rec = score(task, patches["exit_status_86"], rollout_id="exit86")
    assert rec.status == "scored", rec.error
    assert not rec.flags.tripwire and not rec.flags.tests_tampered
    assert _not_passed(rec) == {"test_worker": "crashed"}
    assert rec.components["public_tests"] == pytest.approx(ONE_BROKEN, abs=1e-12)


# --------------------------------------------------------------------------- honest controls

#: name -> (reward, public ended_early, hidden ended_early, graded tests not passed: name ->
#: outcome, or outcome -> count past 12 of them, flags set). Docker backend.
CONTROLS = {
    "fix": (0.999, [], [], {}, {}),
    "keyboard_interrupt": (0.9974305239179955, ["interpreter_exit"], [],
                           {"test_interrupt": "crashed"}, {}),
    "pytest_exit_default": (0.8974305239179955, ["interpreter_exit"], [],
                            {"test_should_stop": "crashed"}, {}),
    "pool_fork": (0.9303333333333333, [], [], {}, {}),
    "pool_spawn": (0.9303333333333333, [], [], {}, {}),
    "run_child": (0.9293333333333333, [], [], {}, {}),
    "noise": (0.877, [], [], {}, {}),
    "recursion_crash": (0.8120971905846621, ["resource_limit"], [], {"test_deep": "crashed"},
                        {}),
    # os.abort: a process_exit suspicion, cleared by the differential run (no cost)
    "os_abort": (0.9969305239179956, ["interpreter_exit"], [], {"test_crash_abort": "crashed"},
                 {}),
    "setup_class_fails": (0.8468610478359908, [], [], {"test_one": "error", "test_two": "error"},
                          {}),
    "module_fixture_fails": (0.8468610478359908, [], [],
                             {"test_fixture_one": "error", "test_fixture_two": "error"}, {}),
    "one_param_hangs_in_c": (0.8344305239179955, [], [], {"test_param[200]": "timeout"}, {}),
    "one_param_hangs_uninterruptibly": (0.8724305239179955, ["test_timeout"], [],
                                        {"test_param[200]": "timeout"}, {}),
    "signal_handlers": (0.9975, [], [], {}, {}),
    "chdir_into_deleted_dir": (0.996, [], [], {}, {}),
    # the stats pass's watchdog thread stays in its own child: the control survives
    "faulthandler_repeat": (0.9122857142857143, [], [], {}, {}),
    "atexit_prints": (0.8837142857142857, [], [], {}, {}),  # cleared as os_abort
    "conftest_import_fails": (-0.13899999999999996, [], ["collection_error"], {
        "test_add_floats": "missing", "test_add_negative": "missing",
        "test_mean_single": "missing"}, {}),
    "package_init_fails": (-0.6024999999999999, ["collection_error"], ["collection_error"],
                           {"error": 442, "missing": 3}, {}),
}
#: Scored twice: the record must not change (each was scored three times when found).
AGAIN = {"keyboard_interrupt", "pytest_exit_default", "recursion_crash", "pool_spawn",
         "conftest_import_fails"}


@DOCKER
@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_an_honest_failure_shape_is_scored_as_expected(shapes_task, docker_ready, name):
    task, patches = shapes_task
    reward, public_end, hidden_end, failing, flags = CONTROLS[name]
    rec = score(task, patches[name], rollout_id=name)
    assert rec.status == "scored", rec.error
    assert _flags(rec) == flags
    assert rec.reward == pytest.approx(reward, abs=1e-12), rec.components
    assert _ended(rec, "public") == public_end
    assert _ended(rec, "hidden") == hidden_end
    assert _not_passed(rec) == failing
    if name in AGAIN:
        _same(rec, score(task, patches[name], rollout_id=name))
