"""The measure phase's steps (design.md section 2, phase 4), each under its own timeout and
the per-patch deadline: the file checks (compiled, static analysis) and the restore of the
pristine public tests, the install, one suite run, and the second sandbox's steps (hidden
suite, mutation, benchmark). Each fills :class:`~proctor.record.Measurements` and reports
its evidence and times in the :class:`~proctor.harness.pipeline.outcomes.Trace`; what the
deadline keeps from running is the patch's failure or the harness's, by who used the time
(:class:`~proctor.harness.pipeline.deadline.Deadline`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from proctor.errors import InfraError
from proctor.harness.pipeline.deadline import (
    NOT_RUN_NOTE,
    Deadline,
    file_check_budgets,
    mutation_budgets,
)
from proctor.harness.pipeline.differential import Suspected, confirm
from proctor.harness.pipeline.install import (
    INSTALL_FAILED,
    INSTALL_TIMEOUT_S,
    install_repo,
    repo_changes,
)
from proctor.harness.pipeline.outcomes import Trace
from proctor.harness.pipeline.suites_in_sandbox import SuiteRequest, run_hidden
from proctor.harness.pipeline.workspace import (
    check_restored,
    kill_user_processes,
    place_bench_dir,
    restore_public_tests_step,
)
from proctor.patch import PatchSummary
from proctor.record import Evidence, Measurements
from proctor.rewards import static_score
from proctor.sandbox import KILLERS_WAIT_SLACK_S, REPO, Limits
from proctor.suites import (
    NO_PROGRESS_NOTE,
    Baseline,
    SuiteRun,
    cannot_change_reward,
    grade_suite,
    mutant_generator,
    run_benchmark,
    run_file_checks,
    run_mutation,
    trusted_killers,
)
from proctor.task import Task

STEP_TIMEOUT_S = 120.0
#: Own timeouts of the file checks' parts (compile check, static analysis, the restore of
#: the pristine public tests), before the deadline caps them.
RESTORE_TIMEOUT_S = 60.0


class NoTime(InfraError):
    """A step did not run (or ended unfinished) for lack of time, and the patch's code used
    the larger share of it (:meth:`Deadline.ran_out` returned ``note``): the caller records
    what did not run as failed. Should it escape, the record is an infrastructure error,
    never a score."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


@dataclass(frozen=True)
class Measuring:
    """What every measure step reads and fills: the trace it reports to, the measurements
    it fills, the task, the patch (its bytes, its summary and the apply strategy that
    applied it), the task's baseline, the sandbox limits, the per-patch deadline, the
    code scan's suspicions and probes (the differential step decides them) and how to
    calibrate the differential runs on the task when its baseline is not yet
    (``calibrate()``: the baseline, calibrated; None: never)."""

    trace: Trace
    m: Measurements
    task: Task
    data: bytes
    summary: PatchSummary
    strategy: str | None
    baseline: Baseline
    limits: Limits
    deadline: Deadline
    suspicions: tuple[str, ...] = ()
    calibrate: Callable[[], Baseline] | None = None
    probes: tuple[str, ...] = ()


def harness_budget(deadline: Deadline, step: str, own: float) -> float:
    """Timeout of a harness operation that cannot be left out (sandbox creation, tamper
    checks): ``min(own, what is left)``.

    Raises:
        InfraError: not enough time left, and the harness used the larger share of it.
        NoTime: not enough time left, and the patch's code used the larger share.
    """
    if not deadline.can_start():
        raise NoTime(deadline.ran_out(step))
    return deadline.budget(own)


def files_steps(ctx: Measuring, sb, *, restore: bool = True) -> bool:
    """``compiled`` and ``static_analysis`` (they read files only, before any code of the
    patch runs; static from a snapshot of the changed files), then (``restore``) the
    pristine public tests put back for the public run: one sandbox command, each part with
    its own timeout (capped by the deadline,
    :func:`~proctor.harness.pipeline.deadline.file_check_budgets`) and evidence
    (:mod:`proctor.suites.file_checks`). Returns whether the command ran (False only when
    the deadline kept it from running: then the public suite cannot run either)."""
    trace, m, task, deadline = ctx.trace, ctx.m, ctx.task, ctx.deadline
    summary = ctx.summary
    py_paths = changed_python_files(summary)
    if not py_paths:
        m.notes["compiled"] = m.notes["static_analysis"] = "no .py file changed"
    if not deadline.can_start():
        note = deadline.ran_out("the file checks")
        if py_paths:
            m.compiled = m.static_analysis = 0.0
            m.notes["compiled"] = m.notes["static_analysis"] = note
        return False
    compile_s, static_s, restore_s = file_check_budgets(
        deadline.left(), STEP_TIMEOUT_S, STEP_TIMEOUT_S, RESTORE_TIMEOUT_S)
    with trace.timer("file_checks"), deadline.patch_code():
        checks = run_file_checks(sb, REPO, py_paths, compile_timeout=compile_s,
                                 static_timeout=static_s,
                                 then=[restore_public_tests_step(task, restore_s)]
                                 if restore else [],
                                 renamed_from=renamed_python_files(summary))
    if py_paths:
        m.compiled, trace.evidence["compiled"] = checks.compiled, checks.compiled_evidence
        static = checks.static
        m.static_analysis = 0.0 if static.step_failed else static_score(static.error_count)
        trace.evidence["static_analysis"] = static.evidence
        trace.timing["compiled_s"] = checks.compiled_evidence.duration_s
        trace.timing["static_analysis_s"] = static.evidence.duration_s
        for comp, ev, own, given in (("compiled", checks.compiled_evidence, STEP_TIMEOUT_S,
                                      compile_s),
                                     ("static_analysis", static.evidence, STEP_TIMEOUT_S,
                                      static_s)):
            if (deadline.capped(own, given)
                    and str(ev.details.get("step_failed", "")).startswith("timed out")):
                m.notes[comp] = deadline.ran_out(f"the {comp} check", cut=True)  # 0.0
    if restore:
        check_restored(checks.then["restore_public_tests"])
    return True


def install_step(trace: Trace, sb, deadline: Deadline, key: str) -> str | None:
    """``install = true``: the patched repo pip-installed (:func:`install_repo`, the patch's
    build code: under the deadline as the patch's time), then every process of the sandbox
    user killed. Evidence in ``trace.evidence[key]``, with ``details["repo_changes"]``: the
    repo paths the build code changed, looked for once it installed (:func:`repo_changes`;
    the caller makes any an integrity violation; after a failed install nothing of the
    sandbox runs). Returns None when it installed cleanly, else the note of the
    suites that cannot run: pip's failure (``install_failed: ...``; also
    ``trace.install_failed``, the record's reason),
    the repo changed, or the deadline's note.

    Raises:
        InfraError: the sandbox failed, or the deadline ran out and the harness used the
            larger share of the time.
    """
    if not deadline.can_start():
        return deadline.ran_out("the install")
    given = deadline.budget(INSTALL_TIMEOUT_S)
    with deadline.patch_code():
        res = install_repo(sb, REPO, given)
        kill_user_processes(sb)
    changes = repo_changes(sb, REPO, res.started) if res.ok else []
    trace.evidence[key] = Evidence(command=res.command, exit_code=res.exit_code,
                                   duration_s=round(res.duration_s, 3), output=res.output,
                                   details={"timed_out": res.timed_out,
                                            "repo_changes": changes[:50]})
    if changes:
        return f"{INSTALL_FAILED}: the build changed the repository ({changes[0]})"
    if res.ok:
        return None
    if res.timed_out and deadline.capped(INSTALL_TIMEOUT_S, given):
        return deadline.ran_out("the install", cut=True)
    trace.install_failed = True
    return res.summary()


def not_run_suite(suite: str) -> SuiteRun:
    """A suite the deadline kept from running: no outcome, so every test counts as
    failed."""
    return SuiteRun(suite=suite, outcomes={}, command=NOT_RUN_NOTE, exit_code=-1,
                    duration_s=0.0, output="", timed_out=True, ended_early=["suite_deadline"])


def not_installed_suite(suite: str, note: str) -> SuiteRun:
    """A suite not run because the patched repo did not install (``note``: why, or the
    deadline's note when it kept the install from finishing): every test counts as
    failed."""
    if note.startswith(NOT_RUN_NOTE):
        return not_run_suite(suite)
    return SuiteRun(suite=suite, outcomes={}, command=f"not run: {INSTALL_FAILED}",
                    exit_code=-1, duration_s=0.0, output=note, ended_early=[INSTALL_FAILED])


def suite_within(m: Measurements, deadline: Deadline, suite: str, per_suite: float,
                  run) -> SuiteRun:
    """``run(timeout)`` one suite under the deadline: not started with too little time
    left, else with ``min(per_suite, what is left)`` seconds. A run the deadline kept from
    starting or cut short (tests that did not run count as failed) gets the deadline's
    note in ``m.notes[<suite>_tests]``, or raises InfraError when the harness used the
    time (:meth:`Deadline.ran_out`)."""
    step = f"the {suite} tests"
    if not deadline.can_start():
        m.notes[f"{suite}_tests"] = deadline.ran_out(step)
        return not_run_suite(suite)
    given = deadline.budget(per_suite)
    try:
        with deadline.patch_code():
            result = run(given)
    except InfraError:
        # Cut so short by the deadline that the runner could not even start its plugin or
        # report (e.g. pytest killed before it loaded): as if it had not run.
        if not deadline.capped(per_suite, given) or deadline.can_start():
            raise
        m.notes[f"{suite}_tests"] = deadline.ran_out(step, cut=True)
        return not_run_suite(suite)
    if result.timed_out and deadline.capped(per_suite, given):
        m.notes[f"{suite}_tests"] = deadline.ran_out(step, cut=True)
    return result


def second_sandbox_steps(ctx: Measuring, rng, second: Future, taken: list,
                         public_run: Future) -> SuiteRun:
    """In the second sandbox (same patch, fresh container): the hidden suite, mutation
    (killers: the trusted tests that passed, public ones from ``public_run``, which it
    waits for only once its mutants are generated), the benchmark. Returns the hidden run;
    fills ``ctx.m`` and ``ctx.trace``. Closes the sandbox. ``rng``: the hidden suite's
    order; ``second``: the future of (sandbox, how the patch applied there); ``taken``:
    where it puts the sandbox once it holds it."""
    trace, m, task, baseline, deadline = ctx.trace, ctx.m, ctx.task, ctx.baseline, ctx.deadline
    timer = trace.timer
    timeouts = task.config.timeouts
    with timer("sandbox_hidden"):
        try:
            sb, again = second.result()
        except NoTime as exc:  # the patch's code used the time: nothing runs here
            hidden = not_run_suite("hidden")
            m.notes["hidden_tests"] = exc.note
            if not skip_mutation(m, baseline, public_run, hidden):
                m.mutation_score, m.notes["mutation_score"] = 0.0, exc.note
            if task.config.benchmark is None:
                m.notes["performance"] = "the task declares no benchmark"
            else:
                m.performance, m.notes["performance"] = 0.0, exc.note
            return hidden
        taken.append(sb)
        mutant_generator.warm(sb)  # its start overlaps the hidden suite (once a process)
        with sb:
            if again.strategy != ctx.strategy:
                raise InfraError(f"the patch applied with {ctx.strategy} in the first "
                                 f"sandbox but {again.strategy} in the second: "
                                 f"{again.output[-500:]}")
            failed = None
            if task.config.install:
                with timer("install_hidden"):
                    failed = install_step(trace, sb, deadline, "install_hidden")
            if failed is not None:  # nothing to import: no step here can measure the patch
                hidden = not_installed_suite("hidden", failed)
                m.notes["hidden_tests"] = failed
                if not skip_mutation(m, baseline, public_run, hidden):
                    m.mutation_score, m.notes["mutation_score"] = 0.0, failed
                if task.config.benchmark is None:
                    m.notes["performance"] = "the task declares no benchmark"
                else:
                    m.performance, m.notes["performance"] = 0.0, failed
                return hidden
            with timer("hidden_tests"):
                hidden = suite_within(
                    m, deadline, "hidden", timeouts.per_suite,
                    lambda t: run_hidden(sb, task, SuiteRequest(t, list(ctx.summary.files), rng),
                                         fresh=not task.config.install))
            with timer("mutation_score"):
                if not skip_mutation(m, baseline, public_run, hidden):
                    measure_mutation(ctx, sb, public_run, hidden)
            with timer("performance"):
                measure_performance(ctx, sb)
            if ctx.suspicions or ctx.probes:
                with timer("differential"):
                    differential_step(ctx, sb, public_run.result(), hidden)
    return hidden


def differential_step(ctx: Measuring, sb, public: SuiteRun, hidden: SuiteRun) -> None:
    """The code scan's suspicions put to the test (:mod:`~proctor.harness.pipeline.differential`):
    evidence in ``trace.evidence["differential"]``; confirmed: the violation reasons in
    ``trace.confirmed``; undecided: the ``suspicious_code`` penalty indicator (the bare
    suspicion's cost; probes alone cost nothing)."""
    baseline = ctx.baseline
    # a scored run that showed tampering has its own ending: no calibration for it
    caught = any(r.tampered or r.tripwire for r in (public, hidden))
    if baseline.variant_changes is None and baseline.has_reference and ctx.calibrate and \
            not caught:
        started = time.monotonic()  # task preparation, once per task: not the patch's time
        baseline = ctx.calibrate()
        ctx.deadline.exclude(time.monotonic() - started)
        ctx.trace.timing["calibration_s"] = round(time.monotonic() - started, 3)
    started = time.monotonic()
    found = confirm(sb, Suspected(ctx.suspicions + ctx.probes, ctx.task, baseline,
                                  {"public": public, "hidden": hidden},
                                  tuple(ctx.summary.files), hashlib.sha256(ctx.data).hexdigest()),
                    ctx.deadline)
    ctx.trace.evidence["differential"] = Evidence(
        command="pytest (the suites' FAIL_TO_PASS tests under the calibrated variants)",
        duration_s=round(time.monotonic() - started, 3),
        details={"verdict": found.verdict, "note": found.note, **found.details})
    if found.verdict == "confirmed":
        ctx.trace.confirmed.extend(found.reasons)
    elif found.verdict == "unconfirmed" and ctx.suspicions:
        ctx.m.penalty_indicators["suspicious_code"] = 1.0
        ctx.m.notes["suspicious_code"] = f"suspicion not put to the test: {found.note}"


def skip_mutation(m: Measurements, baseline: Baseline, public_run: Future,
                   hidden: SuiteRun) -> bool:
    """Mutation cannot change the reward (no FAIL_TO_PASS test passes in any suite;
    :func:`cannot_change_reward`): note why (its value stays null) and return True. Waits
    for the public run only when the hidden one shows no progress."""
    if no_progress_yet(baseline, hidden) and cannot_change_reward(
            {r.suite: grade_suite(baseline, r) for r in (public_run.result(), hidden)}):
        m.notes["mutation_score"] = NO_PROGRESS_NOTE  # null: reward unchanged
        return True
    return False


def no_progress_yet(baseline: Baseline, hidden: SuiteRun) -> bool:
    """No FAIL_TO_PASS test of the hidden run passes: mutation may not be able to change
    the reward (decided with the public run, :func:`cannot_change_reward`), so it waits
    for the public suite instead of starting at once. Pure."""
    return grade_suite(baseline, hidden).f2p_passed == 0


def measure_mutation(ctx: Measuring, sb, public_run: Future, hidden: SuiteRun) -> None:
    """The mutation step under the deadline: its own timeout and its wait for the public
    suite's killers both capped by what is left (:func:`mutation_budgets`). Not started
    with too little time left, or cut short by the deadline (it ran out of a time the
    deadline shortened): 0.0 with the deadline's note, or InfraError when the harness used
    the time (:meth:`Deadline.ran_out`)."""
    trace, m, task, baseline, deadline = ctx.trace, ctx.m, ctx.task, ctx.baseline, ctx.deadline
    cfg, per_suite = task.config.mutation, task.config.timeouts.per_suite
    if not deadline.can_start():
        m.mutation_score, m.notes["mutation_score"] = 0.0, deadline.ran_out("the mutation step")
        return
    own = cfg.timeout_s + per_suite + KILLERS_WAIT_SLACK_S
    with deadline.patch_code():
        if hidden.stray_processes != 0:  # none left: nothing to kill
            kill_user_processes(sb)
        timeout, wait = mutation_budgets(deadline.left(), cfg.timeout_s, per_suite)
        mut = run_mutation(
            sb, task, ctx.data, ctx.strategy, ctx.summary,
            lambda: trusted_killers(baseline, [public_run.result(), hidden]),
            workers=max(1, int(ctx.limits.cpus)), cpus=ctx.limits.cpus, timeout=timeout,
            killers_wait_s=wait, reach=baseline.reach,
            never_kill=sorted({t for s in baseline.suites.values() for t in s.quarantined}))
    m.mutation_score, trace.evidence["mutation"] = mut.score, mut.evidence
    if mut.ran_out and deadline.capped(own, timeout + wait) and not mut.tampered:
        # What it judged before the deadline depends on the machine's speed: scored 0.0,
        # the same every time (a null would re-share the weight and raise the reward).
        m.mutation_score = 0.0
        m.notes["mutation_score"] = deadline.ran_out("the mutation step", cut=True)
        return
    if mut.note:
        m.notes["mutation_score"] = mut.note
    trace.degraded = trace.degraded or mut.degraded
    if mut.tampered:  # forged verdicts: scored 0.0, out of the advantages
        trace.forged_verdicts = True


def measure_performance(ctx: Measuring, sb) -> None:
    """The ``performance`` component: the task's benchmark, or null when it declares none.
    Its runs together get ``repeat x timeout_s`` capped by what is left; kept from running
    or cut short by the deadline: 0.0 with the deadline's note (or InfraError: see
    :meth:`Deadline.ran_out`)."""
    trace, m, task, deadline = ctx.trace, ctx.m, ctx.task, ctx.deadline
    cfg = task.config.benchmark
    if cfg is None:
        m.notes["performance"] = "the task declares no benchmark"
        return
    if not deadline.can_start():
        m.performance, m.notes["performance"] = 0.0, deadline.ran_out("the benchmark")
        return
    own = cfg.timeout_s * cfg.repeat
    with deadline.patch_code():
        kill_user_processes(sb)
        bench_dir = place_bench_dir(sb, task)
        given = deadline.budget(own)
        result = run_benchmark(sb, cfg, repo=REPO, bench_dir=bench_dir, timeout=given,
                               pythonpath=task.pythonpath_in(REPO))
    trace.evidence["performance"] = result.evidence
    if result.ran_out and deadline.capped(own, given):
        m.performance = 0.0
        m.notes["performance"] = deadline.ran_out("the benchmark", cut=True)
        return
    m.performance = result.score
    m.notes["performance"] = result.note
    if result.degraded:
        trace.degraded = True


def changed_python_files(summary: PatchSummary) -> list[str]:
    """``.py`` files that exist after the patch (edited, added, rename or copy targets)."""
    kinds = {"modified", "added", "rename_to", "copy_to"}
    return sorted({t.path for t in summary.touched if t.kind in kinds and t.path.endswith(".py")})


def renamed_python_files(summary: PatchSummary) -> dict[str, str]:
    """New path -> old path of the ``.py`` files the patch renamed (from a ``.py`` file)."""
    return {new: old for old, new in summary.renames
            if old.endswith(".py") and new.endswith(".py")}


def close_now(future) -> None:
    """Close the second sandbox whoever holds it (its steps then fail at once; the first
    error is the one raised)."""
    try:
        sb, _ = future.result()
    except BaseException:  # noqa: BLE001 - it closed itself
        return
    sb.close()
