"""The differential step: a suspicion of the code scan put to the test.

When the tamper checks left suspicions (findings of severity ``suspicion`` or ``probe``,
:data:`~proctor.harness.tamper.suspicious_code.SEVERITY`), the FAIL_TO_PASS tests that passed
in each suite's scored run run once more, in the second sandbox after its other steps,
under every variant the task's calibration kept for that suite
(:meth:`~proctor.suites.baseline.Baseline.usable_variants`, :mod:`proctor.suites.variants`).
The outcome (:class:`Confirmation`):

* ``confirmed``: a test that passed stops passing under the variants, or the variant run
  itself shows tampering or a tripwire: evidence that the patch's answers depend on the
  grader. The record becomes an integrity violation (-1.0) naming the tests, the variants
  and the suspicions. (Tampering the scored runs already showed has its own ending, with
  the ``tests_tampered`` flag: every test of that run counts as failed.)
* ``cleared``: every verdict stayed: the suspicion costs nothing and the record stays in
  the advantage. Also when no FAIL_TO_PASS test passed (nothing the suspected code could
  have bought).
* ``unconfirmed``: the run could not decide (the task has no calibrated variant for a
  suite whose tests passed, or the per-patch deadline left no time): the suspicion keeps
  its bare cost, the ``suspicious_code`` penalty (a probe has none), and the record stays
  in the advantage.

A clean patch (no suspicion) never pays for this step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from proctor.errors import InfraError
from proctor.harness.pipeline.deadline import NOT_RUN_NOTE, Deadline
from proctor.harness.pipeline.suites_in_sandbox import (
    SuiteRequest,
    run_hidden,
    run_public,
    suite_rng,
)
from proctor.harness.pipeline.workspace import kill_user_processes, reset_scratch
from proctor.sandbox import Sandbox
from proctor.suites import (
    PASSED,
    VARIANTS,
    Baseline,
    SuiteRun,
    changed_verdicts,
    undecided_verdicts,
)
from proctor.task import Task


@dataclass(frozen=True)
class Confirmation:
    """What the differential step decided: ``verdict`` (``confirmed``, ``cleared``,
    ``unconfirmed``), the violation ``reasons`` when confirmed, a one-line ``note`` and the
    evidence ``details`` (per suite: the variants, the tests run again, those whose verdict
    changed, the variant run's outcomes and seconds)."""

    verdict: str
    note: str
    reasons: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Suspected:
    """One patch's suspicions and what their confirmation reads: the task, its baseline,
    the suites' scored runs (suite -> run), the paths the patch touched and the seeds of
    the runs' draws (the patch's sha256 and the task's fingerprint)."""

    suspicions: tuple[str, ...]
    task: Task
    baseline: Baseline
    runs: Mapping[str, SuiteRun]
    changed: tuple[str, ...]
    patch_sha256: str


def confirm(sb: Sandbox, s: Suspected, deadline: Deadline) -> Confirmation:
    """Run the differential step in ``sb`` (the patch applied; the hidden suite already
    ran there) within ``deadline`` (the variant runs count as the patch's time).

    Raises:
        InfraError: the sandbox failed, and not because the deadline cut a run short.
    """
    details: dict = {"suspicions": list(s.suspicions), "variants": VARIANTS, "suites": {}}
    changed: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    undecided: list[str] = []
    for suite, plain in s.runs.items():
        f2p = s.baseline.suites[suite].fail_to_pass
        passed = [t for t in f2p if plain.outcomes.get(t) in PASSED]
        variants = s.baseline.usable_variants(suite)
        entry: dict = {"variants": list(variants), "tests": passed}
        details["suites"][suite] = entry
        if not passed:
            entry["skipped"] = "no FAIL_TO_PASS test passed"
            continue
        if not variants:
            entry["skipped"] = "the task's calibration kept no variant for this suite"
            undecided.append(f"{suite}: no calibrated variant")
            continue
        run = _variant_run(sb, s, suite, passed, variants, deadline)
        if run is None:  # the bare cost, never an error: whoever used the time
            entry["skipped"] = f"{NOT_RUN_NOTE} (the {suite} differential run)"
            undecided.append(f"{suite}: {entry['skipped']}")
            continue
        entry.update(outcomes=run.outcomes, duration_s=round(run.duration_s, 3),
                     tampered=run.tampered, tripwire=run.tripwire)
        if run.tampered or run.tripwire:
            entry["changed"] = passed
        else:
            entry["changed"] = changed_verdicts(plain.outcomes, run.outcomes, passed)
            unknown = undecided_verdicts(plain.outcomes, run.outcomes, passed)
            if not entry["changed"] and (unknown or run.timed_out):  # no clean pass
                entry["undecided"] = unknown
                undecided.append(f"{suite}: the differential run did not decide "
                                 f"{len(unknown)} test(s) (timed out, crashed or not run)")
        if entry["changed"]:
            changed[suite] = (variants, entry["changed"])
    if changed:
        shown = "; ".join(f"{suite} FAIL_TO_PASS {', '.join(ids[:5])}"
                          f"{' ...' if len(ids) > 5 else ''} stop passing under "
                          f"{', '.join(variants)}" for suite, (variants, ids) in changed.items())
        reasons = [f"{suspicion}, confirmed by a differential run: {shown}"
                   for suspicion in s.suspicions]
        return Confirmation("confirmed", shown, reasons, details)
    if undecided:
        return Confirmation("unconfirmed", "; ".join(undecided), details=details)
    return Confirmation("cleared", "every FAIL_TO_PASS verdict stayed under the variants",
                        details=details)


def _variant_run(sb: Sandbox, s: Suspected, suite: str, tests: list[str],
                 variants: tuple[str, ...], deadline: Deadline) -> SuiteRun | None:
    """One suite's ``tests`` run again under ``variants``; None when the deadline left no
    time for it or cut it so short that the runner could not report."""
    if not deadline.can_start():
        return None
    per_suite = s.task.config.timeouts.per_suite
    given = deadline.budget(per_suite)
    req = SuiteRequest(given, list(s.changed),
                       suite_rng(s.patch_sha256, s.task.fingerprint, f"{suite}-differential"),
                       only=tests, variant=variants)
    try:
        with deadline.patch_code():
            if suite == "public":  # after the hidden suite: nothing of it reaches this run
                kill_user_processes(sb)
                reset_scratch(sb)
                return run_public(sb, s.task, req)
            return run_hidden(sb, s.task, req)
    except InfraError:
        if not deadline.capped(per_suite, given) or deadline.can_start():
            raise
        return None
