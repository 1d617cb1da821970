"""Read a reward-records JSONL file for the report, skipping what cannot be read and saying
why (torn lines, other schema versions, records that do not validate)."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from proctor.record import SCHEMA, RewardRecord

#: Line numbers kept per skip reason, to name them in the report.
_EXAMPLES = 5


@dataclass
class RecordsFile:
    """The records read from one file, in file order, and the lines skipped.

    ``skipped`` maps a reason (``"not JSON (a torn line?)"``, ``"schema proctor.reward/9
    is not proctor.reward/1"``, ...) to how many lines had it; ``examples`` maps the same
    reason to the first 1-based line numbers. ``lines`` counts the non-blank lines."""

    path: Path
    records: list[RewardRecord] = field(default_factory=list)
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[int]] = field(default_factory=dict)

    @property
    def skipped_total(self) -> int:
        """Lines that did not become a record."""
        return sum(self.skipped.values())

    def skip(self, reason: str, line: int) -> None:
        """Count line ``line`` (1-based) as skipped for ``reason``."""
        self.skipped[reason] += 1
        seen = self.examples.setdefault(reason, [])
        if len(seen) < _EXAMPLES:
            seen.append(line)


def _no_constants(name: str) -> None:
    raise ValueError(name)


_NOT_FINITE = object()
#: JSON's names for what ``json.loads`` returns.
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def _finite(obj: object) -> bool:
    """Whether every number in ``obj`` is finite (``1e999`` reads as infinity without
    going through ``parse_constant``)."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return True


def _problem(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return f"a JSON {_JSON_TYPES.get(type(obj), 'value')}, not a record object"
    schema = obj.get("schema")
    if schema != SCHEMA:
        return f"schema {schema!r} is not {SCHEMA!r}" if schema else "no 'schema' field"
    return None


def read_records(path: Path) -> RecordsFile:
    """Every line of ``path`` that is a reward record of this schema, in file order.

    Blank lines are ignored; a line that is not UTF-8 JSON, not an object, of another
    schema version or not a valid record is skipped with its reason. Error records
    (``status: "error"``) are records and are kept.

    Raises:
        OSError: the file cannot be read.
    """
    out = RecordsFile(Path(path))
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            out.lines += 1
            try:
                obj = json.loads(raw, parse_constant=_no_constants)
            except (json.JSONDecodeError, UnicodeDecodeError):
                out.skip("not JSON (a torn line?)", number)
                continue
            except ValueError:  # NaN, Infinity, -Infinity
                obj = _NOT_FINITE
            if obj is _NOT_FINITE or not _finite(obj):
                out.skip("holds NaN or Infinity (not JSON)", number)
                continue
            problem = _problem(obj)
            if problem:
                out.skip(problem, number)
                continue
            try:
                out.records.append(RewardRecord.model_validate(obj))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "record"
                out.skip(f"not a valid record ({where}: {first['msg']})", number)
    return out
