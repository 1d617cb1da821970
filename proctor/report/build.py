"""``proctor report``'s work: read the records (and the rollouts' patches, and another run to
compare with), compute the figures, write the HTML file."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from proctor.harness.batch import BatchItem, read_rollouts
from proctor.report.figures import compare_data, report_data
from proctor.report.page import write
from proctor.report.records_file import RecordsFile, read_records


class ReportInputError(ValueError):
    """The report cannot be made from what it was given: the message says why."""


class EmptyRecordsError(ReportInputError):
    """The records file holds no record the report could read (it is empty, or every line
    was skipped: the message says why)."""


def printable(text: str) -> str:
    """``text`` with what cannot be written as UTF-8 (a file name's undecodable bytes,
    carried as lone surrogates) backslash-escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class ReportResult:
    """What was written: the file, its size in bytes, the records shown, the lines skipped
    (with reasons, :class:`RecordsFile`) and the patches found for the records."""

    path: Path
    size: int
    records: int
    skipped: RecordsFile
    patches: int
    #: Records whose patch the report shows; None when no patches were given.
    with_patch: int | None = None

    def messages(self) -> list[str]:
        """What was written and each reason lines were skipped, one line of text each."""
        out = [f"report: {self.records} records -> {printable(str(self.path))} "
               f"({self.size / 1e6:.1f} MB)"]
        if self.with_patch is not None:
            out.append(f"patches: shown for {self.with_patch} of {self.records} records (a "
                       "rollout's patch is shown when its SHA-256 is the one scored)")
        rf = self.skipped
        for reason, n in rf.skipped.most_common():
            lines = ", ".join(map(str, rf.examples[reason]))
            more = ", ..." if n > len(rf.examples[reason]) else ""
            out.append(f"skipped {n} line{'s' if n > 1 else ''}: {reason} "
                       f"(line {lines}{more})")
        return out


def patches_of(items: Iterable[BatchItem]) -> dict[str, str]:
    """Patch text by SHA-256 hex of its bytes (what a record's ``env.patch_sha256`` holds)
    for every valid rollout of ``items`` whose patch can be read and is UTF-8."""
    out: dict[str, str] = {}
    for item in items:
        if item.rollout is None:
            continue
        try:
            data = item.rollout.patch_bytes()
        except (OSError, ValueError):
            continue
        try:
            out[hashlib.sha256(data).hexdigest()] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out


def _describe(rf: RecordsFile) -> dict:
    return {"path": printable(str(rf.path)), "lines": rf.lines,
            "skipped": [{"reason": reason, "count": n, "lines": rf.examples[reason]}
                        for reason, n in rf.skipped.most_common()]}


def _readable(path: Path) -> RecordsFile:
    rf = read_records(path)
    if not rf.records:
        if not rf.lines:
            raise EmptyRecordsError(f"{path} holds no records (it is empty)")
        why = "; ".join(f"{n} x {reason}" for reason, n in rf.skipped.most_common())
        raise EmptyRecordsError(f"{path}: none of its {rf.lines} lines is a reward record "
                                f"({why})")
    return rf


def build_report(records: Path, out: Path, *, compare: Path | None = None,
                 rollouts: Path | None = None, patches: dict[str, str] | None = None,
                 title: str | None = None) -> ReportResult:
    """Write the self-contained HTML report of the reward records in ``records`` to
    ``out``.

    ``compare``: another records file shown side by side (per-task deltas, rollouts whose
    verdict changed). ``rollouts``: the batch's input, read for the patches to show (only
    those whose SHA-256 is the one a record scored); ``patches`` the same, already read.

    Raises:
        ReportInputError: ``records`` (or ``compare``) holds no readable record
            (:class:`EmptyRecordsError`), or ``out`` is a directory or one of the inputs.
        OSError: a file cannot be read or ``out`` cannot be written.
        ReportDependencyError: the ``report`` extra is not installed.
    """
    out = Path(out)
    if out.is_dir():
        raise ReportInputError(f"-o {printable(str(out))} is a directory: name the HTML file")
    for given in (records, compare, rollouts):
        if given is not None and out.exists() and out.resolve() == Path(given).resolve():
            raise ReportInputError(f"-o {printable(str(out))} is an input of the report; it "
                                   "would be overwritten")
    rf = _readable(records)
    found = dict(patches or {})
    if rollouts is not None:
        found.update(patches_of(read_rollouts(rollouts)))
    data = report_data(rf.records, patches=found, title=printable(
        title or f"Proctor report: {Path(records).name}"))
    data["source"] = _describe(rf)
    data["patches_given"] = patches is not None or rollouts is not None
    if compare is not None:
        other = _readable(compare)
        data["compare"] = compare_data(rf.records, other.records,
                                       printable(Path(records).name),
                                       printable(Path(compare).name))
        data["compare"]["other_source"] = _describe(other)
    size = write(data, out)
    shown = sum(1 for row in data["rows"] if row[data["columns"].index("patch")] is not None)
    return ReportResult(out, size, len(rf.records), rf, len(data["patches"]),
                        shown if data["patches_given"] else None)
