"""Score one patch: the pipeline of design.md section 2, in order.

    1. integrity   parse the diff, normalise paths, match forbidden rules, judge
                   pyproject.toml per section (no copy, no container)
    2. baseline    cached per task: FAIL_TO_PASS / PASS_TO_PASS / quarantined; then refuse
                   new modules shadowing what the image has installed
    3. sandbox     fresh container, repo as a single-commit git repo, `git apply` and the
                   post-apply tree report (one command); then, before any code of the patch
                   runs, the tamper checks (tree check, suspicious code, tests weakened,
                   reference data altered)
    4. measure     compiled and static analysis (files only, before any code of the patch
                   runs; one command with the restore of the pristine public tests), public
                   tests; in a second fresh sandbox with the same patch applied (made at
                   once, used once the tamper check passed; its steps alongside the first's
                   unless ``overlap=False``): hidden tests (copied in now), mutation score
                   (changed lines, trusted killers: its kill phase waits for the public
                   run), performance (task benchmark)
    5. reward      pure function of the measurements

Agent mistakes are outcomes (``reason`` in the record); harness failures are exceptions,
caught once here and returned as ``status="error"`` with ``reward=None``.

Every step after the task's preparation runs under the per-patch deadline
(:class:`~proctor.harness.pipeline.deadline.Deadline`: each step's timeout capped by what is left;
what it keeps from running is the patch's failure or the harness's, by who used the time).

Steps 2 to 4 hold a sandbox slot (:mod:`proctor.harness.pipeline.slots`, the cap on live sandboxes;
the wait for it is not counted against the deadline); the overlapping second sandbox takes
a second slot only when one is free at once, else the two sandboxes run one after the
other. Sandboxes are adopted by the current :mod:`~proctor.harness.pipeline.cancel` scope.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

from proctor.errors import InfraError, ProctorError
from proctor.harness.integrity.check import check_integrity
from proctor.harness.integrity.forbidden import ForbiddenRules
from proctor.harness.integrity.shadowing import image_top_level_modules, shadowing_reasons
from proctor.harness.pipeline import cancel, slots
from proctor.harness.pipeline.deadline import (
    KILLERS_WAIT_SLACK_S,
    NOT_RUN_NOTE,
    Deadline,
    file_check_budgets,
    mutation_budgets,
)
from proctor.harness.pipeline.install import (
    INSTALL_FAILED,
    INSTALL_TIMEOUT_S,
    install_repo,
    repo_changes,
)
from proctor.harness.pipeline.suites_in_sandbox import (
    open_patched_sandbox,
    run_hidden,
    run_public,
    suite_rng,
    task_baseline,
)
from proctor.harness.pipeline.workspace import (
    check_restored,
    kill_user_processes,
    place_bench_dir,
    restore_public_tests,
    restore_public_tests_step,
)
from proctor.harness.tamper.tree import (
    TextVerdict,
    inspect_patched_tree,
    judge_texts,
    predicted_texts,
    pristine_hashes,
    pristine_text,
    wanted_texts,
)
from proctor.patch.added_lines import added_lines
from proctor.patch.apply import apply_variants
from proctor.patch.diffstat import code_lines_changed
from proctor.patch.parse import PatchSummary, PatchUnparseable, git_listed_paths
from proctor.patch.screen import ScreenedPatch, screen_patch
from proctor.record import EnvInfo, ErrorInfo, Evidence, Integrity, Measurements, RewardRecord
from proctor.rewards.components import static_score
from proctor.rewards.gate import gate_verdict
from proctor.rewards.reward import INTEGRITY_VIOLATION_REWARD, compute_reward
from proctor.rewards.weights import COMPONENTS
from proctor.sandbox import cleanup
from proctor.sandbox.backends import check_required, choose_backend, resolve_env
from proctor.sandbox.base import Limits
from proctor.sandbox.layout import REPO
from proctor.suites.baseline import Baseline, grade_suite
from proctor.suites.benchmark import run_benchmark
from proctor.suites.file_checks import run_file_checks
from proctor.suites.mutation import (
    NO_PROGRESS_NOTE,
    cannot_change_reward,
    run_mutation,
    trusted_killers,
)
from proctor.suites.pytest_runner import SuiteRun
from proctor.suites.secrets_scan import find_secrets
from proctor.suites.suppressions import find_suppressions
from proctor.task import Task, load_task
from proctor.version import __version__

#: Reward of an honest failure that changed nothing measurable (empty, unparseable, did not
#: apply): exactly what an empty patch earns. Strictly above an integrity violation.
HONEST_FAILURE_REWARD = 0.0
STEP_TIMEOUT_S = 120.0
#: Own timeouts of the file checks' parts (compile check, static analysis, the restore of
#: the pristine public tests), before the deadline caps them.
RESTORE_TIMEOUT_S = 60.0


class _NoTime(InfraError):
    """A step did not run (or ended unfinished) for lack of time, and the patch's code used
    the larger share of it (:meth:`Deadline.ran_out` returned ``note``): the caller records
    what did not run as failed. Should it escape, the record is an infrastructure error,
    never a score."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


def score(task: Task | str | Path, patch: bytes | str, *, rollout_id: str | None = None,
          group_id: str | None = None, sample_index: int | None = None,
          image: str | None = None, limits: Limits | None = None,
          sandbox: str | None = None, overlap: bool = True) -> RewardRecord:
    """Score one patch against one task; never raises for the patch's or the harness's faults.

    Args:
        task: a loaded :class:`Task` or a task directory.
        patch: the unified diff (bytes as the agent produced them, or text).
        image: sandbox image tag; default is the image ``proctor image build`` made.
        limits: sandbox limits; default: the task's ``[limits]``.
        sandbox: backend name (``docker``, ``local``); default: ``$PROCTOR_SANDBOX``, else
            Docker when an engine answers, else local.
        overlap: make the second sandbox at once and run its steps (hidden suite, mutation)
            alongside the first's (about 0.7 s less wall time per patch on an idle 2-core
            host). False: one step after the other, the second sandbox made only once the
            tamper check passed: no speculative sandbox for patches that end early, but
            measured no faster even with a worker per core (same record either way).

    Returns:
        A :class:`RewardRecord`: ``status="scored"`` with ``reward`` (about -1.0 .. 1.0, no
        floor, no clamp; -1.0 exactly for an integrity violation), or ``status="error"``
        with ``reward=None`` and ``error`` (kind, message, retryable) when the task is
        invalid or the infrastructure failed.

    Time: returns within the task's ``per_patch`` seconds plus 10, whatever the patch does
    (code that hangs at import, tests that all hang), not counting the task's preparation:
    the first score of a task (or of a process) computes and caches the sandbox
    environment, the baseline and the image's module list, which may take longer; every
    later score of the task finds them cached. Nor the wait for a sandbox slot
    (``timing["slot_wait_s"]``, see :mod:`proctor.harness.pipeline.slots`). See
    :class:`~proctor.harness.pipeline.deadline.Deadline` for what the deadline keeps from running
    and how it is scored.
    """
    started = time.monotonic()
    cleanup.at_start()  # first score of the process: remove sandboxes of dead owners
    data = patch.encode("utf-8") if isinstance(patch, str) else bytes(patch)
    screened = screen_patch(data)
    task_id = task.id if isinstance(task, Task) else Path(task).name
    rec = RewardRecord(
        task_id=task_id, rollout_id=rollout_id or uuid.uuid4().hex, group_id=group_id,
        sample_index=sample_index, status="scored", reward=None,
        env=EnvInfo(proctor_version=__version__, patch_sha256=screened.sha256),
    )
    try:
        task = task if isinstance(task, Task) else load_task(task)
        rec.task_id, rec.env.task_fingerprint = task.id, task.fingerprint
        _run_pipeline(rec, task, screened, data, image,
                      limits or task.config.limits.to_limits(), sandbox, overlap)
    except ProctorError as exc:
        _error(rec, exc.kind, str(exc), exc.retryable)
    except Exception as exc:  # noqa: BLE001 - a harness bug must not kill a training loop
        _error(rec, "internal_error", f"{type(exc).__name__}: {exc}", False)
    rec.timing["total_s"] = round(time.monotonic() - started, 3)
    return rec


def _error(rec: RewardRecord, kind: str, message: str, retryable: bool) -> None:
    """Status ``error``, no reward: never scored as the agent's failure or success."""
    rec.status, rec.reward, rec.verdict, rec.reason = "error", None, None, None
    rec.error = ErrorInfo(kind=kind, message=message, retryable=retryable)
    rec.flags.exclude_from_advantage = True


def _run_pipeline(rec: RewardRecord, task: Task, screened: ScreenedPatch, data: bytes,
                  image: str | None, limits: Limits, sandbox: str | None,
                  overlap: bool = True) -> None:
    deadline = Deadline(task.config.timeouts.per_patch)
    timer = _phase_timer(rec)
    try:
        _steps(rec, task, screened, data, image, limits, sandbox, overlap, deadline, timer)
    finally:
        patch_s, harness_s = deadline.shares()
        rec.timing["patch_code_s"] = round(patch_s, 3)
        rec.timing["harness_ops_s"] = round(harness_s, 3)


def _steps(rec: RewardRecord, task: Task, screened: ScreenedPatch, data: bytes,
           image: str | None, limits: Limits, sandbox: str | None, overlap: bool,
           deadline: Deadline, timer) -> None:
    # 1. Integrity: before anything is copied or started.
    if screened.reason:
        return _honest_failure(rec, screened.reason, screened.message, task)
    with timer("integrity"):
        rules = ForbiddenRules.for_task(
            task.config.forbidden, task.hidden_only_files,
            existing_top_level=[p.name for p in task.repo.iterdir()])
        try:
            git_paths = _git_paths_as_applied(data)
            try:
                summary, verdict = check_integrity(screened.text, rules, git_paths,
                                                   lambda p: pristine_text(task.repo, p))
            except PatchUnparseable:  # wrong hunk counts: read it as --recount applies it
                summary, verdict = check_integrity(screened.text, rules, git_paths,
                                                   lambda p: pristine_text(task.repo, p),
                                                   recount=True)
        except PatchUnparseable as exc:
            return _honest_failure(rec, "patch_unparseable", str(exc), task)
    rec.integrity = Integrity(violated=verdict.violated, reasons=list(verdict.reasons),
                              paths=list(verdict.paths))
    with timer("added_lines_scan"):
        blockers = _scan_added_lines(rec, screened.text)
    if verdict.violated:
        return _violation(rec, [], task, blockers)

    # Steps 2 to 4 hold a sandbox slot (the process's and machine's cap on live sandboxes);
    # the wait for it is not counted against the deadline.
    waiting = time.monotonic()
    with slots.acquire():
        waited = time.monotonic() - waiting
        rec.timing["slot_wait_s"] = round(waited, 3)
        deadline.exclude(waited)
        return _sandboxed_steps(rec, task, screened, data, image, limits, sandbox, overlap,
                                deadline, timer, summary, blockers)


def _sandboxed_steps(rec: RewardRecord, task: Task, screened: ScreenedPatch, data: bytes,
                     image: str | None, limits: Limits, sandbox: str | None, overlap: bool,
                     deadline: Deadline, timer, summary: PatchSummary,
                     blockers: list[str]) -> None:
    """Steps 2 to 4 and the reward, under one sandbox slot held by the caller."""
    # 2. Baseline (cached per task + image + Proctor version).
    with timer("baseline"):
        backend = choose_backend(sandbox)
        check_required(backend, task.config.limits.required,
                       task.config.hidden_at_upstream_path)
        tag, image_id = resolve_env(backend, image, task.requirements)
        rec.env.image, rec.env.image_digest = tag, image_id
        baseline = task_baseline(task, tag, image_id, limits, backend)
        shadowing = shadowing_reasons(
            summary, image_top_level_modules(backend, tag, image_id, limits),
            [p.name for p in task.repo.iterdir()])
    deadline.exclude(rec.timing["baseline_s"])  # task preparation: cached, not counted
    if shadowing:  # a new top-level module named like one the image has installed
        return _violation(rec, shadowing, task, blockers)

    # 3. Sandbox: fresh container, single-commit repo, git apply, the tree report of the
    # patched repo (one command; judged on the host right after). The second
    # sandbox (hidden suite, mutation, benchmark: nothing the public run started or wrote
    # reaches them) is made at once, in parallel, and closed unused on any early return
    # (``overlap``; else only once the tamper check passed).
    ttl = task.config.timeouts.per_patch + 300  # expiry label: deadline + teardown slack

    def sandbox(tree_paths: list[str] | None = None):
        given = _harness_budget(deadline, "sandbox creation", STEP_TIMEOUT_S)
        try:
            opened = open_patched_sandbox(task, tag, data, limits, rec.rollout_id,
                                          backend=backend, ttl_s=ttl, timeout=given,
                                          tree_paths=tree_paths)
            cancel.adopt(opened[0])  # removed at once if the requester went away
            return opened
        except InfraError as exc:  # the copy and apply ran out of what the deadline left?
            if (isinstance(exc, _NoTime) or deadline.can_start()
                    or not deadline.capped(STEP_TIMEOUT_S, given)):
                raise
            raise _NoTime(deadline.ran_out("sandbox creation", cut=True)) from exc

    with ExitStack() as stack:
        if overlap:  # a second sandbox alive at once: only with a second slot free now
            try:
                stack.enter_context(slots.acquire(timeout=0))
            except slots.SlotTimeout:
                overlap = False
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=3))
        taken: list = []
        # the tamper judges read the touched files' texts: judged now, on the texts the host
        # predicts, while the sandboxes are made; kept when the tree holds those texts
        texts_judged = _submit(pool, _judge_predicted_texts, task, summary, screened.text)
        if overlap:
            second = _submit(pool, sandbox)
            stack.callback(_close_unused, second, taken)
        with timer("sandbox"):  # create + copy + apply + the tree report (one command)
            sb, applied = sandbox(wanted_texts(summary))
        stack.callback(sb.close)
        rec.apply_strategy = applied.strategy
        rec.evidence["apply"] = Evidence(command="git apply", exit_code=0 if applied.applied
                                         else 1, duration_s=round(applied.duration_s, 3),
                                         output=applied.output[-4000:])
        if not applied.applied:
            return _honest_failure(rec, "did_not_apply", applied.output[-500:], task,
                                   blockers)
        with timer("tamper"):  # tree check + detections, before any code of the patch runs
            tamper = inspect_patched_tree(
                sb, task, REPO, summary,
                _harness_budget(deadline, "the tamper checks", STEP_TIMEOUT_S),
                applied.tree_report, applied.tree_report_cut, texts_judged.result())
        rec.evidence["tamper"] = Evidence(
            command="tree_report.py (in the apply command); tamper judges",
            duration_s=round(applied.tree_report_s + rec.timing["tamper_s"], 3),
            details={"violations": tamper.violations, "findings": tamper.findings})
        if tamper.violations:
            return _violation(rec, tamper.violations, task, blockers)

        # 4. Measure, each step under its own timeout. The second sandbox runs the hidden
        # suite now, then mutation (its kill phase waits for the public suite's trusted
        # killers), while the first runs, before any code of the patch: compiled and static
        # analysis (files only) and the restore of the pristine public tests (one command);
        # then the public suite. Without ``overlap``: the first sandbox's steps, then the
        # second's.
        public_run: Future = Future()
        m = Measurements(diff_lines=code_lines_changed(screened.text),
                         penalty_indicators=dict(tamper.indicators))
        hidden_steps = partial(_second_sandbox_steps, rec, m, task, data, applied, summary,
                               baseline, limits, deadline,
                               suite_rng(screened.sha256, task.fingerprint, "hidden"))
        if overlap:
            hidden_side = _submit(pool, hidden_steps, second, taken, public_run)
        try:
            install = task.config.install
            restored = _files_steps(rec, m, sb, task, summary, deadline, restore=not install)
            failed = None
            if install and restored:  # the patch's build code, then the pristine tests back
                with timer("install"):
                    failed = _install_step(rec, sb, deadline, "install")
                if failed is None and not deadline.can_start():  # the build used the time
                    failed = deadline.ran_out("the public tests")
                elif failed is None:
                    restore_public_tests(sb, task, deadline.budget(RESTORE_TIMEOUT_S))
            with timer("public_tests"):
                if failed is not None:  # not run: every public test failed
                    public = _not_installed_suite("public", failed)
                    m.notes["public_tests"] = failed
                else:
                    public = _suite_within(
                        m, deadline, "public", task.config.timeouts.per_suite,
                        lambda t: run_public(sb, task, t, list(summary.files),
                                             restored=restored,
                                             rng=suite_rng(screened.sha256, task.fingerprint,
                                                           "public")))
        except BaseException as exc:  # the second sandbox's mutation step waits for it
            public_run.set_exception(exc)
            if overlap:  # end the second sandbox's steps now, not after its hidden run
                _close_now(second)
            raise
        public_run.set_result(public)
        sb.close()
        if overlap:
            hidden = hidden_side.result()
        else:
            second = _submit(pool, sandbox)
            stack.callback(_close_unused, second, taken)
            hidden = hidden_steps(second, taken, public_run)

    changed = sorted({p for key in ("install", "install_hidden") if key in rec.evidence
                      for p in rec.evidence[key].details.get("repo_changes", [])})
    if changed:  # the build code changed what the tamper checks had judged
        return _violation(rec, [f"{p}: changed in the repository by the install's build code"
                                for p in changed[:20]], task, blockers)
    # 5. Reward: a pure function of the measurements.
    _grade(rec, m, baseline, public, hidden, task, blockers)
    rec.flags.exclude_from_advantage |= tamper.detected
    return None


def _judge_predicted_texts(task: Task, summary: PatchSummary, patch_text: str
                           ) -> TextVerdict | None:
    """:func:`~proctor.harness.tamper.tree.judge_texts` of the texts the host predicts ``git
    apply`` writes; None when it cannot predict them or the judging fails (then the real
    texts are judged)."""
    try:
        predicted = predicted_texts(summary, patch_text, task.repo)
        if predicted is None:
            return None
        return judge_texts(summary, pristine_hashes(task.repo, task.fingerprint), predicted,
                           lambda p: pristine_text(task.repo, p), task.config.tests.public)
    except Exception:  # noqa: BLE001 - only a head start: the tree's texts are judged anyway
        return None


def _submit(pool: ThreadPoolExecutor, fn, *args) -> Future:
    """``pool.submit`` in a copy of the caller's context (its cancel scope goes along)."""
    return pool.submit(contextvars.copy_context().run, fn, *args)


def _no_progress_yet(baseline: Baseline, hidden: SuiteRun) -> bool:
    """No FAIL_TO_PASS test of the hidden run passes: mutation may not be able to change
    the reward (decided with the public run, :func:`cannot_change_reward`), so it waits
    for the public suite instead of starting at once. Pure."""
    return grade_suite(baseline, hidden).f2p_passed == 0


def _files_steps(rec: RewardRecord, m: Measurements, sb, task: Task, summary: PatchSummary,
                 deadline: Deadline, *, restore: bool = True) -> bool:
    """``compiled`` and ``static_analysis`` (they read files only, before any code of the
    patch runs; static from a snapshot of the changed files), then (``restore``) the
    pristine public tests put back for the public run: one sandbox command, each part with
    its own timeout (capped by the deadline,
    :func:`~proctor.harness.pipeline.deadline.file_check_budgets`) and evidence
    (:mod:`proctor.suites.file_checks`). Returns whether the command ran (False only when
    the deadline kept it from running: then the public suite cannot run either)."""
    py_paths = _changed_python_files(summary)
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
    with _phase_timer(rec)("file_checks"), deadline.patch_code():
        checks = run_file_checks(sb, REPO, py_paths, compile_timeout=compile_s,
                                 static_timeout=static_s,
                                 then=[restore_public_tests_step(task, restore_s)]
                                 if restore else [],
                                 renamed_from=_renamed_python_files(summary))
    if py_paths:
        m.compiled, rec.evidence["compiled"] = checks.compiled, checks.compiled_evidence
        static = checks.static
        m.static_analysis = 0.0 if static.step_failed else static_score(static.error_count)
        rec.evidence["static_analysis"] = static.evidence
        rec.timing["compiled_s"] = checks.compiled_evidence.duration_s
        rec.timing["static_analysis_s"] = static.evidence.duration_s
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


def _install_step(rec: RewardRecord, sb, deadline: Deadline, key: str) -> str | None:
    """``install = true``: the patched repo pip-installed (:func:`install_repo`, the patch's
    build code: under the deadline as the patch's time), then every process of the sandbox
    user killed. Evidence in ``rec.evidence[key]``, with ``details["repo_changes"]``: the
    repo paths the build code changed, looked for once it installed (:func:`repo_changes`;
    the caller makes any an integrity violation; after a failed install nothing of the
    sandbox runs). Returns None when it installed cleanly, else the note of the
    suites that cannot run: pip's failure (``install_failed: ...``; also ``rec.reason``),
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
    rec.evidence[key] = Evidence(command=res.command, exit_code=res.exit_code,
                                 duration_s=round(res.duration_s, 3), output=res.output,
                                 details={"timed_out": res.timed_out,
                                          "repo_changes": changes[:50]})
    if changes:
        return f"{INSTALL_FAILED}: the build changed the repository ({changes[0]})"
    if res.ok:
        return None
    if res.timed_out and deadline.capped(INSTALL_TIMEOUT_S, given):
        return deadline.ran_out("the install", cut=True)
    rec.reason = INSTALL_FAILED
    return res.summary()


def _harness_budget(deadline: Deadline, step: str, own: float) -> float:
    """Timeout of a harness operation that cannot be left out (sandbox creation, tamper
    checks): ``min(own, what is left)``.

    Raises:
        InfraError: not enough time left, and the harness used the larger share of it.
        _NoTime: not enough time left, and the patch's code used the larger share.
    """
    if not deadline.can_start():
        raise _NoTime(deadline.ran_out(step))
    return deadline.budget(own)


def _not_run_suite(suite: str) -> SuiteRun:
    """A suite the deadline kept from running: no outcome, so every test counts as
    failed."""
    return SuiteRun(suite=suite, outcomes={}, command=NOT_RUN_NOTE, exit_code=-1,
                    duration_s=0.0, output="", timed_out=True, ended_early=["suite_deadline"])


def _not_installed_suite(suite: str, note: str) -> SuiteRun:
    """A suite not run because the patched repo did not install (``note``: why, or the
    deadline's note when it kept the install from finishing): every test counts as
    failed."""
    if note.startswith(NOT_RUN_NOTE):
        return _not_run_suite(suite)
    return SuiteRun(suite=suite, outcomes={}, command=f"not run: {INSTALL_FAILED}",
                    exit_code=-1, duration_s=0.0, output=note, ended_early=[INSTALL_FAILED])


def _suite_within(m: Measurements, deadline: Deadline, suite: str, per_suite: float,
                  run) -> SuiteRun:
    """``run(timeout)`` one suite under the deadline: not started with too little time
    left, else with ``min(per_suite, what is left)`` seconds. A run the deadline kept from
    starting or cut short (tests that did not run count as failed) gets the deadline's
    note in ``m.notes[<suite>_tests]``, or raises InfraError when the harness used the
    time (:meth:`Deadline.ran_out`)."""
    step = f"the {suite} tests"
    if not deadline.can_start():
        m.notes[f"{suite}_tests"] = deadline.ran_out(step)
        return _not_run_suite(suite)
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
        return _not_run_suite(suite)
    if result.timed_out and deadline.capped(per_suite, given):
        m.notes[f"{suite}_tests"] = deadline.ran_out(step, cut=True)
    return result


def _second_sandbox_steps(rec: RewardRecord, m: Measurements, task: Task, data: bytes,
                          applied, summary: PatchSummary, baseline: Baseline, limits: Limits,
                          deadline: Deadline, rng, second: Future, taken: list,
                          public_run: Future) -> SuiteRun:
    """In the second sandbox (same patch, fresh container): the hidden suite, mutation
    (killers: the trusted tests that passed, public ones from ``public_run``, which it
    waits for only once its mutants are generated), the benchmark. Returns the hidden run;
    fills ``m`` and ``rec``. Closes the sandbox."""
    timer = _phase_timer(rec)
    timeouts = task.config.timeouts
    with timer("sandbox_hidden"):
        try:
            sb, again = second.result()
        except _NoTime as exc:  # the patch's code used the time: nothing runs here
            hidden = _not_run_suite("hidden")
            m.notes["hidden_tests"] = exc.note
            if not _skip_mutation(m, baseline, public_run, hidden):
                m.mutation_score, m.notes["mutation_score"] = 0.0, exc.note
            if task.config.benchmark is None:
                m.notes["performance"] = "the task declares no benchmark"
            else:
                m.performance, m.notes["performance"] = 0.0, exc.note
            return hidden
        taken.append(sb)
        with sb:
            if again.strategy != applied.strategy:
                raise InfraError(f"the patch applied with {applied.strategy} in the first "
                                 f"sandbox but {again.strategy} in the second: "
                                 f"{again.output[-500:]}")
            failed = None
            if task.config.install:
                with timer("install_hidden"):
                    failed = _install_step(rec, sb, deadline, "install_hidden")
            if failed is not None:  # nothing to import: no step here can measure the patch
                hidden = _not_installed_suite("hidden", failed)
                m.notes["hidden_tests"] = failed
                if not _skip_mutation(m, baseline, public_run, hidden):
                    m.mutation_score, m.notes["mutation_score"] = 0.0, failed
                if task.config.benchmark is None:
                    m.notes["performance"] = "the task declares no benchmark"
                else:
                    m.performance, m.notes["performance"] = 0.0, failed
                return hidden
            with timer("hidden_tests"):
                hidden = _suite_within(
                    m, deadline, "hidden", timeouts.per_suite,
                    lambda t: run_hidden(sb, task, t, list(summary.files),
                                         fresh=not task.config.install, rng=rng))
            with timer("mutation_score"):
                if not _skip_mutation(m, baseline, public_run, hidden):
                    _measure_mutation(rec, m, sb, task, data, applied.strategy, summary,
                                      baseline, limits, deadline, public_run, hidden)
            with timer("performance"):
                _measure_performance(rec, m, sb, task, deadline)
    return hidden


def _skip_mutation(m: Measurements, baseline: Baseline, public_run: Future,
                   hidden: SuiteRun) -> bool:
    """Mutation cannot change the reward (no FAIL_TO_PASS test passes in any suite;
    :func:`cannot_change_reward`): note why (its value stays null) and return True. Waits
    for the public run only when the hidden one shows no progress."""
    if _no_progress_yet(baseline, hidden) and cannot_change_reward(
            {r.suite: grade_suite(baseline, r) for r in (public_run.result(), hidden)}):
        m.notes["mutation_score"] = NO_PROGRESS_NOTE  # null: reward unchanged
        return True
    return False


def _measure_mutation(rec: RewardRecord, m: Measurements, sb, task: Task, data: bytes,
                      strategy: str | None, summary: PatchSummary, baseline: Baseline,
                      limits: Limits, deadline: Deadline, public_run: Future,
                      hidden: SuiteRun) -> None:
    """The mutation step under the deadline: its own timeout and its wait for the public
    suite's killers both capped by what is left (:func:`mutation_budgets`). Not started
    with too little time left, or cut short by the deadline (it ran out of a time the
    deadline shortened): 0.0 with the deadline's note, or InfraError when the harness used
    the time (:meth:`Deadline.ran_out`)."""
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
            sb, task, data, strategy, summary,
            lambda: trusted_killers(baseline, [public_run.result(), hidden]),
            workers=max(1, int(limits.cpus)), cpus=limits.cpus, timeout=timeout,
            killers_wait_s=wait, reach=baseline.reach,
            never_kill=sorted({t for s in baseline.suites.values() for t in s.quarantined}))
    m.mutation_score, rec.evidence["mutation"] = mut.score, mut.evidence
    if mut.ran_out and deadline.capped(own, timeout + wait) and not mut.tampered:
        # What it judged before the deadline depends on the machine's speed: scored 0.0,
        # the same every time (a null would re-share the weight and raise the reward).
        m.mutation_score = 0.0
        m.notes["mutation_score"] = deadline.ran_out("the mutation step", cut=True)
        return
    if mut.note:
        m.notes["mutation_score"] = mut.note
    rec.flags.degraded = rec.flags.degraded or mut.degraded
    if mut.tampered:  # forged verdicts: scored 0.0, out of the advantages
        rec.flags.exclude_from_advantage = True


def _git_paths_as_applied(data: bytes) -> set[str]:
    """Git's reading of the patch for the integrity cross-check, under every variant the
    apply step may use (:data:`~proctor.patch.apply.APPLY_STRATEGIES`: as is, with a
    final newline, ``--recount``): the union of the paths of those git can parse. A patch
    only a fallback can read (no final newline, wrong hunk counts: common in model output)
    is checked and applied like any other, not refused as unparseable.

    Raises:
        PatchUnparseable: git reads none of the variants (the first variant's error).
    """
    paths: set[str] = set()
    first: PatchUnparseable | None = None
    parsed = False
    seen: set[tuple[bytes, bool]] = set()
    for _name, flags, variant in apply_variants(data):
        if (variant, "--recount" in flags) in seen:
            continue
        seen.add((variant, "--recount" in flags))
        try:
            paths |= git_listed_paths(variant, recount="--recount" in flags)
            parsed = True
        except PatchUnparseable as exc:
            first = first or exc
    if not parsed:
        raise first
    return paths


def _close_unused(future, taken: list) -> None:
    """Close the prepared sandbox unless the pipeline took it (an early return or an error
    on the way leaves it unused)."""
    if taken:
        return
    try:
        sb, _ = future.result()
    except BaseException:  # noqa: BLE001 - it closed itself; the first error is the one raised
        return
    sb.close()


def _close_now(future) -> None:
    """Close the second sandbox whoever holds it (its steps then fail at once; the first
    error is the one raised)."""
    try:
        sb, _ = future.result()
    except BaseException:  # noqa: BLE001 - it closed itself
        return
    sb.close()


def _scan_added_lines(rec: RewardRecord, text: str) -> list[str]:
    """Host-side scans of the added lines (no copy, nothing run): suppressions (a flag) and
    secrets (a flag and a hard blocker of the gate). Returns the gate blockers."""
    lines = added_lines(text)
    suppressions, secrets = find_suppressions(lines), find_secrets(lines)
    rec.flags.suppressions_added = bool(suppressions)
    rec.flags.secret_in_patch = bool(secrets)
    if suppressions:
        rec.evidence["suppressions"] = Evidence(
            command="scan of added lines", details={"suppressions": suppressions})
    if not secrets:
        return []
    rec.evidence["secrets"] = Evidence(command="detect-secrets + keyword rule on added lines",
                                       details={"secrets": secrets})
    where = ", ".join(f"{s['path']}:{s['line']} ({s['type']})" for s in secrets[:3])
    return [f"secret in added lines: {where}"]


def _measure_performance(rec: RewardRecord, m: Measurements, sb, task: Task,
                         deadline: Deadline) -> None:
    """The ``performance`` component: the task's benchmark, or null when it declares none.
    Its runs together get ``repeat x timeout_s`` capped by what is left; kept from running
    or cut short by the deadline: 0.0 with the deadline's note (or InfraError: see
    :meth:`Deadline.ran_out`)."""
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
    rec.evidence["performance"] = result.evidence
    if result.ran_out and deadline.capped(own, given):
        m.performance = 0.0
        m.notes["performance"] = deadline.ran_out("the benchmark", cut=True)
        return
    m.performance = result.score
    m.notes["performance"] = result.note
    if result.degraded:
        rec.flags.degraded = True


def _grade(rec: RewardRecord, m: Measurements, baseline: Baseline, public: SuiteRun,
           hidden: SuiteRun, task: Task, blockers: list[str]) -> None:
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


def _changed_python_files(summary: PatchSummary) -> list[str]:
    """``.py`` files that exist after the patch (edited, added, rename or copy targets)."""
    kinds = {"modified", "added", "rename_to", "copy_to"}
    return sorted({t.path for t in summary.touched if t.kind in kinds and t.path.endswith(".py")})


def _renamed_python_files(summary: PatchSummary) -> dict[str, str]:
    """New path -> old path of the ``.py`` files the patch renamed (from a ``.py`` file)."""
    return {new: old for old, new in summary.renames
            if old.endswith(".py") and new.endswith(".py")}


def _unmeasured(rec: RewardRecord, reward: float, reason: str, why: str, task: Task) -> None:
    """A reward decided before anything was measured: every component null, with why."""
    rec.reward, rec.reason = reward, reason
    rec.components = {name: None for name in COMPONENTS}
    rec.component_notes = {name: why for name in COMPONENTS}
    rec.weights = task.config.effective_weights().as_dict()


def _violation(rec: RewardRecord, reasons: list[str], task: Task,
               blockers: list[str] = ()) -> None:
    """Integrity violation (reward -1.0); ``reasons`` found after the integrity phase (post-
    apply tree check, shadowing, suspicious code) are added to ``rec.integrity``."""
    rec.integrity.violated = True
    rec.integrity.reasons += reasons
    rec.integrity.paths = sorted(set(rec.integrity.paths)
                                 | {r.split(":", 1)[0] for r in reasons})
    _unmeasured(rec, INTEGRITY_VIOLATION_REWARD, "integrity_violation",
                "not measured: integrity violation", task)
    rec.flags.exclude_from_advantage = True
    rec.verdict = gate_verdict(rec.reward, {}, ["integrity violation", *blockers])


def _honest_failure(rec: RewardRecord, reason: str, message: str, task: Task,
                    blockers: list[str] = ()) -> None:
    _unmeasured(rec, HONEST_FAILURE_REWARD, reason, f"not measured: {reason}", task)
    rec.component_notes["reason"] = message
    rec.verdict = gate_verdict(rec.reward, {}, list(blockers))


def _phase_timer(rec: RewardRecord):
    """``with timer("phase"):`` records the phase's wall time in ``rec.timing`` (seconds)."""

    @contextmanager
    def timer(phase: str):
        start = time.monotonic()
        try:
            yield
        finally:
            rec.timing[f"{phase}_s"] = round(time.monotonic() - start, 3)

    return timer
