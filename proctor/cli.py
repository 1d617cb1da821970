"""``proctor`` command line: thin typer commands over the library.

Exit codes: 0 a reward was computed (whatever its value), 1 ``score --fail-under N`` and
the gate score is below N, or a ``sandbox check`` failed, 2 bad usage or task
configuration, 3 infrastructure error.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from proctor.cli_batch import batch_command
from proctor.cli_daemon import daemon_app
from proctor.cli_datasets import export_app, gate_command, import_app, mine_command
from proctor.cli_report import report_command
from proctor.cli_serve import serve_command
from proctor.errors import InfraError, ProctorError, TaskConfigError
from proctor.input_files import InputFileError, is_open, read_input

if TYPE_CHECKING:  # imported where used: not every command needs pydantic's models
    from proctor.record import RewardRecord

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode="markdown",
                  help="Decomposed, tamper-resistant rewards for coding-agent patches.")
task_app = typer.Typer(no_args_is_help=True, help="Inspect and validate tasks.")
image_app = typer.Typer(no_args_is_help=True,
                        help="Build the sandbox image (offline); list and prune task envs.")
sandbox_app = typer.Typer(no_args_is_help=True,
                          help="Check that a sandbox backend keeps every sandbox promise.")
app.add_typer(task_app, name="task")
task_app.add_typer(import_app, name="import")
task_app.command("mine")(mine_command)
app.add_typer(image_app, name="image")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(export_app, name="export")
app.add_typer(daemon_app, name="daemon")
err = Console(stderr=True, soft_wrap=True)  # messages: whole lines, whatever the width

EXIT_BELOW, EXIT_CONFIG, EXIT_INFRA = 1, 2, 3


def _exit_for(exc: ProctorError) -> int:
    return EXIT_CONFIG if isinstance(exc, TaskConfigError) else EXIT_INFRA


def _unwritable(output: Path | None) -> str | None:
    """Why the record could not be delivered (None: it can): ``--output`` a directory or in
    no directory, or no ``--output`` and standard output closed."""
    if output is None:
        if sys.stdout is None or not is_open(1):
            return "standard output is closed and no --output is given: nowhere to write the record"
        return None
    if output.is_dir():
        return f"--output is a directory: {output}"
    if not output.parent.is_dir():
        return f"--output: no directory {output.parent} to write {output.name} in"
    return None


class _Out(Console):
    """Standard output's console: a reader gone (``| head -1``) is an :class:`OSError` the
    command reports (exit 3, as ``--json`` does), not rich's silent exit 1 (the status of a
    score below ``--fail-under``)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more is written at exit
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


out = _Out()


def _render(rec: RewardRecord) -> None:
    if rec.status == "error":
        err.print(f"[red]error[/red] ({rec.error.kind}): {rec.error.message}")
        return
    table = Table(title=f"{rec.task_id}  rollout {rec.rollout_id[:12]}", show_lines=False)
    table.add_column("component")
    table.add_column("value", justify="right")
    table.add_column("weight", justify="right")
    table.add_column("note")
    for name, value in rec.components.items():
        table.add_row(name, "null" if value is None else f"{value:.3f}",
                      f"{rec.weights.get(name, 0.0):.3f}", rec.component_notes.get(name, ""))
    for name, amount in rec.penalties.items():
        table.add_row(f"penalty {name}", f"-{amount:.3f}", "", "")
    table.add_row("diff cost", f"-{rec.diff_cost:.4f}", "", "")
    for suite, t in rec.tests.items():
        table.add_row(f"{suite} FAIL_TO_PASS", f"{t.f2p_passed}/{t.f2p_total}", "", "")
        table.add_row(f"{suite} PASS_TO_PASS broken", f"{t.p2p_failed}/{t.p2p_total}", "", "")
    out.print(table)
    if rec.integrity.violated:
        out.print(f"[red]integrity violation[/red]: {'; '.join(rec.integrity.reasons)}")
    if rec.reason:
        out.print(f"reason: {rec.reason} {rec.component_notes.get('reason', '')}")
    raised = [name for name, on in rec.flags.model_dump().items() if on]
    if raised:
        out.print(f"flags: {', '.join(raised)}")
    v = rec.verdict
    out.print(f"total reward [bold]{rec.reward:.4f}[/bold]   verdict [bold]{v.gate}[/bold] "
              f"({v.score:.1f}/100; {v.rule})")
    for blocker in v.blockers:
        out.print(f"  blocker: {blocker}")


def _judge(command: str | None, entry: str | None, timeout_s: float):
    """:func:`~proctor.cli_batch.judge_option`, exiting 2 on a bad judge."""
    if command is None and entry is None:
        return None
    from proctor.cli_batch import judge_option
    from proctor.harness.batch import BatchConfigError

    try:
        return judge_option(command, entry, timeout_s)
    except BatchConfigError as exc:
        err.print(str(exc))
        raise typer.Exit(EXIT_CONFIG) from None


def _score_completion(task: Path, data: bytes, image: str | None, rollout_id: str | None,  # noqa: PLR0913
                      sandbox: str | None, reasoning_parser: str, tool_call_parser: str,
                      said: dict):
    """The record of a completion (:func:`proctor.rl.score_completions`, no result cache):
    its text, or the JSON messages it holds. Exits 2 on an unknown parser name."""
    import json

    from proctor.harness.batch import BatchOptions
    from proctor.rl import Completion, score_completions
    from proctor.rl.completions import parser_options
    from proctor.sandbox import choose_backend

    try:
        parsers = parser_options(reasoning_parser, tool_call_parser)
    except ValueError as exc:
        err.print(str(exc))
        raise typer.Exit(EXIT_CONFIG) from exc
    text = data.decode("utf-8", "surrogateescape")
    value: object = text
    if text.lstrip().startswith(("[", "{")):
        try:
            value = json.loads(text)
        except ValueError:
            value = text
    try:
        backend = choose_backend(sandbox)
    except TaskConfigError as exc:
        err.print(str(exc))
        raise typer.Exit(EXIT_CONFIG) from exc
    options = BatchOptions(workers=1, cache=False, image=image, sandbox=backend)
    return score_completions([Completion(task=str(task), completion=value,
                                         rollout_id=rollout_id, **parsers, **said)],
                             options)[0]


@app.command()
def score(  # noqa: C901, PLR0913
    task: Path = typer.Argument(..., help="Task directory (task.toml, repo/, hidden/)."),
    patch: Path | None = typer.Argument(
        None, help="Unified diff file ('-' for stdin); or give --completion instead."),
    completion: Path | None = typer.Option(
        None, "--completion", help="A model's completion to find the patch in ('-' for "
        "stdin): text as the trainer decodes it, or JSON messages / Responses items."),
    reasoning_parser: str = typer.Option(
        "auto", help="With --completion: the reasoning syntax (vLLM's --reasoning-parser "
        "names: deepseek_r1, qwen3, openai_gptoss, ...; auto: all)."),
    tool_call_parser: str = typer.Option(
        "auto", help="With --completion: the tool-call syntax (vLLM's --tool-call-parser "
        "names: hermes, qwen3_coder, glm45, kimi_k2, mistral, ...; auto: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print the reward record as JSON."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the record here."),
    image: str | None = typer.Option(None, help="Sandbox image tag (default: the built one)."),
    rollout_id: str | None = typer.Option(None, help="Rollout id to record."),
    fail_under: float | None = typer.Option(
        None, help="Exit 1 when the gate score (0..100) is below this (pre-merge hook)."),
    sandbox: str | None = typer.Option(
        None, help="Sandbox backend: docker or local (bubblewrap). Default: docker when an "
        "engine answers, else local."),
    message_file: Path | None = typer.Option(
        None, "--message-file", help="The agent's final message (PR title and body, or its "
        "final answer), checked against the measurements: false claims, garbage, fidelity."),
    transcript: Path | None = typer.Option(
        None, "--transcript", help="What the agent did, as JSON (chat messages with tool "
        "calls, a SWE-agent trajectory, OpenHands events): the test commands it ran."),
    judge: str | None = typer.Option(
        None, "--judge", help="A judge command (split like a shell line, run without one) "
        "that may only veto: it reads {record, diff, message} as JSON on stdin and prints "
        '{"veto": bool, "reason": str}; run only when the gate is not FAIL.'),
    judge_entry: str | None = typer.Option(
        None, "--judge-entry", help="The judge as a Python entry point module:function "
        "(called with the same object, returning the same answer)."),
    judge_timeout: float = typer.Option(60.0, "--judge-timeout", help="Seconds the judge "
                                        "may take; past them it changes nothing."),
) -> None:
    """Score one patch: components, penalties, total and a PASS/WARN/FAIL verdict.

    Exit codes: 0 scored, 1 scored but below --fail-under, 2 bad usage or task
    configuration, 3 infrastructure error (or the record could not be written)."""
    from proctor.harness.pipeline.score import score as score_patch

    if (patch is None) == (completion is None):
        err.print("give a patch file or --completion FILE (one of them)")
        raise typer.Exit(EXIT_CONFIG)
    source = patch if patch is not None else completion
    unwritable = _unwritable(output)
    if unwritable:  # before the score, not after
        err.print(escape(unwritable))
        raise typer.Exit(EXIT_CONFIG)
    stdin_readers = [str(p) for p in (source, message_file, transcript) if str(p) == "-"]
    if len(stdin_readers) > 1:
        err.print("only one of the patch (or --completion), --message-file and --transcript "
                  "can be read from standard input ('-')")
        raise typer.Exit(EXIT_CONFIG)
    said = {}
    try:
        data = read_input(source, "patch file" if patch is not None else "completion file")
        for name, path in (("message", message_file), ("transcript", transcript)):
            if path is not None:  # bytes: a file that is not UTF-8 is the record's to say
                said[name] = read_input(path, "--message-file" if name == "message"
                                        else "--transcript")
    except InputFileError as exc:
        err.print(escape(str(exc)))
        raise typer.Exit(EXIT_CONFIG) from None
    judged = _judge(judge, judge_entry, judge_timeout)
    if completion is not None:
        if judged is not None:
            err.print("--judge works with a patch file, not --completion")
            raise typer.Exit(EXIT_CONFIG)
        rec = _score_completion(task, data, image, rollout_id, sandbox,
                                reasoning_parser, tool_call_parser, said)
    else:
        rec = score_patch(task, data, image=image, rollout_id=rollout_id, sandbox=sandbox,
                          judge=judged, **said)
    where = output
    try:  # a full disk, a full stdout: said, not a traceback
        if output:
            output.write_text(rec.to_json() + "\n")
        where = "standard output"
        if as_json:
            print(rec.to_json(), flush=True)
        else:
            _render(rec)
    except OSError as exc:
        err.print(escape(f"cannot write the record to {where}: {exc.strerror or exc}"))
        raise typer.Exit(EXIT_INFRA) from None
    if rec.status == "error":
        raise typer.Exit(EXIT_CONFIG if rec.error.kind == TaskConfigError.kind else EXIT_INFRA)
    if fail_under is not None and rec.verdict.score < fail_under:
        err.print(f"gate score {rec.verdict.score:g} is below --fail-under {fail_under:g}")
        raise typer.Exit(EXIT_BELOW)


@app.command()
def cleanup(
    dead_only: bool = typer.Option(False, "--dead-only",
                                   help="Only sandboxes whose owner process is gone."),
) -> None:
    """Remove sandboxes a crashed run left: expired ones and those whose owner is gone.
    Sandboxes of live Proctor processes are never touched."""
    from proctor.sandbox import remove_stale

    report = remove_stale(expired=not dead_only)
    print(f"removed {len(report.containers)} container(s), {len(report.dirs)} local dir(s)")


app.command("batch")(batch_command)
app.command("gate")(gate_command)
app.command("serve")(serve_command)
app.command("report")(report_command)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the reward record."""
    from proctor.record import RewardRecord

    print(json.dumps(RewardRecord.model_json_schema(by_alias=True), indent=2))


@task_app.command("check")
def task_check(
    task: Path = typer.Argument(..., help="Task directory."),
    image: str | None = typer.Option(None, help="Sandbox image tag."),
    refresh: bool = typer.Option(False, help="Recompute the baseline even if cached."),
    sandbox: str | None = typer.Option(None, help="Sandbox backend: docker or local."),
) -> None:
    """Compute (or load) the baseline and print the FAIL_TO_PASS / PASS_TO_PASS classification."""
    from proctor.harness.pipeline import calibrate_task, slots, task_baseline
    from proctor.sandbox import check_required, choose_backend, resolve_env
    from proctor.task import load_task

    try:
        loaded = load_task(task)
        backend = choose_backend(sandbox)
        check_required(backend, loaded.config.limits.required,
                       loaded.config.hidden_at_upstream_path)
        tag, image_id = resolve_env(backend, image, loaded.requirements)
        limits = loaded.config.limits.to_limits()
        with slots.acquire():  # its sandboxes count against the cap, as a score's do
            b = task_baseline(loaded, tag, image_id, limits, backend, refresh)
            b = calibrate_task(loaded, b, tag, limits, backend)
    except ProctorError as exc:
        err.print(f"[red]task invalid[/red]: {exc}" if isinstance(exc, TaskConfigError)
                  else f"[red]error[/red]: {exc}")
        raise typer.Exit(_exit_for(exc)) from None
    table = Table(title=f"{loaded.id}: baseline {b.key[:12]} ({b.runs} runs"
                        f"{', with reference' if b.has_reference else ''})")
    for col in ("suite", "class", "test id / reason"):
        table.add_column(col)
    for suite, s in b.suites.items():
        for t in s.fail_to_pass:
            table.add_row(suite, "FAIL_TO_PASS", t)
        for t, why in s.quarantined.items():
            table.add_row(suite, "quarantined", f"{t} ({why})")
        table.add_row(suite, "PASS_TO_PASS", f"{len(s.pass_to_pass)} tests")
    out.print(table)
    _print_calibration(b)
    out.print("[green]task valid[/green]")


def _print_calibration(b) -> None:
    """Which variants the task's differential runs use per suite, and why others are not."""
    if b.variant_changes is None:
        out.print("differential runs: not calibrated (no reference patch); a suspicion "
                  "of the code scan keeps its bare cost", highlight=False)
        return
    for suite, per_variant in b.variant_changes.items():
        used = ", ".join(b.usable_variants(suite)) or "none"
        out.print(f"differential runs ({suite}): {used}", highlight=False)
        for variant, changed in sorted(per_variant.items()):
            if changed:
                shown = ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
                out.print(f"  not used: {variant} (changes the reference's verdict of "
                          f"{shown})", highlight=False)


@image_app.command("build")
def image_build(
    base: str | None = typer.Option(None, help="Base image with python3 and git to pull "
                                    "(default: a Debian base made with debootstrap)."),
) -> None:
    """Build the sandbox image offline; prints its content-addressed tag."""
    from proctor.sandbox import DEFAULT_BASE, build_image

    try:
        print(build_image(base or DEFAULT_BASE))
    except InfraError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_INFRA) from None


@image_app.command("list")
def image_list() -> None:
    """List Proctor's sandbox images and task environments, newest first."""
    from proctor.sandbox import docker_client, list_images

    try:
        images = list_images(docker_client())
    except InfraError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_INFRA) from None
    table = Table(title="Proctor images")
    for col in ("tag", "role", "created", "size", "requirements"):
        table.add_column(col)
    for i in images:
        table.add_row(i.tag, i.role, i.created[:19], f"{i.size / 1024**2:.0f} MiB",
                      i.requirements)
    out.print(table)


@image_app.command("prune")
def image_prune(
    keep: int = typer.Option(5, min=0, help="Task environments to keep (the newest)."),
) -> None:
    """Remove task-environment images but the newest KEEP; sandbox images are kept."""
    from proctor.sandbox import docker_client, prune_images

    try:
        removed, busy = prune_images(docker_client(), keep)
    except InfraError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_INFRA) from None
    for tag in removed:
        print(f"removed {tag}")
    for tag in busy:
        print(f"kept {tag} (in use)")


@sandbox_app.command("check")
def sandbox_check(
    backend: str | None = typer.Option(
        None, help="Backend to check (default: the one `score` would use)."),
    only: list[str] | None = typer.Option(
        None, "--only", help="Run only this check (repeatable; names: --list)."),
    env: str | None = typer.Option(
        None, help="What the backend is built from: Docker image tag, local venv dir "
        "(default: the built sandbox image, the tools venv)."),
    list_checks: bool = typer.Option(False, "--list", help="List the checks and exit."),
) -> None:
    """Run the conformance checks on a sandbox backend, each in fresh sandboxes, and print
    a table. Exit 0 when none failed (a skip is a limit the backend cannot enforce here),
    1 when one failed, 2 bad usage, 3 the backend's environment is not available."""
    from proctor.sandbox import CHECKS, choose_backend, run_conformance

    if list_checks:
        for check in CHECKS.values():
            print(f"{check.name}: {check.title}")
        return
    try:
        name = choose_backend(backend)
        results = run_conformance(name, env, only=only or None, on_result=lambda r: err.print(
            f"{r.name}: {r.status} ({r.seconds:.1f} s)", highlight=False))
    except (ValueError, ProctorError) as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_CONFIG if isinstance(exc, ValueError) else _exit_for(exc)) \
            from None
    colour = {"passed": "green", "failed": "red", "skipped": "yellow"}
    table = Table(title=f"sandbox conformance: {name}")
    for col in ("check", "result", "seconds", "message"):
        table.add_column(col)
    for r in results:
        table.add_row(r.name, f"[{colour[r.status]}]{r.status}[/]", f"{r.seconds:.1f}",
                      escape(r.message))
    out.print(table)
    counts = {status: sum(r.status == status for r in results) for status in colour}
    out.print(", ".join(f"{n} {status}" for status, n in counts.items()))
    if counts["failed"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
