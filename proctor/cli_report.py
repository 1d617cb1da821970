"""``proctor report``: reward records JSONL in, one self-contained HTML file out.

Exit codes: 0 written (lines that were not records are counted in the report and on
stderr), 2 bad input (no file, no readable record, the ``report`` extra missing, ``-o``
not writable).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

EXIT_INPUT = 2


def report_command(
    records: Path = typer.Argument(..., help="Reward records JSONL (proctor batch -o)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o",
                                help="The HTML file to write."),
    compare: Path | None = typer.Option(None, "--compare", help="Another run's records "
                                        "(e.g. another checkpoint on the same tasks), "
                                        "shown side by side."),
    rollouts: Path | None = typer.Option(None, "--rollouts", help="The batch's input "
                                         "rollouts JSONL, for the patches the drill-down "
                                         "shows."),
    title: str | None = typer.Option(None, help="The page's title."),
) -> None:
    """Write an HTML report of a batch's rewards: plots, GRPO groups, slowest rollouts, a
    table of rollouts with drill-downs; it opens offline."""
    err = Console(stderr=True, soft_wrap=True)
    from proctor.report import ReportDependencyError, ReportInputError, build_report, printable

    try:
        done = build_report(records, output, compare=compare, rollouts=rollouts, title=title)
    except (ReportInputError, ReportDependencyError) as exc:
        err.print(f"[red]error[/red]: {escape(printable(str(exc)))}", soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    except OSError as exc:
        err.print(f"[red]error[/red]: {escape(printable(str(exc.filename or '')))}: "
                  f"{escape(exc.strerror or str(exc))}", soft_wrap=True)
        raise typer.Exit(EXIT_INPUT) from None
    for line in done.messages():
        err.print(escape(line), soft_wrap=True)
