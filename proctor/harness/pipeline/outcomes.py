"""How a record ends: an error (no reward), an integrity violation (-1.0), an honest
failure of the patch (0.0, nothing measured), or graded from the measurements
(:func:`grade`: the reward, the flags, the gate verdict). Also :func:`phase_timer`, which
records each phase's wall time in ``rec.timing``."""

from __future__ import annotations

import time
from contextlib import contextmanager

from proctor.harness.pipeline.deadline import NOT_RUN_NOTE
from proctor.harness.pipeline.install import INSTALL_FAILED
from proctor.record import ErrorInfo, Evidence, Measurements, RewardRecord
from proctor.rewards import COMPONENTS, INTEGRITY_VIOLATION_REWARD, compute_reward, gate_verdict
from proctor.suites import Baseline, SuiteRun, grade_suite
from proctor.task import Task

#: Reward of an honest failure that changed nothing measurable (empty, unparseable, did not
#: apply): exactly what an empty patch earns. Strictly above an integrity violation.
HONEST_FAILURE_REWARD = 0.0


def mark_error(rec: RewardRecord, kind: str, message: str, retryable: bool) -> None:
    """Status ``error``, no reward: never scored as the agent's failure or success."""
    rec.status, rec.reward, rec.verdict, rec.reason = "error", None, None, None
    rec.error = ErrorInfo(kind=kind, message=message, retryable=retryable)
    rec.flags.exclude_from_advantage = True


def unmeasured(rec: RewardRecord, reward: float, reason: str, why: str, task: Task) -> None:
    """A reward decided before anything was measured: every component null, with why."""
    rec.reward, rec.reason = reward, reason
    rec.components = {name: None for name in COMPONENTS}
    rec.component_notes = {name: why for name in COMPONENTS}
    rec.weights = task.config.effective_weights().as_dict()


def violation(rec: RewardRecord, reasons: list[str], task: Task,
               blockers: list[str] = ()) -> None:
    """Integrity violation (reward -1.0); ``reasons`` found after the integrity phase (post-
    apply tree check, shadowing, suspicious code) are added to ``rec.integrity``."""
    rec.integrity.violated = True
    rec.integrity.reasons += reasons
    rec.integrity.paths = sorted(set(rec.integrity.paths)
                                 | {r.split(":", 1)[0] for r in reasons})
    unmeasured(rec, INTEGRITY_VIOLATION_REWARD, "integrity_violation",
                "not measured: integrity violation", task)
    rec.flags.exclude_from_advantage = True
    rec.verdict = gate_verdict(rec.reward, {}, ["integrity violation", *blockers])


def honest_failure(rec: RewardRecord, reason: str, message: str, task: Task,
                    blockers: list[str] = ()) -> None:
    """The patch failed without cheating before anything could be measured (``reason``:
    e.g. ``did_not_apply``, ``patch_unparseable``): reward :data:`HONEST_FAILURE_REWARD`,
    every component null, ``message`` in ``component_notes["reason"]``; ``blockers`` go
    into the gate verdict."""
    unmeasured(rec, HONEST_FAILURE_REWARD, reason, f"not measured: {reason}", task)
    rec.component_notes["reason"] = message
    rec.verdict = gate_verdict(rec.reward, {}, list(blockers))


def grade(rec: RewardRecord, m: Measurements, baseline: Baseline, public: SuiteRun,  # noqa: PLR0913
           hidden: SuiteRun, task: Task, blockers: list[str]) -> None:
    """Fill ``rec`` from the measurements: each suite graded against ``baseline`` (with its
    run kept as evidence), the reward and its components under the task's weights, the
    ``tests_tampered`` flag (which excludes the record from the group's advantage) and the
    gate verdict. A tripwire in either suite overrides the reward with
    :data:`INTEGRITY_VIOLATION_REWARD`, as cheating would. ``blockers``: reasons found
    earlier that fail the gate whatever the reward."""
    for run in (public, hidden):
        m.suites[run.suite] = grade_suite(baseline, run)
        rec.evidence[f"{run.suite}_tests"] = Evidence(
            command=run.command, exit_code=run.exit_code, duration_s=round(run.duration_s, 3),
            output=run.output[-4000:],
            details={"collected": run.collected, "session_finished": run.session_finished,
                     "timed_out": run.timed_out, "collection_errors": run.collection_errors,
                     "ended_early": run.ended_early, "sessions": run.sessions,
                     "tampered": run.tampered, "tripwire": run.tripwire})
    breakdown = compute_reward(m, task.config.effective_weights())
    rec.measurements, rec.tests = m, m.suites
    rec.reward, rec.components = breakdown.total, breakdown.components
    rec.weights, rec.penalties = breakdown.weights, breakdown.penalties
    rec.diff_cost, rec.progress = breakdown.diff_cost, breakdown.progress
    rec.component_notes = breakdown.notes
    for comp, note in m.notes.items():  # what the deadline kept from running: its 0.0 or
        if note.startswith((NOT_RUN_NOTE, INSTALL_FAILED)):  # its failed tests say why
            rec.component_notes[comp] = note
    rec.flags.tests_tampered = bool(public.tampered or hidden.tampered)
    # Detected tampering: out of the group's baseline, its own signal kept.
    rec.flags.exclude_from_advantage |= rec.flags.tests_tampered
    blockers = list(blockers)
    trips = [f"{r.suite}: {r.tripwire}" for r in (public, hidden) if r.tripwire]
    if trips:  # the runner was subverted: like an integrity violation, fixed -1.0
        rec.flags.tripwire, rec.reason = True, "tripwire"
        rec.flags.exclude_from_advantage = True
        rec.reward = INTEGRITY_VIOLATION_REWARD
        blockers.append("tripwire: " + "; ".join(trips))
    rec.verdict = gate_verdict(rec.reward, breakdown.components, blockers)


def phase_timer(rec: RewardRecord):
    """``with timer("phase"):`` records the phase's wall time in ``rec.timing`` (seconds)."""

    @contextmanager
    def timer(phase: str):
        start = time.monotonic()
        try:
            yield
        finally:
            rec.timing[f"{phase}_s"] = round(time.monotonic() - start, 3)

    return timer
