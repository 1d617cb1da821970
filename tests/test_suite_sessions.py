"""An early end is not tampering: the supervisor's per-test kill, the sessions that follow an
early end, and the pure rules that judge them (``proctor.suites.pytest_runner``).

Host-level cases run ``run_pytest.py`` on the host interpreter (no sandbox); the sandbox
cases run whole suites through :func:`run_suite` on both backends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proctor.suites import INCONTAINER, EmbeddedTripwire, SuiteRun
from proctor.suites.pytest_runner import (
    Session,
    StreamedReport,
    SuiteProgress,
    Tripwire,
    end_reason,
    read_runner_output,
    vouched,
)

TRIP = Tripwire("/proctor/t-1", "test_t.py", "test_fail", "test_pass")
FAIL = "/proctor/t-1/test_t.py::test_fail"


# --------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize("ended,code,want", [
    ({"why": "completed", "phase": "finish"}, 1, None),
    ({"why": "completed", "phase": "finish"}, 0, None),
    ({"why": "completed", "phase": "finish"}, 5, None),
    ({"why": "completed", "phase": "finish"}, 4, "collection_error"),
    ({"why": "completed", "phase": "finish"}, 3, "interpreter_exit"),
    ({"why": "deadline", "phase": "test"}, 137, "suite_deadline"),
    ({"why": "item_timeout", "phase": "test"}, 137, "test_timeout"),
    ({"why": "item_timeout", "phase": "collect"}, 137, "collection_error"),
    ({"why": "item_timeout", "phase": "startup"}, 137, "collection_error"),
    ({"why": "exited", "phase": "test", "signal": None}, 3, "interpreter_exit"),
    ({"why": "exited", "phase": "test", "signal": 11}, 139, "interpreter_exit"),
    ({"why": "exited", "phase": "test", "signal": 9, "oom": True}, 137, "resource_limit"),
    ({"why": "exited", "phase": "test", "signal": 25}, 153, "resource_limit"),
    ({"why": "exited", "phase": "startup", "signal": None}, 4, "collection_error"),
])
def test_why_a_session_ended(ended, code, want):
    assert end_reason(ended, code, StreamedReport()) == want


def _session(outcomes, reason=None, item=None, phase=None, items=None, trip=True, **kw):
    outcomes = dict(outcomes)
    report = StreamedReport(outcomes={**outcomes, **({FAIL: "failed"} if trip else {})},
                            items=items)
    return Session(outcomes=outcomes, tampered=[], tripwire=None, reason=reason,
                   ended={"item": item, "item_phase": phase}, exit_code=1,
                   collection_errors=kw.get("errors", []),
                   items=items if items is not None else list(outcomes),
                   vouched=vouched(report, TRIP, kw.get("embedded")))


def test_a_hung_test_is_a_timeout_and_the_rest_run_in_a_new_session():
    items = ["t::a", "t::hang", "t::b"]
    p = SuiteProgress()
    # session 1: a passed, then `hang` ran past the limit before the tripwire reported
    assert p.add(_session({"t::a": "passed"}, "test_timeout", "t::hang", "test", items,
                          trip=False))
    assert p.done == {"t::hang": "timeout"} and p.pending == {"t::a": "passed"}
    assert p.skip() == {"ids": ["t::hang"], "paths": []}  # a runs again: not vouched for
    assert p.add(_session({"t::a": "passed", "t::b": "passed"}, items=["t::a", "t::b"]))
    assert p.final_outcomes() == {"t::a": "passed", "t::hang": "timeout", "t::b": "passed"}
    assert p.ended_early() == ["test_timeout"]


def test_passes_never_vouched_for_are_unverified():
    # code that fakes a pass and kills the process in the next test, in every session
    p = SuiteProgress()
    items = ["t::a", "t::b", "t::c"]
    assert p.add(_session({"t::a": "passed"}, "interpreter_exit", "t::b", "test", items,
                          trip=False))
    assert p.add(_session({"t::a": "passed"}, "interpreter_exit", "t::c", "test",
                          ["t::a", "t::c"], trip=False))
    assert not p.add(_session({"t::a": "passed"}, "interpreter_exit", None, None, ["t::a"],
                              trip=False))
    assert p.final_outcomes() == {"t::a": "unverified", "t::b": "crashed", "t::c": "crashed"}


def test_the_embedded_tripwire_vouches_only_when_its_module_ran():
    hidden = EmbeddedTripwire("tests/test_a.py", "test_keys")
    out = {FAIL: "failed", "tests/test_b.py::test_x": "passed"}
    in_items = [FAIL, "tests/test_a.py::test_keys", "tests/test_b.py::test_x"]
    assert not vouched(StreamedReport(outcomes=out, items=in_items), TRIP, hidden)
    assert vouched(StreamedReport(outcomes=out, items=[FAIL, "tests/test_b.py::test_x"]),
                   TRIP, hidden)  # its module failed to collect: nothing to wait for
    out["tests/test_a.py::test_keys"] = "failed"
    assert vouched(StreamedReport(outcomes=out, items=in_items), TRIP, hidden)


def test_a_module_whose_import_hangs_or_fails_is_left_out():
    p = SuiteProgress()
    assert p.add(_session({}, "collection_error", "tests/test_a.py", "collect", None,
                          trip=False))
    assert p.add(_session({"tests/test_b.py::test_x": "passed"},
                          errors=["tests/test_c.py"]))
    assert p.skip()["paths"] == ["tests/test_a.py", "tests/test_c.py"]
    assert p.final_outcomes() == {"tests/test_b.py::test_x": "passed"}


def test_tests_of_a_module_that_failed_to_collect_are_errors():
    run = SuiteRun("public", {"tests/test_b.py::test_x": "passed"}, "", 1, 0.0, "",
                   collection_errors=["tests/test_a.py", "pkg"])
    assert run.outcomes_for(["tests/test_a.py::test_y", "tests/test_b.py::test_x",
                             "pkg/sub/test_m.py::test_z", "tests/test_q.py::test_w"]) == {
        "tests/test_a.py::test_y": "error", "tests/test_b.py::test_x": "passed",
        "pkg/sub/test_m.py::test_z": "error", "tests/test_q.py::test_w": "missing"}


# --------------------------------------------------------------------------- host supervisor


def _supervise(tmp_path: Path, files: dict[str, str], *targets: str, item_timeout=None,
               deadline=None, skip=None):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / TRIP.module).write_text(TRIP.source().decode())
    own = ["--out-dir", str(tmp_path)]
    if item_timeout:
        own += ["--item-timeout", str(item_timeout)]
    if deadline:
        own += ["--deadline", str(deadline)]
    if skip is not None:
        (tmp_path.parent / "skip.json").write_text(json.dumps(skip))
        own += ["--skip-from", str(tmp_path.parent / "skip.json")]
    argv = [sys.executable, "-I", "-B", str(INCONTAINER / "run_pytest.py"), str(tmp_path),
            *own, "--", "-p", "no:cacheprovider",
            "-q", f"--rootdir={tmp_path}", "--continue-on-collection-errors",
            *targets, TRIP.module]
    res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return read_runner_output(res.stdout + res.stderr)


ALARM_OFF = '''
import signal
import time


def test_first():
    assert True


def test_hangs_with_the_alarm_off():
    signal.alarm(0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)


def test_never_reached():
    assert True
'''


def test_a_test_that_disables_the_alarm_is_killed_from_outside(tmp_path):
    start = time.monotonic()
    runner = _supervise(tmp_path, {"test_a.py": ALARM_OFF}, "test_a.py", item_timeout=2)
    assert time.monotonic() - start < 30
    assert runner.ended["why"] == "item_timeout" and runner.ended["phase"] == "test"
    assert runner.ended["item"] == "test_a.py::test_hangs_with_the_alarm_off"
    assert runner.report.outcomes["test_a.py::test_first"] == "passed"
    assert "test_a.py::test_never_reached" not in runner.report.outcomes
    assert "test_a.py::test_never_reached" in runner.report.items


def test_a_later_session_leaves_out_what_was_judged(tmp_path):
    runner = _supervise(tmp_path, {"test_a.py": ALARM_OFF, "test_b.py": "import nope\n"},
                        ".", item_timeout=2,
                        skip={"ids": ["test_a.py::test_first",
                                      "test_a.py::test_hangs_with_the_alarm_off"],
                              "paths": ["test_b.py"]})
    assert runner.ended["why"] == "completed" and runner.exit_code == 1
    assert runner.report.collection_errors == []  # test_b.py was not collected again
    assert set(runner.report.outcomes) == {"test_a.py::test_never_reached",
                                           f"{TRIP.module}::test_fail",
                                           f"{TRIP.module}::test_pass"}


SUBTESTS = '''
import unittest


class TestCases(unittest.TestCase):
    def test_one_subtest_fails(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertLess(i, 2)

    def test_one_subtest_skipped(self):
        for i in range(2):
            with self.subTest(i=i):
                if i:
                    self.skipTest("not here")

    def test_all_pass(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertLess(i, 2)


def test_fixture_subtest_fails(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i < 2
'''


def test_a_failed_subtest_fails_its_test(tmp_path):
    runner = _supervise(tmp_path, {"test_s.py": SUBTESTS}, "test_s.py")
    out = runner.report.outcomes
    assert out["test_s.py::TestCases::test_one_subtest_fails"] == "failed"
    assert out["test_s.py::test_fixture_subtest_fails"] == "failed"
    assert out["test_s.py::TestCases::test_one_subtest_skipped"] == "passed"
    assert out["test_s.py::TestCases::test_all_pass"] == "passed"


def test_a_module_that_fails_to_import_fails_alone(tmp_path):
    runner = _supervise(tmp_path, {"test_ok.py": "def test_ok():\n    assert True\n",
                                   "test_broken.py": "import no_such_module\n"}, ".")
    assert runner.report.collection_errors == ["test_broken.py"]
    assert runner.report.outcomes["test_ok.py::test_ok"] == "passed"
    assert runner.ended["why"] == "completed" and runner.exit_code == 1


DAEMON = '''
import os
import time


def test_leaves_a_daemon_behind(tmp_path_factory):
    if os.fork() == 0:  # double fork: the grandchild is nobody's child but the reaper's
        os.setsid()
        if os.fork() == 0:
            with open(os.environ["PIDFILE"], "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    for _ in range(100):
        if os.path.exists(os.environ["PIDFILE"]):
            break
        time.sleep(0.02)
    os._exit(3)  # and the test process dies in the middle
'''


def test_what_the_code_leaves_running_is_killed_and_an_exit_is_named(tmp_path, monkeypatch):
    pidfile = tmp_path.parent / "daemon.pid"
    monkeypatch.setenv("PIDFILE", str(pidfile))
    runner = _supervise(tmp_path, {"test_d.py": DAEMON}, "test_d.py")
    assert runner.ended["why"] == "exited" and runner.exit_code == 3
    assert runner.ended["item"] == "test_d.py::test_leaves_a_daemon_behind"
    pid = int(pidfile.read_text())
    for _ in range(100):  # reaped by the supervisor: gone, not a zombie
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()


# --------------------------------------------------------------------------- sandboxes

LIB = '''
import os
import signal
import time


def hang_with_the_alarm_off():
    signal.alarm(0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)


def die():
    os._exit(3)
'''
SUITE = '''
from lib import die, hang_with_the_alarm_off


def test_a():
    assert True


def test_b_hangs():
    hang_with_the_alarm_off()


def test_c():
    assert True


def test_d_dies():
    die()


def test_e():
    assert True
'''


@pytest.mark.waits
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_hangs_crashes_and_broken_modules_each_fail_alone(request, backend):
    from proctor.sandbox import Limits, open_sandbox
    from proctor.suites import install_harness, run_suite

    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    with open_sandbox(backend, env, Limits(), None, 600) as sb:
        install_harness(sb)
        sb.put_files("/work/repo", {
            "lib.py": LIB.encode(), "test_s.py": SUITE.encode(),
            "test_broken.py": b"import lib\nimport no_such_module\n",
            "test_slow_import.py": b"import time\ntime.sleep(600)\n"})
        runs = [run_suite(sb, "public", rootdir="/work/repo", repo="/work/repo",
                          targets=["."], per_test_timeout=1, suite_timeout=90,
                          changed=["lib.py"]) for _ in range(2)]
    for run in runs:
        assert not run.tampered and run.tripwire is None, run.tampered
        assert run.outcomes == {"test_s.py::test_a": "passed", "test_s.py::test_b_hangs":
                                "timeout", "test_s.py::test_c": "passed",
                                "test_s.py::test_d_dies": "crashed",
                                "test_s.py::test_e": "passed"}, run.sessions
        assert run.collection_errors == ["test_broken.py", "test_slow_import.py"]
        assert run.ended_early == ["collection_error", "interpreter_exit", "test_timeout"]
        assert run.session_finished


def test_an_embedded_tripwire_whose_copied_body_hangs_vouches_and_is_left_out_later():
    # the tripwire hidden among the hidden tests copies a real test's body: when that body
    # hangs under the patch, the tripwire is the test the session ends in. No pass; it
    # vouches for the session and the next sessions leave it out (else each one hangs).
    hidden = EmbeddedTripwire("tests/test_h.py", "test_keys")
    items = ["tests/test_h.py::test_a", "tests/test_h.py::test_hangs"]
    report = StreamedReport(outcomes={FAIL: "failed", "tests/test_h.py::test_a": "passed"},
                            items=[*items, "tests/test_h.py::test_keys"])
    assert vouched(report, TRIP, hidden, "tests/test_h.py::test_keys")
    assert not vouched(report, TRIP, hidden, None)
    p = SuiteProgress("tests/test_h.py::test_keys")
    session = Session({"tests/test_h.py::test_a": "passed"}, [], None, "test_timeout",
                      {"item": "tests/test_h.py::test_keys", "item_phase": "test"}, 137, [],
                      items, True)
    assert p.add(session)
    assert p.skip()["ids"] == ["tests/test_h.py::test_a", "tests/test_h.py::test_keys"]
    assert "tests/test_h.py::test_keys" not in p.final_outcomes()


CLOSES_FDS_AFTER_MANY = '''
import os
import time

import pytest


@pytest.mark.parametrize("n", range(2000))
def test_quick(n):
    assert n >= 0


def test_tidy_fds():
    os.closerange(3, 4096)
    time.sleep(60)
'''


def test_a_closed_channel_blames_the_test_running_not_an_earlier_one(tmp_path):
    # Thousands of quick tests put the supervisor many records behind the child; when the
    # last one closes every inherited fd, the supervisor kills the session at once. The
    # records still buffered say which test was running: read them before blaming, or an
    # earlier test is blamed (and, in a suite, every test ends up not_run).
    runner = _supervise(tmp_path, {"test_m.py": CLOSES_FDS_AFTER_MANY}, "test_m.py")
    assert runner.ended["why"] == "channel_closed", runner.ended
    assert runner.ended["item"] == "test_m.py::test_tidy_fds"
    assert runner.ended["item_phase"] == "test"
    assert sum(o == "passed" for o in runner.report.outcomes.values()) == 2000


INTERRUPT = '''
def test_first():
    assert True


def test_interrupts():
    raise KeyboardInterrupt


def test_after():
    assert True
'''


def test_a_test_that_interrupts_the_session_is_the_one_blamed(tmp_path):
    runner = _supervise(tmp_path, {"test_i.py": INTERRUPT}, "test_i.py")
    # the session record came while the test was still open: the session did not run to
    # its end, whatever pytest's exit status says
    assert runner.exit_code == 2 and runner.ended["why"] == "exited"
    assert runner.ended["item"] == "test_i.py::test_interrupts"
    assert end_reason(runner.ended, runner.exit_code, runner.report) == "interpreter_exit"


def test_a_budget_too_short_for_the_next_session_is_a_suite_deadline():
    p = SuiteProgress()
    p.add(_session({"t::a": "passed"}, "test_timeout", "t::b", "test", ["t::a", "t::b", "t::c"]))
    p.out_of_budget = True  # run_suite: less than MIN_SESSION_S left for the next session
    assert p.ended_early() == ["suite_deadline", "test_timeout"]
    assert p.final_outcomes() == {"t::a": "passed", "t::b": "timeout", "t::c": "not_run"}
