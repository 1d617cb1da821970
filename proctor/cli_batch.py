"""``proctor batch``: rollouts JSONL in, rewards JSONL out, with a progress bar and a summary.

Presentation only (progress, tables); the work is :func:`proctor.harness.batch.run.iter_batch`.
Exit codes: 0 the batch finished (records may still have ``status: "error"``: see the
summary), 2 bad usage (input unreadable, unknown executor or sandbox), 3 the batch finished
but some rollouts hit infrastructure errors (kind ``blocked`` and friends: rerun with
``--resume``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # imported where used: every ``proctor`` command loads this module
    from proctor.harness.batch import BatchSummary
    from proctor.record import RewardRecord

EXIT_CONFIG, EXIT_INFRA = 2, 3
INFRA_KINDS = {"blocked", "infra", "engine_unavailable", "image_missing", "internal_error"}


def judge_option(command: str | None, entry: str | None, timeout_s: float):
    """The :class:`~proctor.harness.judge.Judge` of ``--judge`` / ``--judge-entry``, or None.

    Raises:
        BatchConfigError: a bad judge (the CLI exits 2).
    """
    from proctor.harness.batch import BatchConfigError
    from proctor.harness.judge import Judge

    try:
        return Judge.from_options(command, entry, timeout_s)
    except ValueError as exc:
        raise BatchConfigError(f"--judge: {exc}") from None


def batch_command(
    rollouts: Path = typer.Argument(..., help="Rollouts JSONL (task, patch|patch_file, "
                                    "rollout_id, group_id, sample_index, message, transcript, "
                                    "metadata), "
                                    "or SWE-bench predictions (JSONL or .json) with --tasks."),
    output: Path = typer.Option(..., "--output", "-o", help="Reward records JSONL."),
    workers: int | None = typer.Option(None, "--workers", "-w", min=1,
                                       help="Concurrent rollouts (default: cores)."),
    executor: str = typer.Option("local", help="local (thread pool) or ray."),
    resume: bool = typer.Option(False, help="Keep records already in the output for the "
                                "same rollout_id and patch; score only the rest."),
    sandbox: str | None = typer.Option(
        None, help="Sandbox backend: docker or local (bubblewrap). Default: docker when an "
        "engine answers, else local."),
    image: str | None = typer.Option(None, help="Sandbox image tag (default: the built one)."),
    cache: bool = typer.Option(True, help="Reuse results of identical patches."),
    retries: int = typer.Option(3, min=0, help="Extra attempts for infrastructure errors."),
    warm: int | None = typer.Option(None, "--warm", min=0, help="Sandboxes made ahead and "
                                    "kept waiting during the batch (default: two per "
                                    "worker while workers < cores, fewer for a small "
                                    "batch; 0: none)."),
    tasks: Path | None = typer.Option(None, "--tasks", help="Imported tasks' directory, for "
                                      "SWE-bench predictions (instance_id, model_patch, "
                                      "model_name_or_path) in the input."),
    judge: str | None = typer.Option(
        None, "--judge", help="A judge command that may only veto (as in proctor score), "
        "called for each rollout whose gate is not FAIL."),
    judge_entry: str | None = typer.Option(
        None, "--judge-entry", help="The judge as a Python entry point module:function."),
    judge_timeout: float = typer.Option(60.0, "--judge-timeout", help="Seconds the judge "
                                        "may take; past them it changes nothing."),
    report: Path | None = typer.Option(None, "--report", help="Also write the HTML report "
                                       "of the output's records (as proctor report) when "
                                       "the batch ends."),
) -> None:
    """Score a JSONL file of rollouts in parallel; records are flushed as each finishes."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from proctor.errors import TaskConfigError
    from proctor.harness.batch import (
        BatchConfigError,
        BatchOptions,
        RetryPolicy,
        check_options,
        iter_batch,
        prepare_resume,
        read_rollouts,
        summarize,
    )
    from proctor.report import ReportDependencyError

    out, err = Console(), Console(stderr=True, soft_wrap=True)
    try:
        items = read_rollouts(rollouts, tasks)
    except OSError as exc:
        err.print(f"[red]cannot read {rollouts}[/red]: {exc.strerror or exc}")
        raise typer.Exit(EXIT_CONFIG) from None
    try:
        from proctor.sandbox import choose_backend

        options = BatchOptions(workers=workers, executor=executor,
                               sandbox=choose_backend(sandbox), image=image, cache=cache,
                               retry=RetryPolicy(retries=retries), warm=warm,
                               judge=judge_option(judge, judge_entry, judge_timeout))
        check_options(options)
        if report is not None:
            from proctor.report import check_dependencies

            check_dependencies()
            if report.resolve() in (output.resolve(), rollouts.resolve()):
                raise BatchConfigError(f"--report {report} would overwrite an input or "
                                       "the output")
            if report.is_dir():
                raise BatchConfigError(f"--report {report} is a directory: name the HTML "
                                       "file")
    except (BatchConfigError, TaskConfigError, ReportDependencyError) as exc:
        err.print(f"[red]error[/red]: {exc}", soft_wrap=True)
        raise typer.Exit(EXIT_CONFIG) from None
    output.parent.mkdir(parents=True, exist_ok=True)
    skip = prepare_resume(output, items) if resume else set()
    todo = [it for it in items if it.index not in skip]
    if skip:
        err.print(f"resume: {len(skip)} rollouts already in {output}, {len(todo)} to score")
    records: list[RewardRecord] = []
    started = time.monotonic()
    progress = Progress(
        TextColumn("[bold]scoring"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
        TimeRemainingColumn(), TextColumn("{task.fields[counts]}"),
        console=err, transient=False,
    )
    try:
        with open(output, "a" if resume else "w", encoding="utf-8") as sink, progress:
            bar = progress.add_task("batch", total=len(todo), rate="", counts="")
            for _, rec in iter_batch(todo, options):
                sink.write(rec.to_json() + "\n")
                sink.flush()  # a killed batch loses nothing already scored
                records.append(rec)
                minutes = max(time.monotonic() - started, 1e-9) / 60
                s = _counts(records)
                progress.update(bar, advance=1, rate=f"{len(records) / minutes:.1f}/min",
                                counts=f"scored {s[0]}  errors {s[1]}  violations {s[2]}")
    except BatchConfigError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_CONFIG) from None
    summary = summarize(records)
    _render_summary(out, summary, time.monotonic() - started, output)
    if report is not None:
        _write_report(err, output, report, items)
    if any(r.status == "error" and r.error and r.error.kind in INFRA_KINDS for r in records):
        raise typer.Exit(EXIT_INFRA)


def _write_report(err: Console, output: Path, report: Path, items: list) -> None:
    """The HTML report of every record in ``output``, with the rollouts' patches. A report
    that cannot be written is said on stderr; the batch's records are already safe."""
    from proctor.report import ReportDependencyError, ReportInputError, build_report, patches_of

    try:
        done = build_report(output, report, patches=patches_of(items))
    except (ReportInputError, ReportDependencyError, OSError) as exc:
        err.print(f"[red]report not written[/red]: {escape(str(exc))}", soft_wrap=True)
        return
    for line in done.messages():
        err.print(escape(line), soft_wrap=True)


def _counts(records: list[RewardRecord]) -> tuple[int, int, int]:
    from proctor.harness.batch import is_violation

    scored = sum(r.status == "scored" for r in records)
    return scored, len(records) - scored, sum(is_violation(r) for r in records)


def _render_summary(out: Console, s: BatchSummary, wall_s: float, output: Path) -> None:
    from rich.table import Table

    table = Table(title=f"{s.total} rollouts in {wall_s:.1f} s "
                        f"({s.total / max(wall_s, 1e-9) * 60:.1f}/min) -> {output}")
    for col, just in (("task", "left"), ("rollouts", "right"), ("scored", "right"),
                      ("mean reward", "right"), ("violations", "right"), ("errors", "right")):
        table.add_column(col, justify=just)
    for t in sorted(s.tasks.values(), key=lambda t: t.task_id):
        mean = "-" if t.mean_reward is None else f"{t.mean_reward:+.4f}"
        table.add_row(t.task_id or "(unknown)", str(t.rollouts), str(t.scored), mean,
                      str(t.violations), str(t.errors))
    out.print(table)
    out.print(f"violation rate {s.violation_rate:.1%}   error rate {s.error_rate:.1%}   "
              f"cache hits {s.cache_hits}")
    if s.error_kinds:
        out.print("errors by kind: " + ", ".join(f"{k} {n}" for k, n in
                                                 sorted(s.error_kinds.items())))
    if s.slowest:
        slow = Table(title="slowest rollouts")
        for col in ("seconds", "rollout", "task"):
            slow.add_column(col)
        for secs, rid, task in s.slowest:
            slow.add_row(f"{secs:.2f}", rid, task)
        out.print(slow)
