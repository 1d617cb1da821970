"""Proctor's pytest plugin: one JSON line per test, written outside the repo.

Loaded explicitly with ``-p proctor_report --proctor-report PATH``. Each line is
``{"nodeid", "outcome", "duration"}`` with outcome one of passed, failed, error,
skipped, xfailed, xpassed, timeout; a collection failure gives outcome ``error`` for the
collector's nodeid; the last line is ``{"session": {"exitstatus", "collected"}}``.
Verdicts come from pytest's own reports (setup/call/teardown), never from stdout.
"""

import json

import pytest

_state = {}


def pytest_addoption(parser):
    parser.addoption("--proctor-report", action="store", default=None)


def pytest_configure(config):
    path = config.getoption("--proctor-report")
    if path:
        _state["fh"] = open(path, "w", buffering=1, encoding="utf-8")  # noqa: SIM115
        _state["tests"] = {}


def _emit(obj):
    fh = _state.get("fh")
    if fh is not None:
        fh.write(json.dumps(obj) + "\n")


def _is_timeout(report):
    text = getattr(report, "longreprtext", "") or ""
    return "Timeout (" in text or "Failed: Timeout" in text


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    tests = _state.get("tests")
    if tests is None:
        return
    entry = tests.setdefault(report.nodeid, {"outcome": None, "duration": 0.0})
    entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if xfail:
            entry["outcome"] = "xfailed" if report.skipped else "xpassed"
        elif report.passed:
            entry["outcome"] = "passed"
        elif report.skipped:
            entry["outcome"] = "skipped"
        else:
            entry["outcome"] = "timeout" if _is_timeout(report) else "failed"
    elif report.failed:
        if entry["outcome"] in (None, "passed"):
            entry["outcome"] = "timeout" if _is_timeout(report) else "error"
    elif report.skipped and entry["outcome"] is None:
        entry["outcome"] = "xfailed" if xfail else "skipped"


def pytest_runtest_logfinish(nodeid, location):
    tests = _state.get("tests")
    if tests is None or nodeid not in tests:
        return
    entry = tests.pop(nodeid)
    _emit({"nodeid": nodeid, "outcome": entry["outcome"] or "error",
           "duration": round(entry["duration"], 6)})


def pytest_collectreport(report):
    if report.failed:
        _emit({"nodeid": report.nodeid or "<collection>", "outcome": "error", "duration": 0.0,
               "collection_error": True})


def pytest_sessionfinish(session, exitstatus):
    _emit({"session": {"exitstatus": int(exitstatus), "collected": session.testscollected}})
    fh = _state.pop("fh", None)
    if fh is not None:
        fh.close()
