"""``proctor task mine``: a repository's real fix commits become checked tasks and rows.

Every candidate commit (:func:`~proctor.datasets.mine.candidate_commits`) becomes a row
(:func:`~proctor.datasets.mine.row_from_commit`), is imported and checked
(:func:`~proctor.datasets.import_run.import_dataset`), and is **kept** only when at least
one hidden test fails on the parent and passes with the fix in every run, and no hidden
test changed outcome between runs of the same code. A kept row's FAIL_TO_PASS /
PASS_TO_PASS are the measured ones. ``OUT/`` gets the kept tasks (one directory each, the
rejected ones removed), ``rows.jsonl`` (the kept rows, SWE-bench's shape),
``candidates.jsonl`` (every candidate as mined) and ``mine-report.jsonl`` (per candidate:
kept or rejected, and why).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from proctor.datasets.agreement import compare
from proctor.datasets.git_repos import RepoCache
from proctor.datasets.import_run import AGREEMENT_FILE, Outcome, Progress, import_dataset
from proctor.datasets.mine import candidate_commits, row_from_commit
from proctor.datasets.swebench_import import ROW_FILE, ImportOptions
from proctor.datasets.swebench_rows import SWEBenchRow

ROWS_FILE = "rows.jsonl"
CANDIDATES_FILE = "candidates.jsonl"
MINE_REPORT_FILE = "mine-report.jsonl"


@dataclass
class Mined:
    """One candidate: ``instance``, ``commit`` (the fix), ``kept`` and ``why`` (rejected:
    the reason), ``row`` (kept: with the measured lists)."""

    instance: str
    commit: str
    kept: bool
    why: str | None = None
    row: SWEBenchRow | None = None

    def as_json(self) -> dict:
        """One line of the mine report."""
        return {"instance_id": self.instance, "commit": self.commit, "kept": self.kept,
                "why": self.why}


def mine_repository(repo_path: Path, name: str, out: Path, *,  # noqa: PLR0913
                    revisions: str = "HEAD", limit: int = 0, jobs: int = 0,
                    options: ImportOptions = ImportOptions(),
                    backend: str | None = None, image: str | None = None,
                    progress: Progress | None = None) -> list[Mined]:
    """Mine ``repo_path`` (a checkout, bare repository or bundle) named ``name``
    (``owner/name``) into ``out`` (module docstring); ``limit``: the newest N candidates
    only (0: all); ``options``: how the candidates become tasks.

    Raises:
        RepoNotFound: ``repo_path`` is not a repository or a bundle.
        ValueError: git cannot read ``revisions``.
    """
    mined: list[Mined] = []
    rows: list[SWEBenchRow] = []
    with RepoCache(pinned={name: repo_path}) as cache:
        repo = cache.get(name)
        for commit in candidate_commits(repo, revisions)[:limit or None]:
            try:
                rows.append(row_from_commit(repo, name, commit))
            except ValueError as exc:
                mined.append(Mined(f"{name.replace('/', '__')}-{commit[:12]}", commit, False,
                                   str(exc)))
    out.mkdir(parents=True, exist_ok=True)
    (out / CANDIDATES_FILE).write_text("".join(r.model_dump_json() + "\n" for r in rows),
                                       encoding="utf-8")
    outcomes = import_dataset(out / CANDIDATES_FILE, None, out, options=options, check=True,
                              jobs=jobs,
                              backend=backend, image=image, progress=progress,
                              pinned={name: repo_path})
    for outcome in outcomes:
        mined.append(_judge(outcome))
    (out / ROWS_FILE).write_text("".join(m.row.model_dump_json() + "\n"
                                         for m in mined if m.row is not None),
                                 encoding="utf-8")
    (out / MINE_REPORT_FILE).write_text("".join(json.dumps(m.as_json(), sort_keys=True) + "\n"
                                                for m in mined), encoding="utf-8")
    return mined


def _judge(outcome: Outcome) -> Mined:
    """Keep the candidate (its row and task given the measured lists) or reject it."""
    row = outcome.row
    commit = row.extra.get("fix_commit", "") if row else ""
    why = _rejected(outcome)
    if why is not None:
        if outcome.task is not None:
            shutil.rmtree(outcome.task, ignore_errors=True)
        return Mined(outcome.instance, commit, False, why)
    measured = outcome.baseline.suites["hidden"]
    kept = row.model_copy(update={"FAIL_TO_PASS": list(measured.fail_to_pass),
                                  "PASS_TO_PASS": list(measured.pass_to_pass)})
    (outcome.task / ROW_FILE).write_text(json.dumps(kept.model_dump(mode="json"), indent=1,
                                                    sort_keys=True), encoding="utf-8")
    (outcome.task / AGREEMENT_FILE).write_text(
        json.dumps(compare(kept, outcome.baseline).as_json(), indent=1, sort_keys=True),
        encoding="utf-8")
    return Mined(outcome.instance, commit, True, row=kept)


def _rejected(outcome: Outcome) -> str | None:
    if outcome.status == "error":
        return outcome.cause
    if outcome.baseline is None or not outcome.baseline.suites["hidden"].fail_to_pass:
        return "no hidden test fails before the fix and passes after it"
    hidden = outcome.baseline.suites["hidden"]
    flaky = sorted(i for i, why in hidden.quarantined.items() if "flaky" in why)
    if flaky:
        return f"tests change outcome between runs of the same code: {', '.join(flaky[:3])}"
    return None
