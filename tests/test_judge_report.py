"""judge_report (pure): when may a suite's report be believed?"""

from __future__ import annotations

from proctor.suites.pytest_runner import Tripwire, judge_report

TRIP = Tripwire("/proctor/t-1", "test_t.py", "test_fail", "test_pass")
FAIL = "/proctor/t-1/test_t.py::test_fail"
PASS = "/proctor/t-1/test_t.py::test_pass"


def test_finished_honest_run_is_believed():
    out = {"a::test_x": "passed", FAIL: "failed", PASS: "passed"}
    real, tampered, trip = judge_report(out, {"exitstatus": 1}, 1, True, TRIP)
    assert real == {"a::test_x": "passed"} and not tampered and trip is None


def test_run_ended_before_the_tripwire_reported_is_not_believed():
    # red team: fake every pass, then kill the process before the tripwire module runs
    # (it used to be last): the passes written so far scored as a complete fix
    out = {"a::test_x": "passed", "a::test_y": "passed"}
    _, tampered, trip = judge_report(out, None, -9, False, TRIP)
    assert tampered and "tripwire" in tampered[0] and trip is None


def test_crash_after_the_tripwire_reported_keeps_the_verdicts():
    out = {FAIL: "failed", PASS: "passed", "a::test_x": "passed"}
    real, tampered, trip = judge_report(out, None, -11, False, TRIP)
    assert real == {"a::test_x": "passed"} and not tampered and trip is None
