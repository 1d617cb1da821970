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

Each phase returns what the next needs, or the record's ending (an honest failure, a
violation: :mod:`~proctor.harness.pipeline.outcomes`), and reports its evidence and times in
a :class:`~proctor.harness.pipeline.outcomes.Trace`; the record is assembled once, at the
end, from the trace and the ending. Agent mistakes are endings (``reason`` in the record);
harness failures are exceptions, caught once here and ended as ``status="error"`` with
``reward=None``.

Every step after the task's preparation runs under the per-patch deadline
(:class:`~proctor.harness.pipeline.deadline.Deadline`: each step's timeout capped by what is left;
what it keeps from running is the patch's failure or the harness's, by who used the time).

Steps 2 to 4 hold a sandbox slot (:mod:`proctor.harness.pipeline.slots`, the cap on live sandboxes;
the wait for it is not counted against the deadline); the overlapping second sandbox takes
a second slot only when one is free at once, else the two sandboxes run one after the
other. Sandboxes are adopted by the current :mod:`~proctor.harness.pipeline.cancel` scope.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from proctor.errors import ProctorError
from proctor.harness.integrity import (
    ForbiddenRules,
    check_integrity,
    find_secrets,
    find_suppressions,
    image_top_level_modules,
    shadowing_reasons,
)
from proctor.harness.judge import Judge, judge_record
from proctor.harness.pipeline import slots
from proctor.harness.pipeline.agent_message import AgentMessage
from proctor.harness.pipeline.deadline import (
    Deadline,
)
from proctor.harness.pipeline.measure import (
    RESTORE_TIMEOUT_S,
    STEP_TIMEOUT_S,
    Measuring,
    close_now,
    files_steps,
    harness_budget,
    install_step,
    not_installed_suite,
    second_sandbox_steps,
    suite_within,
)
from proctor.harness.pipeline.outcomes import (
    Ending,
    Found,
    Trace,
    assemble,
    errored,
    graded,
    honest_failure,
    suite_evidence,
    violated,
)
from proctor.harness.pipeline.sandboxes import Env, SandboxPair
from proctor.harness.pipeline.suites_in_sandbox import (
    SuiteRequest,
    calibrate_task,
    run_public,
    suite_rng,
    task_baseline,
    task_bytecode,
)
from proctor.harness.pipeline.workspace import (
    ApplyResult,
    restore_public_tests,
)
from proctor.harness.tamper import (
    TamperVerdict,
    TextVerdict,
    inspect_patched_tree,
    judge_texts,
    predicted_texts,
    pristine_hashes,
    pristine_text,
    wanted_texts,
)
from proctor.patch import (
    PatchSummary,
    PatchUnparseable,
    PathRejected,
    ScreenedPatch,
    added_lines,
    applied_as,
    apply_variants,
    code_lines_changed,
    git_listed_paths,
    miscounted_hunks,
    normalise_path,
    screen_patch,
    without_prefixes,
)
from proctor.record import EnvInfo, Evidence, Integrity, Measurements, RewardRecord
from proctor.sandbox import (
    REPO,
    Limits,
    Sandbox,
    check_required,
    choose_backend,
    cleanup,
    resolve_env,
)
from proctor.suites import SuiteRun
from proctor.task import Task, load_task
from proctor.version import __version__


def score(task: Task | str | Path, patch: bytes | str, *, rollout_id: str | None = None,  # noqa: PLR0913
          group_id: str | None = None, sample_index: int | None = None,
          image: str | None = None, limits: Limits | None = None,
          sandbox: str | None = None, overlap: bool = True,
          message: str | bytes | None = None, transcript: Any = None,
          judge: Judge | None = None, message_change: str | None = None) -> RewardRecord:
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
        message: the agent's final message (a PR title and body, or its final answer;
            text, or bytes as received), checked against the measurements
            (:mod:`proctor.harness.pipeline.agent_message`): penalties ``message_*``, the
            ``false_claim`` flag and gate blocker, ``evidence["message"]``.
        transcript: what the agent did (OpenAI or Anthropic chat messages, a SWE-agent
            trajectory, OpenHands events; parsed JSON or its text), read for the test
            commands it ran and their results.
        judge: an optional judge that may only veto (:mod:`proctor.harness.judge`): called
            once the record is scored with a gate that is not FAIL.
        message_change: the diff the message describes, when it is more than ``patch``
            (``proctor gate``: the change with the tests that became the hidden suite).

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
    rollout_id = rollout_id or uuid.uuid4().hex
    trace = Trace(env=EnvInfo(proctor_version=__version__, patch_sha256=screened.sha256))
    said = AgentMessage(message, transcript, message_change) \
        if message is not None or transcript is not None else None
    trace.message_given = said is not None
    try:
        task = task if isinstance(task, Task) else load_task(task)
        task_id, trace.env.task_fingerprint = task.id, task.fingerprint
        ending = _run_pipeline(
            _Run(trace, task, screened, data, rollout_id,
                 Deadline(task.config.timeouts.per_patch), said),
            _Choice(image, limits or task.config.limits.to_limits(), sandbox, overlap))
    except ProctorError as exc:
        ending = errored(exc.kind, str(exc), exc.retryable)
    except Exception as exc:  # noqa: BLE001 - a harness bug must not kill a training loop
        ending = errored("internal_error", f"{type(exc).__name__}: {exc}", False)
    rec = assemble(trace, ending, task_id=task_id, rollout_id=rollout_id,
                   group_id=group_id, sample_index=sample_index)
    if judge is not None:
        said = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        rec = judge_record(rec, judge, screened.text, said,
                           task.config.judge.veto_cap if isinstance(task, Task) else 0.0)
    rec.timing["total_s"] = round(time.monotonic() - started, 3)
    return rec


@dataclass(frozen=True)
class _Run:
    """What every phase of one score reads: the trace it reports to, the task, the patch
    (as screened and as bytes), the rollout id and the per-patch deadline."""

    trace: Trace
    task: Task
    screened: ScreenedPatch
    data: bytes
    rollout_id: str
    deadline: Deadline
    said: AgentMessage | None = None


@dataclass(frozen=True)
class _Checked:
    """The integrity phase's result for a patch that may go on: what it touches, and the
    gate's hard blockers the added lines gave (secrets)."""

    summary: PatchSummary
    blockers: list[str]


@dataclass(frozen=True)
class _Judged:
    """The first sandbox, with the patch applied and the patched tree judged clean."""

    sb: Sandbox
    applied: ApplyResult
    tamper: TamperVerdict
    #: what the patch touches as git applied it (:func:`_as_applied`): what is measured
    summary: PatchSummary


@dataclass(frozen=True)
class _Choice:
    """The caller's choices for the sandboxes: image tag (None: the built one), limits,
    backend name (None: the default) and whether the two sandboxes overlap."""

    image: str | None
    limits: Limits
    sandbox: str | None
    overlap: bool


def _run_pipeline(run: _Run, choice: _Choice) -> Ending:
    """The five phases in order (design.md section 2); each returns what the next needs,
    or the record's :class:`Ending` once it has one (honest failure, violation)."""
    trace, task, screened, deadline = run.trace, run.task, run.screened, run.deadline
    try:
        if screened.reason:  # empty, too large, not UTF-8: nothing to read
            return honest_failure(screened.reason, screened.message, task)
        checked = _integrity(run)  # 1. before anything is copied or started
        if isinstance(checked, Ending):
            return checked
        # Steps 2 to 5 hold a sandbox slot (the process's and machine's cap on live
        # sandboxes); the wait for it is not counted against the deadline.
        waiting = time.monotonic()
        with slots.acquire():
            waited = time.monotonic() - waiting
            trace.timing["slot_wait_s"] = round(waited, 3)
            deadline.exclude(waited)
            return _sandboxed(run, checked, choice)
    finally:
        patch_s, harness_s = deadline.shares()
        trace.timing["patch_code_s"] = round(patch_s, 3)
        trace.timing["harness_ops_s"] = round(harness_s, 3)


def _sandboxed(run: _Run, checked: _Checked, choice: _Choice) -> Ending:
    """Phases 2 to 5, under the sandbox slot the caller holds."""
    trace, task = run.trace, run.task
    env = _baseline(run, checked, choice)  # 2.
    if isinstance(env, Ending):
        return env
    spec = env.spec(task, run.rollout_id)
    with SandboxPair(task, spec, run.data, run.deadline, choice.overlap) as pair:
        judged = _sandbox(run, pair, checked)  # 3.
        if isinstance(judged, Ending):
            return judged
        m, public, hidden = _measure(run, pair, checked, env, judged)  # 4.
    if trace.confirmed:  # the differential step showed a suspicion at work
        return violated(trace.integrity, trace.confirmed, task, checked.blockers)
    changed = sorted({p for key in ("install", "install_hidden") if key in trace.evidence
                      for p in trace.evidence[key].details.get("repo_changes", [])})
    if changed:  # the build code changed what the tamper checks had judged
        return violated(trace.integrity,
                        [f"{p}: changed in the repository by the install's build code"
                         for p in changed[:20]], task, checked.blockers)
    for suite_run in (public, hidden):
        trace.evidence[f"{suite_run.suite}_tests"] = suite_evidence(suite_run)
    return graded(m, env.baseline, (public, hidden), task,  # 5.
                  Found(tuple(checked.blockers), trace.install_failed, judged.tamper.detected),
                  run.said, run.screened.text)


def _integrity(run: _Run) -> _Checked | Ending:
    """Phase 1: the diff headers against the forbidden rules, cross-checked with git's
    reading, and the host's scans of the added lines. The ending once the record has one
    (unparseable patch, violation)."""
    trace, task, screened = run.trace, run.task, run.screened
    with trace.timer("integrity"):
        rules = ForbiddenRules.for_task(
            task.config.forbidden, task.hidden_only_files,
            existing_top_level=[p.name for p in task.repo.iterdir()])
        try:
            git_paths = _git_paths_as_applied(run.data)
            # a hunk whose counts differ from its body is read (and applied) recounted,
            # never up to its counts: that would judge half of it
            recount = {"recount": True} if miscounted_hunks(run.data) else {}
            try:
                summary, verdict = check_integrity(screened.text, rules, git_paths,
                                                   lambda p: pristine_text(task.repo, p),
                                                   **recount)
            except PatchUnparseable:  # wrong hunk counts: read it as --recount applies it
                if recount:
                    raise
                summary, verdict = check_integrity(screened.text, rules, git_paths,
                                                   lambda p: pristine_text(task.repo, p),
                                                   recount=True)
        except PatchUnparseable as exc:
            return honest_failure("patch_unparseable", str(exc), task)
    trace.integrity = Integrity(violated=verdict.violated, reasons=list(verdict.reasons),
                                paths=list(verdict.paths))
    with trace.timer("added_lines_scan"):
        blockers = _scan_added_lines(trace, screened.text)
    if verdict.violated:
        return violated(trace.integrity, [], task, blockers)
    return _Checked(summary, blockers)


def _baseline(run: _Run, checked: _Checked, choice: _Choice) -> Env | Ending:
    """Phase 2: the backend and environment chosen, the task's baseline (cached per task,
    image and Proctor version; its time is the task's preparation, not the patch's), and
    new top-level modules refused that shadow what the image has installed. The ending
    once the record has one (a shadowing violation)."""
    trace, task, limits = run.trace, run.task, choice.limits
    with trace.timer("baseline"):
        backend = choose_backend(choice.sandbox)
        trace.env.sandbox = backend
        check_required(backend, task.config.limits.required,
                       task.config.hidden_at_upstream_path)
        tag, image_id = resolve_env(backend, choice.image, task.requirements)
        trace.env.image, trace.env.image_digest = tag, image_id
        mounts = task_bytecode(task, tag, image_id, limits, backend)
        baseline = task_baseline(task, tag, image_id, limits, backend, mounts=mounts)
        shadowing = shadowing_reasons(
            checked.summary, image_top_level_modules(backend, tag, image_id, limits),
            [p.name for p in task.repo.iterdir()])
    run.deadline.exclude(trace.timing["baseline_s"])  # task preparation: cached, not counted
    if shadowing:  # a new top-level module named like one the image has installed
        return violated(trace.integrity, shadowing, task, checked.blockers)
    return Env(backend, tag, image_id, baseline, limits, mounts)


def _sandbox(run: _Run, pair: SandboxPair, checked: _Checked) -> _Judged | Ending:
    """Phase 3: the first sandbox (fresh, the repo as a single-commit git repo, ``git
    apply`` and the tree report of the patched repo in one command), the second made
    alongside it (with overlap), then the tamper checks, before any code of the patch
    runs. The ending once the record has one (did not apply, tampering)."""
    trace, task, summary = run.trace, run.task, checked.summary
    # the tamper judges read the touched files' texts: judged now, on the texts the host
    # predicts, while the sandboxes are made; kept when the tree holds those texts
    texts_judged = pair.submit(_judge_predicted_texts, task, summary, run.screened.text)
    pair.start_second()
    with trace.timer("sandbox"):  # create + copy + apply + the tree report (one command)
        sb, applied = pair.open_first(wanted_texts(summary))
    trace.apply_strategy = applied.strategy
    recounted = miscounted_hunks(run.data) if applied.strategy and \
        "recount" in applied.strategy else []
    trace.evidence["apply"] = Evidence(command="git apply", exit_code=0 if applied.applied
                                       else 1, duration_s=round(applied.duration_s, 3),
                                       output=applied.output[-4000:],
                                       details={"recounted_hunks": recounted[:50]}
                                       if recounted else {})
    if not applied.applied:
        return honest_failure("did_not_apply", applied.output[-500:], task, checked.blockers)
    with trace.timer("tamper"):  # tree check + detections, before any code of the patch runs
        tamper = inspect_patched_tree(
            sb, task, REPO, summary,
            harness_budget(run.deadline, "the tamper checks", STEP_TIMEOUT_S),
            applied.tree_report, applied.tree_report_cut, texts_judged.result())
    trace.evidence["tamper"] = Evidence(
        command="tree_report.py (in the apply command); tamper judges",
        duration_s=round(applied.tree_report_s + trace.timing["tamper_s"], 3),
        details={"violations": tamper.violations, "findings": tamper.findings})
    if tamper.violations:
        return violated(trace.integrity, tamper.violations, task, checked.blockers)
    return _Judged(sb, applied, tamper, _as_applied(run.data, applied.strategy, summary))


def _as_applied(data: bytes, strategy: str | None, summary: PatchSummary) -> PatchSummary:
    """``summary`` as git applied the patch under ``strategy``: for a patch without
    ``a/`` / ``b/`` prefixes, whose summary holds each path both as written and as ``-p1``
    reads it (the integrity checks judge both), only the reading the applied strategy
    took (``-p0`` or not), so the files measured are the files changed."""
    if not strategy or not without_prefixes(data):
        return summary
    flags, variant = applied_as(data, strategy)
    try:
        listed = git_listed_paths(variant, recount="--recount" in flags, p0="-p0" in flags)
    except PatchUnparseable:
        return summary
    keep = set()
    for path in listed:
        try:
            keep.add(normalise_path(path, strip_prefix=False))
        except PathRejected:
            continue
    return replace(summary, touched=tuple(t for t in summary.touched if t.path in keep),
                   files=tuple(f for f in summary.files if f in keep),
                   added_line_numbers={k: v for k, v in summary.added_line_numbers.items()
                                       if k in keep},
                   renames=tuple(r for r in summary.renames if r[1] in keep))


def _measure(run: _Run, pair: SandboxPair, checked: _Checked, env: Env,
             judged: _Judged) -> tuple[Measurements, SuiteRun, SuiteRun]:
    """Phase 4, each step under its own timeout: the second sandbox runs the hidden suite,
    then mutation (its kill phase waits for the public suite's trusted killers), then the
    benchmark, while the first runs, before any code of the patch, compiled and static
    analysis (files only) and the restore of the pristine public tests (one command), then
    the public suite. Without overlap: the first sandbox's steps, then the second's.
    Returns the measurements and the public and hidden runs."""
    task, screened = run.task, run.screened
    public_run: Future = Future()
    m = Measurements(diff_lines=code_lines_changed(screened.text),
                     penalty_indicators=dict(judged.tamper.indicators))
    ctx = Measuring(run.trace, m, task, run.data, judged.summary, judged.applied.strategy,
                    env.baseline, env.limits, run.deadline, tuple(judged.tamper.suspicions),
                    partial(calibrate_task, task, env.baseline, env.tag, env.limits,
                            env.backend), tuple(judged.tamper.probes))
    hidden_steps = partial(second_sandbox_steps, ctx,
                           suite_rng(screened.sha256, task.fingerprint, "hidden"))
    if pair.overlap:
        hidden_side = pair.submit(hidden_steps, pair.second, pair.taken, public_run)
    try:
        public = _public_steps(ctx, judged.sb, screened.sha256)
    except BaseException as exc:  # the second sandbox's mutation step waits for it
        public_run.set_exception(exc)
        if pair.overlap:  # end the second sandbox's steps now, not after its hidden run
            close_now(pair.second)
        raise
    public_run.set_result(public)
    judged.sb.close()
    if pair.overlap:
        hidden = hidden_side.result()
    else:
        hidden = hidden_steps(pair.open_second_now(), pair.taken, public_run)
    return m, public, hidden


def _public_steps(ctx: Measuring, sb: Sandbox, patch_sha256: str) -> SuiteRun:
    """The first sandbox's measure steps: the file checks (and the restore of the pristine
    public tests), with ``install = true`` the install and then the restore, then the
    public suite (its order seeded by the patch's and the task's digests)."""
    trace, m, task, deadline = ctx.trace, ctx.m, ctx.task, ctx.deadline
    install = task.config.install
    restored = files_steps(ctx, sb, restore=not install)
    failed = None
    if install and restored:  # the patch's build code, then the pristine tests back
        with trace.timer("install"):
            failed = install_step(trace, sb, deadline, "install")
        if failed is None and not deadline.can_start():  # the build used the time
            failed = deadline.ran_out("the public tests")
        elif failed is None:
            restore_public_tests(sb, task, deadline.budget(RESTORE_TIMEOUT_S))
    with trace.timer("public_tests"):
        if failed is not None:  # not run: every public test failed
            m.notes["public_tests"] = failed
            return not_installed_suite("public", failed)
        rng = suite_rng(patch_sha256, task.fingerprint, "public")
        return suite_within(
            m, deadline, "public", task.config.timeouts.per_suite,
            lambda t: run_public(sb, task, SuiteRequest(t, list(ctx.summary.files), rng),
                                 restored=restored))


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


def _git_paths_as_applied(data: bytes) -> set[str]:
    """Git's reading of the patch for the integrity cross-check, under every variant the
    apply step may use (:func:`~proctor.patch.apply.apply_variants`: as is, with a
    final newline, ``--recount``, ``-p0``): the union of the paths of those git can parse. A patch
    only a fallback can read (no final newline, wrong hunk counts: common in model output)
    is checked and applied like any other, not refused as unparseable.

    Raises:
        PatchUnparseable: git reads none of the variants (the first variant's error).
    """
    paths: set[str] = set()
    first: PatchUnparseable | None = None
    parsed = False
    seen: set[tuple[bytes, bool, bool]] = set()
    for _name, flags, variant in apply_variants(data):
        key = (variant, "--recount" in flags, "-p0" in flags)
        if key in seen:
            continue
        seen.add(key)
        try:
            paths |= git_listed_paths(variant, recount=key[1], p0=key[2])
            parsed = True
        except PatchUnparseable as exc:
            first = first or exc
    if not parsed:
        raise first
    return paths


def _scan_added_lines(trace: Trace, text: str) -> list[str]:
    """Host-side scans of the added lines (no copy, nothing run): suppressions (a flag) and
    secrets (a flag and a hard blocker of the gate). Returns the gate blockers."""
    lines = added_lines(text)
    suppressions, secrets = find_suppressions(lines), find_secrets(lines)
    trace.suppressions_added = bool(suppressions)
    trace.secret_in_patch = bool(secrets)
    if suppressions:
        trace.evidence["suppressions"] = Evidence(
            command="scan of added lines", details={"suppressions": suppressions})
    if not secrets:
        return []
    trace.evidence["secrets"] = Evidence(command="detect-secrets + keyword rule on added lines",
                                       details={"secrets": secrets})
    where = ", ".join(f"{s['path']}:{s['line']} ({s['type']})" for s in secrets[:3])
    return [f"secret in added lines: {where}"]


