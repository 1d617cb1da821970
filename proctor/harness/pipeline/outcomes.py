"""How a record is made: what the phases report while they run (:class:`Trace`), how the
record ends (:class:`Ending`: an error with no reward, an integrity violation at -1.0, an
honest failure of the patch at 0.0 with nothing measured, or graded from the
measurements), and the record assembled once from the two (:func:`assemble`).

The endings are pure functions of what they are given; the trace is the only thing the
phases write, and the record is built from it once, at the end of the score."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from proctor.harness.pipeline.agent_message import (
    NO_MESSAGE,
    AgentMessage,
    check_agent_message,
    not_applied,
)
from proctor.harness.pipeline.deadline import NOT_RUN_NOTE
from proctor.harness.pipeline.install import INSTALL_FAILED
from proctor.record import (
    EnvInfo,
    ErrorInfo,
    Evidence,
    Flags,
    Integrity,
    Measurements,
    RewardRecord,
    SuiteTests,
    Verdict,
)
from proctor.rewards import COMPONENTS, INTEGRITY_VIOLATION_REWARD, compute_reward, gate_verdict
from proctor.suites import Baseline, SuiteRun, grade_suite
from proctor.task import Task

#: Reward of an honest failure that changed nothing measurable (empty, unparseable, did not
#: apply): exactly what an empty patch earns. Strictly above an integrity violation.
HONEST_FAILURE_REWARD = 0.0


@dataclass
class Trace:
    """What the phases report while they run, kept for the record whatever its ending.

    ``evidence``: step name -> what was run; ``timing``: ``<phase>_s`` -> wall seconds;
    ``env``: what the record was scored with (filled as the backend, image and task are
    known); ``integrity``: the integrity phase's verdict; ``apply_strategy``: how the patch
    applied. The steps' signals: ``suppressions_added`` and ``secret_in_patch`` (the scans
    of the added lines), ``degraded`` (a measuring tool failed), ``forged_verdicts`` (the
    mutation step's verdicts were altered: out of the advantage), ``install_failed``
    (the patched project did not install: the record's reason) and ``confirmed`` (the
    differential step's violation reasons: the record becomes an integrity violation).
    The two sandboxes' threads write it, each under keys of its own steps."""

    env: EnvInfo
    evidence: dict[str, Evidence] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    integrity: Integrity = field(default_factory=Integrity)
    apply_strategy: str | None = None
    suppressions_added: bool = False
    secret_in_patch: bool = False
    degraded: bool = False
    forged_verdicts: bool = False
    install_failed: bool = False
    confirmed: list[str] = field(default_factory=list)
    #: The rollout came with a message or transcript (the message checks apply once the
    #: patch is measured).
    message_given: bool = False

    @contextmanager
    def timer(self, phase: str) -> Iterator[None]:
        """``with trace.timer("phase"):`` records the block's wall seconds as
        ``timing["<phase>_s"]`` (rounded to ms), also when it raises."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.timing[f"{phase}_s"] = round(time.monotonic() - start, 3)


@dataclass(frozen=True)
class Ending:
    """How a record ends: its status, reward (None for an error) and reason, the reward's
    breakdown (components 0..1 or None, their notes, the weights, penalties, diff cost,
    progress), the graded tests and measurements, the flags the ending raises, the
    integrity verdict (the trace's, with what later phases found), the gate verdict and,
    for an error, why."""

    status: str
    reward: float | None
    reason: str | None = None
    components: dict[str, float | None] = field(default_factory=dict)
    component_notes: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    penalties: dict[str, float] = field(default_factory=dict)
    diff_cost: float = 0.0
    progress: float | None = None
    tests: dict[str, SuiteTests] = field(default_factory=dict)
    measurements: Measurements | None = None
    integrity: Integrity | None = None
    tests_tampered: bool = False
    tripwire: bool = False
    exclude_from_advantage: bool = False
    verdict: Verdict | None = None
    error: ErrorInfo | None = None
    #: The message checks' evidence (None: they did not run) and whether they found a
    #: false claim.
    message: Evidence | None = None
    false_claim: bool = False


def errored(kind: str, message: str, retryable: bool) -> Ending:
    """Status ``error``, no reward: never scored as the agent's failure or success; out of
    the group's advantage."""
    return Ending(status="error", reward=None, exclude_from_advantage=True,
                  error=ErrorInfo(kind=kind, message=message, retryable=retryable))


def _unmeasured(reward: float, reason: str, why: str, task: Task) -> dict:
    """The fields of a reward decided before anything was measured: every component null,
    with why."""
    return {"status": "scored", "reward": reward, "reason": reason,
            "components": {name: None for name in COMPONENTS},
            "component_notes": {name: why for name in COMPONENTS},
            "weights": task.config.effective_weights().as_dict()}


def violated(integrity: Integrity, reasons: list[str], task: Task,
             blockers: list[str] = ()) -> Ending:
    """Integrity violation (reward -1.0, out of the advantage). ``integrity``: the
    integrity phase's verdict; ``reasons`` found after it (post-apply tree check,
    shadowing, suspicious code, the install's build code) are added to it, with the paths
    they name. ``blockers``: the gate's other hard blockers."""
    merged = Integrity(violated=True, reasons=[*integrity.reasons, *reasons],
                       paths=sorted(set(integrity.paths)
                                    | {r.split(":", 1)[0] for r in reasons}))
    return Ending(**_unmeasured(INTEGRITY_VIOLATION_REWARD, "integrity_violation",
                                "not measured: integrity violation", task),
                  integrity=merged, exclude_from_advantage=True,
                  verdict=gate_verdict(INTEGRITY_VIOLATION_REWARD, {},
                                       ["integrity violation", *blockers]))


def honest_failure(reason: str, message: str, task: Task, blockers: list[str] = ()) -> Ending:
    """The patch failed without cheating before anything could be measured (``reason``:
    e.g. ``did_not_apply``, ``patch_unparseable``): reward :data:`HONEST_FAILURE_REWARD`,
    every component null, ``message`` in ``component_notes["reason"]``; ``blockers`` go
    into the gate verdict."""
    fields = _unmeasured(HONEST_FAILURE_REWARD, reason, f"not measured: {reason}", task)
    fields["component_notes"]["reason"] = message
    return Ending(**fields, verdict=gate_verdict(HONEST_FAILURE_REWARD, {}, list(blockers)))


def suite_evidence(run: SuiteRun) -> Evidence:
    """What one suite run was, for the record: command, exit code, seconds, the output's
    tail (4000 characters) and how it ended."""
    return Evidence(
        command=run.command, exit_code=run.exit_code, duration_s=round(run.duration_s, 3),
        output=run.output[-4000:],
        details={"collected": run.collected, "session_finished": run.session_finished,
                 "timed_out": run.timed_out, "collection_errors": run.collection_errors,
                 "ended_early": run.ended_early, "sessions": run.sessions,
                 "tampered": run.tampered, "tripwire": run.tripwire})


@dataclass(frozen=True)
class Found:
    """What the phases before a measured patch's ending found that it weighs: the gate's
    hard blockers (secrets in the added lines), whether the patched project failed to
    install (the record's reason when nothing overrides it) and whether the tamper checks
    suspected tampering (the record leaves the group's advantage)."""

    blockers: tuple[str, ...] = ()
    install_failed: bool = False
    tamper_detected: bool = False


def graded(m: Measurements, baseline: Baseline, runs: tuple[SuiteRun, SuiteRun],  # noqa: PLR0913
           task: Task, found: Found = Found(), said: AgentMessage | None = None,
           patch_text: str = "") -> Ending:
    """The ending of a measured patch: each suite of ``runs`` (public, hidden) graded
    against ``baseline`` into ``m.suites``, the agent's message ``said`` checked against
    them and the patch (:mod:`~proctor.harness.pipeline.agent_message`: penalty indicators
    in ``m``, false claims as gate blockers), the reward and its components under the
    task's weights, the ``tests_tampered`` flag and the gate verdict, weighing what earlier
    phases ``found``. A tripwire in either suite overrides the reward with
    :data:`INTEGRITY_VIOLATION_REWARD`, as cheating would."""
    for run in runs:
        m.suites[run.suite] = grade_suite(baseline, run)
    said_checked = check_agent_message(said, m.suites, patch_text) if said else None
    if said_checked is not None:
        m.penalty_indicators.update(said_checked.indicators)
    breakdown = compute_reward(m, task.config.effective_weights())
    notes = dict(breakdown.notes)
    for comp, note in m.notes.items():  # what the deadline kept from running: its 0.0 or
        if note.startswith((NOT_RUN_NOTE, INSTALL_FAILED)):  # its failed tests say why
            notes[comp] = note
    tampered = any(run.tampered for run in runs)
    trips = [f"{run.suite}: {run.tripwire}" for run in runs if run.tripwire]
    reward, reason = breakdown.total, INSTALL_FAILED if found.install_failed else None
    blockers = list(found.blockers) + (said_checked.blockers if said_checked else [])
    if trips:  # the runner was subverted: like an integrity violation, fixed -1.0
        reward, reason = INTEGRITY_VIOLATION_REWARD, "tripwire"
        blockers.append("tripwire: " + "; ".join(trips))
    return Ending(
        status="scored", reward=reward, reason=reason, components=breakdown.components,
        component_notes=notes, weights=breakdown.weights, penalties=breakdown.penalties,
        diff_cost=breakdown.diff_cost, progress=breakdown.progress, tests=m.suites,
        measurements=m, tests_tampered=tampered, tripwire=bool(trips),
        # detected tampering: out of the group's baseline, its own signal kept
        exclude_from_advantage=tampered or bool(trips) or found.tamper_detected,
        verdict=gate_verdict(reward, breakdown.components, blockers),
        message=said_checked.evidence if said_checked else None,
        false_claim=bool(said_checked and said_checked.false_claim))


def assemble(trace: Trace, ending: Ending, *, task_id: str, rollout_id: str,
             group_id: str | None, sample_index: int | None) -> RewardRecord:
    """The record, built once: the rollout's identity, what the trace kept and how it
    ended."""
    flags = Flags(
        tests_tampered=ending.tests_tampered, tripwire=ending.tripwire,
        exclude_from_advantage=(ending.exclude_from_advantage or trace.forged_verdicts),
        suppressions_added=trace.suppressions_added, secret_in_patch=trace.secret_in_patch,
        degraded=trace.degraded, false_claim=ending.false_claim)
    evidence = dict(trace.evidence)
    if ending.message is not None:
        evidence["message"] = ending.message
    elif trace.message_given:
        evidence["message"] = not_applied(
            f"the patch was not measured ({ending.reason or ending.status})")
    elif ending.measurements is not None:  # measured: the checks had nothing to read
        evidence["message"] = not_applied(NO_MESSAGE)
    return RewardRecord(
        task_id=task_id, rollout_id=rollout_id, group_id=group_id, sample_index=sample_index,
        status=ending.status, reward=ending.reward, reason=ending.reason,
        components=ending.components, component_notes=ending.component_notes,
        weights=ending.weights, penalties=ending.penalties, diff_cost=ending.diff_cost,
        progress=ending.progress, integrity=ending.integrity or trace.integrity, flags=flags,
        tests=ending.tests, evidence=evidence, apply_strategy=trace.apply_strategy,
        verdict=ending.verdict, error=ending.error, timing=trace.timing, env=trace.env,
        measurements=ending.measurements)
