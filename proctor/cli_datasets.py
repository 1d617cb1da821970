"""``proctor task import swebench`` (a dataset's rows become checked tasks), ``proctor task
mine``, ``proctor export swebench`` and ``proctor gate`` (your own change, judged as an
agent's patch is)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from proctor.input_files import InputFileError, read_input

import_app = typer.Typer(no_args_is_help=True,
                         help="Make tasks from datasets (SWE-bench rows and their variants).")
out = Console()
err = Console(stderr=True, soft_wrap=True)  # messages: whole lines, whatever the width


@import_app.command("swebench")
def import_swebench(
    instances: Path = typer.Argument(..., help="Rows: JSONL, or a .json list (SWE-bench, "
                                               "SWE-Gym, SWE-rebench field names)."),
    repos: Path = typer.Option(..., "--repos", help="Directory of the rows' repositories: "
                               "OWNER__NAME, OWNER/NAME or NAME, a checkout, a bare "
                               "repository or a .bundle (no network is used)."),
    output: Path = typer.Option(..., "-o", "--output", help="Tasks directory (one task per "
                                "instance; a task already imported from the same row is "
                                "kept)."),
    public: str = typer.Option("others", help="Public tests: 'others' (the test modules the "
                               "test_patch does not touch) or 'all'."),
    install: str = typer.Option("auto", help="Pip-install the repository before the tests: "
                                "'auto' (when the row names an install command), 'yes', "
                                "'no'."),
    baseline_runs: int | None = typer.Option(None, "--baseline-runs", help="The tasks' "
                                             "\\[baseline] runs (default 3): runs of each "
                                             "suite with and without the fix."),
    check: bool = typer.Option(True, "--check/--no-check", help="Compute each task's "
                               "baseline and compare it with the row's FAIL_TO_PASS / "
                               "PASS_TO_PASS."),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Also "
                                   "calibrate each task's differential runs on its "
                                   "reference patch, as 'proctor task check' does (cached "
                                   "with the baseline)."),
    jobs: int = typer.Option(0, min=0, help="Tasks checked at once (0: the cores)."),
    sandbox: str | None = typer.Option(None, help="Sandbox backend: docker or local."),
    image: str | None = typer.Option(None, help="Sandbox image tag."),
) -> None:
    """Import SWE-bench-style rows as tasks, check each, and report the agreement.

    Exit status: 0 every row imported (and checked), 1 some row failed (each is an error
    line naming the instance and the cause; the others are imported), 2 bad usage or an
    unreadable rows file.
    """
    from proctor.datasets.import_run import import_dataset
    from proctor.sandbox.cleanup import install_signal_handlers

    install_signal_handlers()  # SIGTERM, like SIGINT, removes the run's partial work
    options = _options(public, install, baseline_runs)
    if not repos.is_dir():
        err.print(f"[red]error[/red]: --repos {escape(str(repos))} is not a directory")
        raise typer.Exit(2)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        imported = bar.add_task("import", total=None)
        checked = bar.add_task("check", total=None, visible=check)

        def tick(outcome, step: str) -> None:
            if outcome.status == "error":
                bar.console.print(f"[red]error[/red] {escape(outcome.instance)}: "
                                  f"{escape(outcome.cause or '')}", highlight=False)
            bar.advance(imported if step == "import" else checked)
        try:
            outcomes = import_dataset(instances, repos, output, options=options, check=check,
                                      calibrate=calibrate, jobs=jobs, backend=sandbox,
                                      image=image, progress=tick)
        except (OSError, ValueError) as exc:
            err.print(f"[red]error[/red]: {escape(str(exc))}")
            raise typer.Exit(2) from None
    if not outcomes:
        err.print(f"[red]error[/red]: no rows in {escape(str(instances))}")
        raise typer.Exit(2)
    _summary(outcomes, output, check)
    if any(o.status == "error" for o in outcomes):
        raise typer.Exit(1)


def _options(public: str, install: str, baseline_runs: int | None):
    """The import options, or exit 2 naming the bad one."""
    from proctor.datasets import ImportOptions

    try:
        return ImportOptions(public=public, install=install, baseline_runs=baseline_runs)
    except ValueError as exc:
        err.print(f"[red]error[/red]: --{escape(str(exc))}")
        raise typer.Exit(2) from None


def _summary(outcomes: list, output: Path, check: bool) -> None:
    from proctor.datasets.import_run import REPORT_FILE

    table = Table(title=f"{len(outcomes)} rows -> {output}")
    for col in ("instance", "status", "agreement", "FAIL_TO_PASS row/proctor/equal",
                "flaky", "differential runs"):
        table.add_column(col)
    for o in outcomes:
        a = o.agreement
        if a is None:
            table.add_row(o.instance, o.status, "-" if check else "not checked", "", "", "")
            continue
        f = a.fail_to_pass
        variants = o.variants
        table.add_row(o.instance, o.status, a.verdict,
                      f"{len(f.equal) + len(f.row_only)}/{len(f.equal) + len(f.proctor_only)}"
                      f"/{len(f.equal)}", str(len(a.flaky)),
                      "not calibrated" if variants is None else "; ".join(
                          f"{suite}: {_variants(v)}" for suite, v in variants.items()))
    out.print(table)
    out.print(f"report: {escape(str(output / REPORT_FILE))}", highlight=False)


def _variants(used: list[str]) -> str:
    """The variants a suite's differential runs use, shortly: ``all``, ``none`` or a list."""
    from proctor.suites import VARIANTS

    return "all" if set(used) == set(VARIANTS) else ", ".join(used) or "none"


def mine_command(
    repo: Path = typer.Option(..., "--repo", help="The repository: a checkout, a bare "
                              "repository or a .bundle file."),
    output: Path = typer.Option(..., "-o", "--output", help="Where the kept tasks, rows.jsonl "
                                "and the reports go."),
    name: str | None = typer.Option(None, help="owner/name for the rows' repo and instance "
                                    "ids (default: from the origin URL, else local/DIRNAME)."),
    commits: str = typer.Option("HEAD", "--commits", help="git rev-list range to mine, e.g. "
                                "v1.0..main."),
    limit: int = typer.Option(0, min=0, help="Only the newest N candidates (0: all)."),
    baseline_runs: int | None = typer.Option(None, "--baseline-runs", help="The tasks' "
                                             "\\[baseline] runs (default 3): a test must "
                                             "fail in all before and pass in all after."),
    jobs: int = typer.Option(0, min=0, help="Tasks checked at once (0: the cores)."),
    sandbox: str | None = typer.Option(None, help="Sandbox backend: docker or local."),
    image: str | None = typer.Option(None, help="Sandbox image tag."),
) -> None:
    """Mine real fix commits into tasks and SWE-bench rows, keeping only those where a test
    fails before the fix and passes after it in every run, and no test flips on reruns.

    Exit status: 0 at least one task kept, 1 none kept, 2 bad usage (the repository or
    the range cannot be read).
    """
    from proctor.datasets.git_repos import RepoNotFound, repo_name
    from proctor.datasets.mine_run import ROWS_FILE, mine_repository
    from proctor.sandbox.cleanup import install_signal_handlers

    install_signal_handlers()  # SIGTERM, like SIGINT, removes the run's partial work
    options = _options("others", "auto", baseline_runs)
    name = name or repo_name(repo)
    if name.count("/") != 1:
        err.print(f"[red]error[/red]: --name must be owner/name, got {escape(name)}")
        raise typer.Exit(2)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        steps = {"import": bar.add_task("import", total=None),
                 "check": bar.add_task("check", total=None)}
        try:
            mined = mine_repository(repo, name, output, revisions=commits, limit=limit,
                                    jobs=jobs, options=options, backend=sandbox, image=image,
                                    progress=lambda o, step: bar.advance(steps[step]))
        except (RepoNotFound, ValueError) as exc:
            err.print(f"[red]error[/red]: {escape(str(exc))}")
            raise typer.Exit(2) from None
    table = Table(title=f"{name}: {len(mined)} candidate commits -> {output}")
    for col in ("instance", "kept", "why not"):
        table.add_column(col)
    for m in mined:
        table.add_row(m.instance, "yes" if m.kept else "no", m.why or "")
    out.print(table)
    kept = sum(m.kept for m in mined)
    out.print(f"{kept} kept; rows: {escape(str(output / ROWS_FILE))}", highlight=False)
    if not kept:
        raise typer.Exit(1)


export_app = typer.Typer(no_args_is_help=True, help="Write reward records in other tools' "
                                                   "report shapes.")


@export_app.command("swebench")
def export_swebench(
    rewards: Path = typer.Argument(..., help="Reward records JSONL (proctor batch's output)."),
    output: Path = typer.Option(..., "-o", "--output", help="SWE-bench report JSON to write."),
    model: str | None = typer.Option(None, help="Only the records of this "
                                     "model_name_or_path (a batch of several models)."),
    dataset: Path | None = typer.Option(None, help="The rows (JSONL or .json): their "
                                        "instances without a record count as incomplete."),
) -> None:
    """SWE-bench's run report (schema_version 2) with each instance's report (resolved,
    tests_status) under "instances".

    Exit status: 0 written, 2 unreadable input, no record, or two records of one instance.
    """
    import json

    from proctor.datasets.swebench_report import DuplicateInstances, export
    from proctor.datasets.swebench_rows import read_rows
    from proctor.record import RewardRecord

    records, skipped = [], 0
    try:
        lines = rewards.read_bytes().splitlines()
        ids = None if dataset is None else [r.row.instance_id for r in read_rows(dataset)
                                            if r.row is not None]
    except (OSError, ValueError) as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}")
        raise typer.Exit(2) from None
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = RewardRecord.model_validate_json(line)
        except ValueError:
            skipped += 1
            continue
        if model is None or (rec.metadata or {}).get("model_name_or_path") == model:
            records.append(rec)
    if skipped:
        err.print(f"skipped {skipped} lines that are not reward records", highlight=False)
    if not records:
        err.print(f"[red]error[/red]: no reward record in {escape(str(rewards))}"
                  + (f" for model {escape(model)}" if model else ""))
        raise typer.Exit(2)
    try:
        report = export(records, ids)
    except DuplicateInstances as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2), encoding="utf-8")
    except OSError as exc:
        err.print(f"[red]error[/red]: cannot write {escape(str(output))}: "
                  f"{escape(exc.strerror or str(exc))}")
        raise typer.Exit(2) from None
    out.print(f"{report['resolved_instances']} of {report['total_instances']} instances "
              f"resolved ({report['error_instances']} errors, "
              f"{report['empty_patch_instances']} empty patches) -> {escape(str(output))}",
              highlight=False)


def gate_command(  # noqa: PLR0913
    base: str = typer.Option(..., "--base", help="What the change goes into (origin/main, a "
                             "commit): the change is git diff BASE...HEAD."),
    repo: Path = typer.Option(Path("."), "--repo", help="The repository (a checkout)."),
    head: str = typer.Option("HEAD", "--head", help="The change's last commit (committed "
                             "work only)."),
    message_file: Path | None = typer.Option(None, "--message-file", help="The PR title and "
                                             "body, checked against what was measured."),
    transcript: Path | None = typer.Option(None, "--transcript", help="An agent's "
                                           "transcript, as JSON (see proctor score)."),
    judge: str | None = typer.Option(None, "--judge", help="A judge command that may only "
                                     "veto (see proctor score)."),
    judge_entry: str | None = typer.Option(None, "--judge-entry", help="The judge as a "
                                           "Python entry point module:function."),
    judge_timeout: float = typer.Option(60.0, "--judge-timeout", help="Judge seconds."),
    fail_on: str = typer.Option("fail", "--fail-on", help="'fail': exit 1 on FAIL; 'warn': "
                                "also on WARN (an untested change is WARN)."),
    baseline_runs: int | None = typer.Option(None, "--baseline-runs", min=1, help="Runs of "
                                             "each suite before and after (default 3)."),
    keep_task: Path | None = typer.Option(None, "--keep-task", help="Write the task here "
                                          "and keep it (default: a temporary directory)."),
    sandbox: str | None = typer.Option(None, help="Sandbox backend: docker or local."),
    image: str | None = typer.Option(None, help="Sandbox image tag."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict and the record "
                                 "as JSON."),
) -> None:
    """Judge your own change before the PR: PASS / WARN / FAIL with the blockers and the
    rule that decided (a pre-push hook: exit 0 PASS or WARN, 1 FAIL, 2 bad input, 3 the
    harness failed)."""
    import json

    from proctor.datasets.own_repo import GateInputError, gate_change
    from proctor.harness.judge import Judge

    if fail_on not in ("fail", "warn"):
        err.print(f"[red]error[/red]: --fail-on must be fail or warn, not {escape(fail_on)}")
        raise typer.Exit(2)
    said: dict = {}
    try:
        for key, path in (("message", message_file), ("transcript", transcript)):
            if path is not None:
                said[key] = read_input(path, "--message-file" if key == "message"
                                       else "--transcript")
    except InputFileError as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:
        judged = Judge.from_options(judge, judge_entry, judge_timeout)
    except ValueError as exc:
        err.print(f"[red]error[/red]: --judge: {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:
        result = gate_change(repo, base, head, judge=judged, sandbox=sandbox, image=image,
                             baseline_runs=baseline_runs, keep=keep_task, **said)
    except GateInputError as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({"gate": result.gate, "score": result.score, "rule": result.rule,
                          "blockers": result.blockers, "base": result.base,
                          "head": result.head, "record": json.loads(result.record.to_json())
                          if result.record else None}))
    else:
        colour = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}[result.gate]
        scored = f" {result.score:g}" if result.score is not None else ""
        out.print(f"[bold {colour}]{result.gate}[/]{scored}  {escape(result.rule)}")
        out.print(f"change {result.base[:12]}...{result.head[:12]}: "
                  f"{len(result.patch_files)} files, {len(result.test_files)} test files",
                  highlight=False)
        for blocker in result.blockers:
            out.print(f"  blocker: {escape(blocker)}", highlight=False)
    failed = result.record.error if result.record is not None else None
    if failed is not None and failed.kind != "task_config":  # the harness failed, not you
        raise typer.Exit(3)
    if result.gate == "FAIL" or (result.gate == "WARN" and fail_on == "warn"):
        raise typer.Exit(1)
