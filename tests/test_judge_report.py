"""judge_report (pure): when may a suite's report be believed?"""

from __future__ import annotations

from proctor.suites import EmbeddedTripwire
from proctor.suites.pytest_runner import StreamedReport, Tripwire, judge_report, vouched

TRIP = Tripwire("/proctor/t-1", "test_t.py", "test_fail", "test_pass")
FAIL = "/proctor/t-1/test_t.py::test_fail"
PASS = "/proctor/t-1/test_t.py::test_pass"
HIDDEN_TRIP = EmbeddedTripwire("tests/test_a.py", "test_keys_values")


def _report(outcomes, raw=None, session=None, **kw):
    raw = {k: ("passed" if v == "passed" else "failed") for k, v in outcomes.items()} \
        if raw is None else raw
    return StreamedReport(outcomes=outcomes, raw=raw, session=session, started=True, **kw)


def test_finished_honest_run_is_believed():
    out = {"a::test_x": "passed", FAIL: "failed", PASS: "passed"}
    real, tampered, trip = judge_report(_report(out, session={"exitstatus": 1}), 1, True, TRIP)
    assert real == {"a::test_x": "passed"} and not tampered and trip is None


def test_a_session_that_ended_early_is_not_tampering_but_its_passes_are_not_vouched_for():
    # Faking every pass, then killing the process before the tripwire module runs, once
    # scored as a complete fix. An early end is no evidence of tampering (an honest hang
    # or crash looks the same): no flag, but the passes it wrote are not vouched for, so
    # they run again in the next session (tests/test_suite_sessions.py).
    out = {"a::test_x": "passed", "a::test_y": "passed"}
    real, tampered, trip = judge_report(_report(out), -9, False, TRIP)
    assert real == out and tampered == [] and trip is None
    assert not vouched(_report(out), TRIP, None)


def test_crash_after_the_tripwire_reported_keeps_the_verdicts():
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "passed"}
    real, tampered, trip = judge_report(_report(out), -11, False, TRIP)
    assert real == {"a::test_x": "passed"} and not tampered and trip is None


def test_a_pass_whose_own_call_failed_or_never_ran_is_tampering():
    # red team: a report rewritten to "passed" after the body raised, and a body that never
    # ran (item.runtest swapped for a no-op: no raw verdict at all)
    out = {"a::test_x": "passed", "a::test_y": "passed", FAIL: "failed", PASS: "passed"}
    raw = {"a::test_x": "failed", FAIL: "failed", PASS: "passed"}
    real, tampered, trip = judge_report(_report(out, raw, {"exitstatus": 1}), 1, True, TRIP)
    assert trip is None
    assert tampered == ["2 test(s) reported passed whose own call did not pass, e.g. "
                        "a::test_x (failed)"]


def test_the_plugins_findings_forged_lines_and_conflicts_are_tampering():
    out = {FAIL: "failed", PASS: "passed"}
    rep = _report(out, session={"exitstatus": 1},
                  tamper=["replaced under the tests: _pytest.runner.call_and_report"],
                  conflicts=["a::test_x"])
    _, tampered, trip = judge_report(rep, 1, True, TRIP, foreign_lines=3)
    assert trip is None and tampered == [
        "the runner was tampered with: replaced under the tests: _pytest.runner.call_and_report",
        "1 test(s) reported twice with different verdicts, e.g. a::test_x",
        "3 line(s) on the verdict channel without the run's nonce: forged records"]


def test_the_tripwire_hidden_among_the_hidden_tests_must_not_pass():
    trip_id = "tests/test_a.py::test_keys_values"
    out = {FAIL: "failed", PASS: "passed", "tests/test_a.py::test_x": "passed",
           trip_id: "passed"}
    real, _, trip = judge_report(_report(out, session={"exitstatus": 1}), 1, True, TRIP,
                                 HIDDEN_TRIP)
    assert trip == "a must-fail tripwire hidden among the hidden tests passed"
    assert real == {"tests/test_a.py::test_x": "passed"}
    for honest in ("failed", "error", "skipped"):  # its module broke, or it was skipped
        out[trip_id] = honest
        real, tampered, trip = judge_report(_report(out, session={"exitstatus": 1}), 1, True,
                                            TRIP, HIDDEN_TRIP)
        assert trip is None and not tampered and real == {"tests/test_a.py::test_x": "passed"}


def test_records_the_plugin_never_writes_are_tampering():
    # red3: a malformed nonce-tagged record can only come from code that found the channel
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "failed"}
    rep = _report(out, session={"exitstatus": 1}, malformed=1)
    real, tampered, trip = judge_report(rep, 1, True, TRIP)
    assert trip is None and tampered == [
        "1 record(s) on the verdict channel that the plugin never writes: forged records"]


def test_an_unfinished_session_is_not_judged_by_its_exit_status():
    # a test that hung was killed (137), the process died in the middle (os._exit(3)):
    # pytest's exit status then says nothing about the verdicts written
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "passed"}
    for code in (137, 3, 0, 1):
        real, tampered, trip = judge_report(_report(out), code, False, TRIP)
        assert real == {"a::test_x": "passed"} and tampered == [] and trip is None


def test_exit_1_with_only_a_collection_error_is_consistent():
    # --continue-on-collection-errors: a module that failed to import makes the exit 1
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "passed"}
    rep = _report(out, session={"exitstatus": 1}, collection_errors=["tests/test_b.py"])
    real, tampered, trip = judge_report(rep, 1, True, TRIP)
    assert tampered == [] and trip is None
    rep = _report({"a::test_x": "passed", PASS: "passed", FAIL: "passed"},
                  session={"exitstatus": 0})
    assert judge_report(rep, 0, True, TRIP)[2] == "must-fail tripwire reported passed"


def test_a_finished_session_still_answers_for_its_exit_status():
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "passed"}
    _, tampered, _ = judge_report(_report(out, session={"exitstatus": 1}), 0, True, TRIP)
    assert tampered == ["session record says exit 1, process exited 0",
                        "exit code 0 but the report lists failures"]
