"""Import a whole dataset: every row to a task, each task checked, one report.

:func:`import_dataset` reads the rows (:func:`~proctor.datasets.swebench_rows.read_rows`),
imports each (:func:`~proctor.datasets.swebench_import.import_row`; a task already there
from the same row is kept, so a second run resumes), then, with ``check``, checks each task
as ``proctor task check`` does, in parallel (``jobs`` at once; the sandbox cap bounds the
sandboxes): its baseline, set against the row (:mod:`proctor.datasets.agreement`) and
written to the task's ``agreement.json``, and, with ``calibrate``, the differential runs'
calibration on the reference patch (cached with the baseline, so scoring does not pay
for it; the variants each suite uses are in the report). A row that fails at any step is
an :class:`Outcome` with its cause; the other rows go on. ``TASKS_DIR/import-report.jsonl``
gets one line per row, in file order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from proctor.datasets.agreement import Agreement, compare, without_baseline
from proctor.datasets.git_repos import RepoCache, RepoNotFound
from proctor.datasets.swebench_import import ImportOptions, import_row
from proctor.datasets.swebench_rows import RowError, SWEBenchRow, read_rows
from proctor.errors import InfraError, TaskConfigError
from proctor.suites import Baseline

REPORT_FILE = "import-report.jsonl"
#: Names in the tasks directory that are never an instance's.
RESERVED = frozenset({REPORT_FILE, "rows.jsonl", "candidates.jsonl", "mine-report.jsonl"})
AGREEMENT_FILE = "agreement.json"


@dataclass
class Outcome:
    """One row: ``instance`` (its id, or ``line N``), ``status`` (``imported``, ``kept`` or
    ``error``), ``cause`` (an error's), ``task`` (its directory) and ``agreement``."""

    instance: str
    status: str
    cause: str | None = None
    task: Path | None = None
    agreement: Agreement | None = None
    row: SWEBenchRow | None = None
    baseline: Baseline | None = None

    @property
    def variants(self) -> dict[str, list[str]] | None:
        """Suite -> the variants its differential runs use, once calibrated (None: not)."""
        if self.baseline is None or self.baseline.variant_changes is None:
            return None
        return {suite: list(self.baseline.usable_variants(suite))
                for suite in self.baseline.variant_changes}

    def as_json(self) -> dict:
        """One line of the import report."""
        return {"instance_id": self.instance, "status": self.status, "cause": self.cause,
                "task": str(self.task) if self.task else None,
                "agreement": self.agreement.as_json() if self.agreement else None,
                "variants": self.variants}


#: Called after each step of each row: (outcome, step: "import" or "check").
Progress = Callable[[Outcome, str], None]


def import_dataset(rows_path: Path, repos: Path | None, tasks_dir: Path, *,  # noqa: PLR0913
                   options: ImportOptions = ImportOptions(), check: bool = True,
                   calibrate: bool = True, jobs: int = 0,
                   backend: str | None = None, image: str | None = None,
                   progress: Progress | None = None, pinned: dict[str, Path] | None = None
                   ) -> list[Outcome]:
    """Import every row of ``rows_path`` into ``tasks_dir`` (module docstring) as
    ``options`` say (:class:`~proctor.datasets.swebench_import.ImportOptions`); ``jobs``:
    tasks checked at once (0: the machine's cores); ``repos`` / ``pinned``: where the
    repositories are (:class:`~proctor.datasets.git_repos.RepoCache`).

    Raises:
        OSError, ValueError: the rows file cannot be read at all.
    """
    tick = progress or (lambda outcome, step: None)
    outcomes: list[Outcome] = []
    first_line: dict[str, int] = {}
    with RepoCache(repos, pinned) as cache:
        for read in read_rows(rows_path):
            if read.error is not None:
                outcome = Outcome(read.error.instance, "error", read.error.cause)
            elif read.row.instance_id in RESERVED:
                outcome = Outcome(read.row.instance_id, "error",
                                  "the instance_id is the name of a file the import writes")
            elif read.row.instance_id in first_line:
                outcome = Outcome(read.row.instance_id, "error",
                                  f"duplicate instance_id (line {read.line}; first at line "
                                  f"{first_line[read.row.instance_id]}): the first is kept")
            else:
                first_line[read.row.instance_id] = read.line
                outcome = _import_one(read.row, cache, tasks_dir, options)
            outcomes.append(outcome)
            tick(outcome, "import")
    if check:
        todo = [o for o in outcomes if o.status != "error"]
        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
            for outcome in pool.map(lambda o: _check_one(o, backend, image, calibrate),
                                    todo):
                tick(outcome, "check")
    tasks_dir.mkdir(parents=True, exist_ok=True)
    with (tasks_dir / REPORT_FILE).open("w", encoding="utf-8") as f:
        for outcome in outcomes:
            f.write(json.dumps(outcome.as_json(), sort_keys=True) + "\n")
    return outcomes


def one_line(text: str, limit: int = 400) -> str:
    """A multi-line message as one line for an error line: its lines joined with `` | ``,
    pip's ``WARNING:`` lines left out, cut at ``limit`` characters."""
    lines = [x.strip() for x in text.splitlines() if x.strip()
             and not x.strip().startswith("WARNING:")]
    joined = " | ".join(lines) or text.strip()
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


def _import_one(row: SWEBenchRow, cache: RepoCache, tasks_dir: Path,
                options: ImportOptions) -> Outcome:
    try:
        repo = cache.get(row.repo)
        done = import_row(row, repo, tasks_dir, options)
    except (RowError, RepoNotFound) as exc:
        return Outcome(row.instance_id, "error", getattr(exc, "cause", str(exc)), row=row)
    except Exception as exc:  # noqa: BLE001 - one row's fault never stops the others
        return Outcome(row.instance_id, "error",
                       one_line(f"{type(exc).__name__}: {exc}"), row=row)
    return Outcome(row.instance_id, done.status, task=done.task, row=row)


def _check_one(outcome: Outcome, backend: str | None, image: str | None,
               calibrate: bool) -> Outcome:
    """The baseline of the outcome's task set against its row, and with ``calibrate`` the
    differential runs' calibration (``outcome`` updated)."""
    from proctor.harness.pipeline import calibrate_task, slots, task_baseline
    from proctor.sandbox import check_required, choose_backend, resolve_env
    from proctor.task import load_task

    assert outcome.task is not None and outcome.row is not None
    try:
        task = load_task(outcome.task)
        chosen = choose_backend(backend)
        check_required(chosen, task.config.limits.required, task.config.hidden_at_upstream_path)
        tag, image_id = resolve_env(chosen, image, task.requirements)
        limits = task.config.limits.to_limits()
        # a slot held while its sandboxes live, as a batch's task preparation holds one:
        # ``jobs`` checks at once stay within the sandbox cap, and the baseline's second
        # sandbox runs beside the first only when a slot is left over
        with slots.acquire():
            baseline = task_baseline(task, tag, image_id, limits, chosen)
            outcome.baseline = baseline
            outcome.agreement = compare(outcome.row, baseline)
            if outcome.agreement.missing:
                shown = ", ".join(outcome.agreement.missing[:3])
                more = len(outcome.agreement.missing) - 3
                outcome.status = "error"
                outcome.cause = (f"FAIL_TO_PASS names tests that do not exist here: {shown}"
                                 + (f" and {more} more" if more > 0 else ""))
            elif calibrate and baseline.has_reference:
                outcome.baseline = calibrate_task(task, baseline, tag, limits, chosen)
    except TaskConfigError as exc:
        if "no FAIL_TO_PASS test" not in str(exc):
            outcome.status, outcome.cause = "error", f"task check: {one_line(str(exc))}"
            return outcome
        outcome.agreement = without_baseline(outcome.row, str(exc))
    except InfraError as exc:
        outcome.status, outcome.cause = "error", f"infrastructure: {one_line(str(exc))}"
        return outcome
    (outcome.task / AGREEMENT_FILE).write_text(
        json.dumps(outcome.agreement.as_json(), indent=1, sort_keys=True), encoding="utf-8")
    return outcome
