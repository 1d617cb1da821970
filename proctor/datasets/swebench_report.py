"""Reward records as SWE-bench's evaluation report (``proctor export swebench``). Pure.

For each instance, SWE-bench's per-instance report (``swebench.harness.grading
.get_eval_report``): ``patch_is_None``, ``patch_exists``, ``patch_successfully_applied``,
``resolved`` and ``tests_status`` (``FAIL_TO_PASS`` / ``PASS_TO_PASS`` / ``FAIL_TO_FAIL`` /
``PASS_TO_FAIL``, each ``{"success": [...], "failure": [...]}``), graded as SWE-bench grades
(``get_eval_tests_report`` with ``PASS_AND_FAIL``; ``resolved`` when every FAIL_TO_PASS and
every PASS_TO_PASS test succeeded); and the run summary of ``make_run_report``
(``schema_version`` 2: counts and id lists of submitted, completed, resolved, unresolved,
empty-patch and error instances).

Proctor adds, per instance, ``proctor``: the rollout, its reward, its reason and whether it
was an integrity violation (reward -1.0); a violation is never ``resolved``, whatever its
tests say (a patch that passes the tests by cheating did not resolve the issue).

What is graded: the record's own per-test outcomes and lists (the task's baseline) of the
``hidden`` suite (the test patch's files, which is what a SWE-bench row's lists describe),
or of every suite for a task without hidden tests. ``tests/test_swebench_report.py``
checks the grading against the ``swebench`` package's own code. Outcomes map to
SWE-bench's statuses: ``passed`` PASSED, ``xfailed`` XFAIL, ``skipped`` SKIPPED, ``error``
ERROR, every other (failed, timeout, crashed, not run, ...) FAILED.

The instance id is the record's ``metadata["instance_id"]`` (set for SWE-bench
predictions) or its ``task_id``. A record with status ``error`` is an error instance; one
whose reason is ``empty_patch`` (or whose prediction's ``model_patch`` was null) an empty-patch
instance, as SWE-bench counts them.
"""

from __future__ import annotations

from collections.abc import Iterable

from proctor.record import RewardRecord

FAIL_TO_PASS, PASS_TO_PASS = "FAIL_TO_PASS", "PASS_TO_PASS"
FAIL_TO_FAIL, PASS_TO_FAIL = "FAIL_TO_FAIL", "PASS_TO_FAIL"
STATUS = {"passed": "PASSED", "xfailed": "XFAIL", "skipped": "SKIPPED", "error": "ERROR"}
EMPTY = "empty_patch"


class DuplicateInstances(ValueError):
    """Several records of one instance: SWE-bench's report has one per instance."""


def instance_id(rec: RewardRecord) -> str:
    """The SWE-bench instance a record is of."""
    meta = rec.metadata or {}
    return str(meta.get("instance_id") or rec.task_id or rec.rollout_id)


def _suites(rec: RewardRecord) -> list[str]:
    if "hidden" in rec.tests and (rec.tests["hidden"].fail_to_pass
                                  or rec.tests["hidden"].pass_to_pass):
        return ["hidden"]
    return sorted(rec.tests)


def status_map(rec: RewardRecord) -> dict[str, str]:
    """Test id -> SWE-bench status (``PASSED``, ``FAILED``, ...) of the graded suites."""
    out: dict[str, str] = {}
    for suite in _suites(rec):
        tests = rec.tests[suite]
        for test_id, outcome in {**tests.fail_to_pass, **tests.pass_to_pass}.items():
            out[test_id] = STATUS.get(outcome, "FAILED")
    return out


def gold_lists(rec: RewardRecord) -> dict[str, list[str]]:
    """The FAIL_TO_PASS and PASS_TO_PASS ids graded (the record's, in its order)."""
    f2p: list[str] = []
    p2p: list[str] = []
    for suite in _suites(rec):
        f2p += list(rec.tests[suite].fail_to_pass)
        p2p += list(rec.tests[suite].pass_to_pass)
    return {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p}


def tests_status(statuses: dict[str, str], gold: dict[str, list[str]]) -> dict:
    """SWE-bench's ``get_eval_tests_report`` (``PASS_AND_FAIL``): a FAIL_TO_PASS test
    succeeds when PASSED or XFAIL and fails otherwise (FAILED, ERROR, SKIPPED: a skipped
    test resolves nothing; absent); a PASS_TO_PASS test succeeds when PASSED, XFAIL or
    SKIPPED (a skip is no regression) and fails when FAILED, ERROR or absent. The ids are
    the record's, so each is matched exactly (SWE-bench's prefix match of truncated
    parametrized ids never applies)."""
    def grade(ids: list[str], kept: tuple[str, ...]) -> dict[str, list[str]]:
        success, failure = [], []
        for test_id in ids:
            status = statuses.get(test_id)
            if status in kept:
                success.append(test_id)
            elif status is None or status in ("FAILED", "ERROR", "SKIPPED"):
                failure.append(test_id)
        return {"success": success, "failure": failure}
    return {FAIL_TO_PASS: grade(gold[FAIL_TO_PASS], ("PASSED", "XFAIL")),
            PASS_TO_PASS: grade(gold[PASS_TO_PASS], ("PASSED", "XFAIL", "SKIPPED")),
            FAIL_TO_FAIL: {"success": [], "failure": []},
            PASS_TO_FAIL: {"success": [], "failure": []}}


def resolution(status: dict) -> str:
    """``RESOLVED_FULL`` / ``RESOLVED_PARTIAL`` / ``RESOLVED_NO`` (``get_resolution_status``:
    a list with no test counts as all passed)."""
    def share(key: str) -> float:
        s, f = len(status[key]["success"]), len(status[key]["failure"])
        return 1.0 if s + f == 0 else s / (s + f)
    f2p, p2p = share(FAIL_TO_PASS), share(PASS_TO_PASS)
    if f2p == 1 and p2p == 1:
        return "RESOLVED_FULL"
    return "RESOLVED_PARTIAL" if 0 < f2p < 1 and p2p == 1 else "RESOLVED_NO"


def _patch_none(rec: RewardRecord) -> bool:
    return bool((rec.metadata or {}).get("model_patch_is_none"))


def _empty(rec: RewardRecord) -> bool:
    return _patch_none(rec) or rec.reason == EMPTY


def instance_report(rec: RewardRecord) -> dict:
    """``{instance_id: {...}}`` as SWE-bench writes each instance's ``report.json``."""
    report: dict = {"patch_is_None": _patch_none(rec), "patch_exists": not _patch_none(rec),
                    "patch_successfully_applied": False, "resolved": False}
    if rec.status == "scored" and not _patch_none(rec) and rec.reason not in (
            "did_not_apply", EMPTY) and rec.tests:
        report["patch_successfully_applied"] = True
        status = tests_status(status_map(rec), gold_lists(rec))
        report["resolved"] = resolution(status) == "RESOLVED_FULL" and not _violation(rec)
        report["tests_status"] = status
    report["proctor"] = {"rollout_id": rec.rollout_id, "reward": rec.reward,
                         "violation": _violation(rec), "reason": rec.reason}
    return {instance_id(rec): report}


def _violation(rec: RewardRecord) -> bool:
    return rec.status == "scored" and rec.reward == -1.0


def export(records: Iterable[RewardRecord], dataset_ids: Iterable[str] | None = None) -> dict:
    """The run summary (``make_run_report``'s fields, ``schema_version`` 2) with every
    instance's report under ``instances``. ``dataset_ids``: the instances of the dataset
    (default: those with a record); the ones without a record are incomplete.

    Raises:
        DuplicateInstances: two records of one instance (the message names it and them).
    """
    by_id: dict[str, RewardRecord] = {}
    for rec in records:
        key = instance_id(rec)
        if key in by_id:
            raise DuplicateInstances(
                f"instance {key} has more than one record (rollouts "
                f"{by_id[key].rollout_id}, {rec.rollout_id}): SWE-bench's report has one per "
                "instance; export one rollout per instance (e.g. --model NAME)")
        by_id[key] = rec
    dataset = sorted(set(dataset_ids) if dataset_ids is not None else set(by_id))
    ids = {k: set() for k in ("completed", "resolved", "unresolved", "empty_patch", "error",
                              "incomplete")}
    instances: dict = {}
    for key in dataset:
        rec = by_id.get(key)
        if rec is None:
            ids["incomplete"].add(key)
            continue
        if _empty(rec):
            ids["empty_patch"].add(key)
            continue
        if rec.status == "error":
            ids["error"].add(key)
            continue
        report = instance_report(rec)
        instances.update(report)
        ids["completed"].add(key)
        ids["resolved" if report[key]["resolved"] else "unresolved"].add(key)
    summary = {
        "total_instances": len(dataset),
        "submitted_instances": len(by_id),
        "completed_instances": len(ids["completed"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(ids["completed"]),
        "incomplete_ids": sorted(ids["incomplete"]),
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": sorted(by_id),
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "error_ids": sorted(ids["error"]),
        "schema_version": 2,
    }
    return {**summary, "instances": instances}
