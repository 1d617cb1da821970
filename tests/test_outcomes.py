"""How a record ends, as pure functions (proctor.harness.pipeline.outcomes), and the record
assembled once from the trace and the ending: no sandbox, no task directory."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from proctor.harness.pipeline.outcomes import (
    HONEST_FAILURE_REWARD,
    Found,
    Trace,
    assemble,
    errored,
    graded,
    honest_failure,
    violated,
)
from proctor.record import EnvInfo, Evidence, Integrity, Measurements
from proctor.rewards import COMPONENTS, INTEGRITY_VIOLATION_REWARD
from proctor.suites import Baseline, SuiteRun
from proctor.suites.baseline import SuiteBaseline
from proctor.task import TaskConfig

TASK = SimpleNamespace(config=TaskConfig.model_validate(
    {"id": "t", "sources": ["pkg"], "tests": {"public": ["tests"]}}))
BASELINE = Baseline(
    key="k", task_id="t", proctor_version="x", image_id="i", runs=1, has_reference=False,
    suites={s: SuiteBaseline(fail_to_pass=[f"{s}::f"], pass_to_pass=[f"{s}::p"],
                             quarantined={}, base_runs=[]) for s in ("public", "hidden")})


def _run(suite: str, fixed: bool, **kw) -> SuiteRun:
    outcomes = {f"{suite}::f": "passed" if fixed else "failed", f"{suite}::p": "passed"}
    return SuiteRun(suite=suite, outcomes=outcomes, command="pytest", exit_code=0,
                    duration_s=1.0, output="", **kw)


def _assembled(trace: Trace, ending):
    return assemble(trace, ending, task_id="t", rollout_id="r", group_id="g", sample_index=3)


def test_a_violation_adds_later_reasons_and_their_paths_to_the_integrity_verdict():
    first = Integrity(violated=False, reasons=[], paths=["pkg/a.py"])
    end = violated(first, ["pkg/b.py: changed by the build"], TASK, ["secret in added lines"])
    assert end.reward == INTEGRITY_VIOLATION_REWARD and end.reason == "integrity_violation"
    assert end.integrity == Integrity(violated=True, reasons=["pkg/b.py: changed by the build"],
                                      paths=["pkg/a.py", "pkg/b.py"])
    assert first.violated is False  # the phase's verdict is not changed in place
    assert end.components == {c: None for c in COMPONENTS} and end.exclude_from_advantage
    assert end.verdict.blockers == ["integrity violation", "secret in added lines"]


def test_an_honest_failure_scores_zero_with_its_message_and_stays_in_the_advantage():
    end = honest_failure("did_not_apply", "error: patch failed", TASK)
    assert end.reward == HONEST_FAILURE_REWARD == 0.0 and end.reason == "did_not_apply"
    assert end.component_notes["reason"] == "error: patch failed"
    assert end.component_notes["compiled"] == "not measured: did_not_apply"
    assert not end.exclude_from_advantage and end.verdict.gate == "FAIL"


def test_an_error_has_no_reward_and_leaves_the_advantage():
    end = errored("infra", "engine gone", True)
    rec = _assembled(Trace(env=EnvInfo(proctor_version="x")), end)
    assert rec.status == "error" and rec.reward is None and rec.verdict is None
    assert rec.error.kind == "infra" and rec.error.retryable
    assert rec.flags.exclude_from_advantage


def test_graded_fixes_count_and_a_tripwire_overrides_the_reward():
    m = Measurements(compiled=1.0, static_analysis=1.0, mutation_score=1.0)
    end = graded(m, BASELINE, (_run("public", True), _run("hidden", True)), TASK)
    assert end.status == "scored" and end.reason is None
    assert end.reward == pytest.approx(1.0) and not end.exclude_from_advantage
    assert end.tests["hidden"].f2p_passed == 1

    m = Measurements(compiled=1.0, static_analysis=1.0, mutation_score=1.0)
    end = graded(m, BASELINE, (_run("public", True), _run("hidden", True, tripwire="t")),
                 TASK)
    assert end.reward == INTEGRITY_VIOLATION_REWARD and end.reason == "tripwire"
    assert end.tripwire and end.exclude_from_advantage
    assert "tripwire: hidden: t" in end.verdict.blockers


def test_graded_keeps_the_install_failure_as_reason_and_the_tamper_suspicion_as_exclusion():
    m = Measurements(compiled=1.0, static_analysis=1.0)
    end = graded(m, BASELINE, (_run("public", False), _run("hidden", False)), TASK,
                 Found(install_failed=True, tamper_detected=True))
    assert end.reason == "install_failed" and end.exclude_from_advantage
    assert not end.tests_tampered and not end.tripwire


def test_the_record_is_built_from_what_the_trace_kept_and_how_it_ended():
    trace = Trace(env=EnvInfo(proctor_version="x", sandbox="local"))
    trace.evidence["apply"] = Evidence(command="git apply", exit_code=0)
    trace.timing["sandbox_s"] = 0.5
    trace.apply_strategy, trace.secret_in_patch, trace.degraded = "git_apply", True, True
    trace.forged_verdicts = True
    rec = _assembled(trace, honest_failure("did_not_apply", "no", TASK))
    assert (rec.task_id, rec.rollout_id, rec.group_id, rec.sample_index) == ("t", "r", "g", 3)
    assert rec.env.sandbox == "local" and rec.apply_strategy == "git_apply"
    # nothing was measured and no message given: no message evidence either
    assert list(rec.evidence) == ["apply"] and rec.timing == {"sandbox_s": 0.5}
    assert rec.flags.secret_in_patch and rec.flags.degraded
    assert rec.flags.exclude_from_advantage  # forged mutation verdicts
    assert rec.integrity == Integrity()  # the trace's, as the ending did not change it
