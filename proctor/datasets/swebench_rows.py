"""SWE-bench-style dataset rows: read, one by one, with the variants' field names.

A row names a repository, a base commit, the fix (``patch``), the tests that check it
(``test_patch``) and the test ids the fix makes pass (``FAIL_TO_PASS``) and keeps passing
(``PASS_TO_PASS``). The shapes read (one JSON object per line, or one JSON list):

* **SWE-bench** (full, Lite, Verified, Multimodal's Python rows) and **SWE-Gym**:
  ``instance_id``, ``repo`` (``owner/name``), ``base_commit``, ``patch``, ``test_patch``,
  ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` (JSON lists, or strings holding them, as the
  Hugging Face copies store them), ``version``, ``environment_setup_commit``.
* **SWE-rebench**: the same, and ``install_config`` (its ``pip_packages`` become the
  task's requirements) or ``requirements``.
* Lower-case and short names (``fail_to_pass``, ``f2p``, ``repo_name``, ``commit_hash``,
  ``gold_patch``) are read as the names above.

SWE-smith's rows (the ``patch`` introduces the bug on a mirror's branch; no base commit)
and R2E-Gym's (no diff) are another shape: the missing field is the row's error.

Every other field is kept in :attr:`SWEBenchRow.extra`. A row that is not an object, lacks
a required field or has one of the wrong type is a :class:`RowError` naming the line, the
instance (when it has an id) and the field; the other rows are still read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: Field names of the variants -> the SWE-bench name they mean.
ALIASES: dict[str, str] = {
    "fail_to_pass": "FAIL_TO_PASS", "f2p": "FAIL_TO_PASS", "FAIL2PASS": "FAIL_TO_PASS",
    "pass_to_pass": "PASS_TO_PASS", "p2p": "PASS_TO_PASS", "PASS2PASS": "PASS_TO_PASS",
    "repo_name": "repo", "commit_hash": "base_commit", "gold_patch": "patch",
}


class SWEBenchRow(BaseModel):
    """One instance. ``repo``: ``owner/name``; ``base_commit``: the commit the agent's
    patch applies to (a hex object name, 4 to 40 digits); ``patch``: the reference fix (a
    unified diff); ``test_patch``: the diff that adds or changes the tests that check it;
    ``FAIL_TO_PASS`` / ``PASS_TO_PASS``: test ids as the row states them;
    ``requirements``: pip requirement lines the tests need (from ``requirements`` or
    SWE-rebench's ``install_config.pip_packages``); ``extra``: every other field."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True,
                              coerce_numbers_to_str=True)

    instance_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.\-]*$")
    repo: str = Field(min_length=3, max_length=200, pattern=r"^[\w.\-]+/[\w.\-]+$")
    base_commit: str = Field(pattern=r"^[0-9a-fA-F]{4,40}$")
    patch: str = Field(min_length=1)
    test_patch: str = ""
    FAIL_TO_PASS: list[str] = []
    PASS_TO_PASS: list[str] = []
    version: str | None = None
    environment_setup_commit: str | None = None
    requirements: list[str] = []
    extra: dict = {}

    @field_validator("test_patch", mode="before")
    @classmethod
    def _no_tests(cls, v):
        return "" if v is None else v

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, v):
        if v is None:
            return []
        if isinstance(v, str):  # the Hugging Face copies hold the list as a JSON string
            try:
                v = json.loads(v) if v.strip() else []
            except json.JSONDecodeError:
                raise ValueError("neither a list nor a JSON string of one") from None
        return v

    @field_validator("requirements", mode="before")
    @classmethod
    def _lines(cls, v):
        if isinstance(v, str):
            v = v.splitlines()
        return [x.strip() for x in v if isinstance(x, str) and x.strip()
                and not x.strip().startswith("#")] if isinstance(v, list) else v

    @property
    def name(self) -> str:
        """The repository's name without its owner (``parse`` of ``r1chardj0n3s/parse``)."""
        return self.repo.split("/", 1)[1]


class RowError(Exception):
    """A row that cannot become a task: ``instance`` (its id, or ``line N`` when it has
    none) and ``cause`` (one line)."""

    def __init__(self, instance: str, cause: str):
        super().__init__(f"{instance}: {cause}")
        self.instance, self.cause = instance, cause


@dataclass(frozen=True)
class ReadRow:
    """A row as read: ``line`` (1-based line of a JSONL file, or the index in a JSON
    list + 1) and either ``row`` or ``error``."""

    line: int
    row: SWEBenchRow | None = None
    error: RowError | None = None


def normalise(raw: dict) -> dict:
    """The row's fields under their SWE-bench names (``extra`` holds the rest)."""
    known = set(SWEBenchRow.model_fields) - {"extra"}
    out: dict = {k: v for k, v in raw.items() if k in known}  # SWE-bench's own names win
    extra: dict = {}
    for key, value in raw.items():
        if key in out:
            continue
        if key == "extra" and isinstance(value, dict):  # a row Proctor wrote (swebench.json)
            extra.update(value)
            continue
        name = ALIASES.get(key, key)
        if name in known and name not in out:
            out[name] = value
        else:
            extra[key] = value
    install = extra.get("install_config")
    if "requirements" not in out and isinstance(install, dict) and install.get("pip_packages"):
        out["requirements"] = install["pip_packages"]
    out["extra"] = extra
    return out


def parse_row(raw: object, line: int) -> ReadRow:
    """One row from its JSON value (never raises: a bad row is a :class:`ReadRow` with an
    ``error``)."""
    if not isinstance(raw, dict):
        return ReadRow(line, error=RowError(f"line {line}",
                                            f"not a JSON object ({type(raw).__name__})"))
    ident = raw.get("instance_id")
    who = ident if isinstance(ident, str) and ident else f"line {line}"
    try:
        return ReadRow(line, row=SWEBenchRow.model_validate(normalise(raw)))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "row"
        return ReadRow(line, error=RowError(who, f"field {field}: {first['msg']}"))


def read_rows(path: str | Path) -> Iterator[ReadRow]:
    """The rows of ``path``: JSONL (one object per line, blank lines skipped) or a ``.json``
    file holding one list of objects.

    Raises:
        OSError: the file cannot be read.
        ValueError: a ``.json`` file that is not one JSON list (the message says why).
    """
    path = Path(path)
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: a .json dataset must be one list of rows, "
                             f"got {type(data).__name__}")
        for i, raw in enumerate(data, 1):
            yield parse_row(raw, i)
        return
    with path.open("rb") as f:
        for i, raw_line in enumerate(f, 1):
            if not raw_line.strip():
                continue
            try:
                raw = json.loads(raw_line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                yield ReadRow(i, error=RowError(f"line {i}", f"not JSON ({exc.__class__.__name__}"
                                                             f": {str(exc)[:80]})"))
                continue
            yield parse_row(raw, i)
