"""Rollouts in, reward records out: the JSONL shapes of ``proctor batch``.

Input, one JSON object per line (blank lines are skipped)::

    {"task": "path/to/task", "patch": "diff --git ...", "rollout_id": "r1",
     "group_id": "g1", "sample_index": 0, "message": "...", "metadata": {...}}

``patch`` (the diff text) or ``patch_file`` (a path to it), exactly one. Relative paths
(``task``, ``patch_file``) are resolved against the current directory, like every path on
Proctor's command line. ``metadata`` is copied to the output record untouched; ``message``
(the agent's final message) is accepted and not used for the reward yet. Unknown keys are
ignored. A line that is not such an object becomes an ``error`` record of kind
``bad_input`` whose message names the line number; it never stops the batch.

SWE-bench predictions are read too, given the imported tasks' directory (``--tasks``):
``{"instance_id": ..., "model_patch": ..., "model_name_or_path": ...}`` per line, or a
``.json`` file holding a list of them or an object of them by instance id. Such a line is
the rollout of task ``TASKS_DIR/<instance_id>`` with the patch ``model_patch`` (null or
empty: scored as the empty patch), ``rollout_id`` ``<model_name_or_path>/<instance_id>``
unless it has one, and ``metadata`` carrying ``instance_id``, ``model_name_or_path`` and
``model_patch_is_none`` for ``proctor export swebench``. An instance with no task there is
a ``bad_input`` record naming it.

Output: one :class:`~proctor.record.RewardRecord` per line, written and flushed as each
rollout finishes (completion order, not input order).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from proctor.record import EnvInfo, ErrorInfo, RewardRecord
from proctor.version import __version__

BAD_INPUT = "bad_input"


class Rollout(BaseModel):
    """One agent attempt to score. ``rollout_id`` is required; ids given as numbers are
    kept as their decimal text. ``message`` (the agent's final message) and ``transcript``
    (what it did: chat messages, a SWE-agent trajectory or OpenHands events, as JSON) are
    checked against the measurements (:mod:`proctor.harness.pipeline.agent_message`)."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    task: str
    rollout_id: str
    patch: str | None = None
    patch_file: str | None = None
    group_id: str | None = None
    sample_index: int | None = None
    message: str | bytes | None = None
    transcript: Any = None
    metadata: dict | None = None

    @model_validator(mode="after")
    def _one_patch(self) -> Rollout:
        if (self.patch is None) == (self.patch_file is None):
            raise ValueError("exactly one of 'patch' (diff text) or 'patch_file' is required")
        return self

    def said(self) -> dict:
        """``score``'s ``message`` / ``transcript`` arguments, those given."""
        return {k: v for k, v in (("message", self.message), ("transcript", self.transcript))
                if v is not None}

    def said_sha256(self) -> str | None:
        """Digest of the message and transcript (None when neither is given)."""
        said = self.said()
        if not said:
            return None
        text = json.dumps(said, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def patch_bytes(self) -> bytes:
        """The patch as bytes: ``patch`` encoded as UTF-8, or the file's bytes.

        Raises:
            OSError: ``patch_file`` cannot be read.
        """
        if self.patch is not None:
            return self.patch.encode("utf-8", errors="surrogatepass")
        return Path(self.patch_file).read_bytes()


@dataclass(frozen=True)
class BatchItem:
    """One input position: a valid rollout, or the reason the input was rejected.
    ``index`` is the 0-based position among the items, ``line`` the 1-based line number
    (None when the input did not come from a file)."""

    index: int
    rollout: Rollout | None
    line: int | None = None
    problem: str | None = None
    raw_id: str | None = None
    metadata: dict | None = None  # a bad SWE-bench prediction's instance and model

    @property
    def where(self) -> str:
        """Where the item came from, for messages: ``line N`` or ``rollout #N``."""
        return f"line {self.line}" if self.line is not None else f"rollout #{self.index}"


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(x) for x in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field '{field}': {msg}{more}" if field else f"{msg}{more}"


def _is_prediction(obj: object) -> bool:
    return isinstance(obj, dict) and "task" not in obj and (
        "model_patch" in obj or "instance_id" in obj)


def _prediction(obj: dict, tasks_dir: Path | None) -> tuple[dict | None, str | None, dict]:
    """A SWE-bench prediction as a rollout object, or why it cannot be one; and the
    metadata naming its instance and model (for a bad input's record too)."""
    instance = obj.get("instance_id")
    model = str(obj.get("model_name_or_path") or "model")
    meta = {"instance_id": str(instance), "model_name_or_path": model}
    if not isinstance(instance, str) or not instance or "/" in instance or instance in (
            ".", ".."):
        return None, f"a SWE-bench prediction needs an instance_id, got {instance!r}", meta
    if tasks_dir is None:
        return None, (f"instance {instance}: a SWE-bench prediction (instance_id, model_patch) "
                      "needs the imported tasks' directory (--tasks TASKS_DIR)"), meta
    task = tasks_dir / instance
    if not (task / "task.toml").is_file():
        return None, f"unknown instance {instance}: no task at {task}", meta
    patch = obj.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        return None, f"instance {instance}: model_patch must be text or null", meta
    extra = obj.get("metadata")
    if extra is not None and not isinstance(extra, dict):
        return None, f"instance {instance}: metadata must be an object", meta
    meta = {**(extra or {}), **meta, "model_patch_is_none": patch is None}
    return ({**{k: v for k, v in obj.items() if k not in ("model_patch", "metadata")},
             "task": str(task), "patch": patch or "", "metadata": meta,
             "rollout_id": obj.get("rollout_id") or f"{model}/{instance}"}, None, meta)


def item_from_obj(index: int, obj: object, line: int | None = None,
                  tasks_dir: Path | None = None) -> BatchItem:
    """Validate one decoded input object (pure but for a SWE-bench prediction's task
    lookup under ``tasks_dir``)."""
    raw_id = None
    if _is_prediction(obj):
        made, problem, meta = _prediction(obj, tasks_dir)
        if made is None:
            return BatchItem(index, None, line, problem,
                             f"{meta['model_name_or_path']}/{meta['instance_id']}", meta)
        obj = made
    if isinstance(obj, dict) and obj.get("rollout_id") is not None:
        raw_id = str(obj["rollout_id"])
    if isinstance(obj, Rollout):
        return BatchItem(index, obj, line)
    if not isinstance(obj, dict):
        return BatchItem(index, None, line, f"expected a JSON object, got {type(obj).__name__}")
    try:
        return BatchItem(index, Rollout.model_validate(obj), line, raw_id=raw_id)
    except ValidationError as exc:
        return BatchItem(index, None, line, _first_error(exc), raw_id)


def parse_jsonl(lines: Iterable[str | bytes], tasks_dir: Path | None = None
                ) -> list[BatchItem]:
    """Parse JSONL rollouts (pure); blank lines are skipped, bad lines become items with a
    ``problem``. Line numbers are 1-based. ``tasks_dir``: where SWE-bench predictions'
    tasks are (module docstring)."""
    items: list[BatchItem] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            items.append(BatchItem(len(items), None, number, f"not valid JSON: {exc.msg} "
                                                             f"(column {exc.colno})"))
            continue
        items.append(item_from_obj(len(items), obj, number, tasks_dir))
    return items


def read_rollouts(path: Path, tasks_dir: Path | None = None) -> list[BatchItem]:
    """:func:`parse_jsonl` over a file; a ``.json`` file holding a list of SWE-bench
    predictions, or an object of them by instance id, is read as its items. Raises OSError
    when it cannot be read."""
    path = Path(path)
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        if isinstance(data, dict) and (not data or any(isinstance(v, dict)
                                                        for v in data.values())):
            # SWE-bench's preds.json: instance id -> prediction (a value that is not one is
            # that item's bad input).
            data = [{"instance_id": k, **v} if isinstance(v, dict) else v
                    for k, v in data.items()]
        if isinstance(data, list):
            return [item_from_obj(i, obj, None, tasks_dir) for i, obj in enumerate(data)]
    with open(path, "rb") as fh:
        return parse_jsonl(fh, tasks_dir)


def error_record(*, rollout_id: str | None, kind: str, message: str, task: str | None = None,  # noqa: PLR0913
                 group_id: str | None = None, sample_index: int | None = None,
                 metadata: dict | None = None, retryable: bool = False,
                 patch_sha256: str | None = None) -> RewardRecord:
    """A ``status="error"`` record made outside the executor (bad input, batch setup)."""
    rec = RewardRecord(
        task_id=Path(task).name if task else "", rollout_id=rollout_id or uuid.uuid4().hex,
        group_id=group_id, sample_index=sample_index, status="error", reward=None,
        error=ErrorInfo(kind=kind, message=message, retryable=retryable), metadata=metadata,
        env=EnvInfo(proctor_version=__version__, patch_sha256=patch_sha256),
    )
    rec.flags.exclude_from_advantage = True
    return rec


def bad_input_record(item: BatchItem) -> RewardRecord:
    """The record of an input the batch could not use; the message names its line."""
    rid = item.raw_id or (f"line-{item.line}" if item.line is not None else f"#{item.index}")
    return error_record(rollout_id=rid, kind=BAD_INPUT, message=f"{item.where}: {item.problem}",
                        metadata=item.metadata)


# --------------------------------------------------------------------------- resume


def patch_sha256(rollout: Rollout) -> str | None:
    """sha256 of the rollout's patch bytes, or None when the patch file is unreadable."""
    try:
        return hashlib.sha256(rollout.patch_bytes()).hexdigest()
    except OSError:
        return None


def _final(rec: RewardRecord) -> bool:
    """A record worth keeping on resume: scored, or an error that a rerun would repeat."""
    if rec.status == "scored":
        return True
    return rec.error is not None and not rec.error.retryable and rec.error.kind not in (
        "blocked", "infra", "engine_unavailable", "image_missing", "internal_error", BAD_INPUT)


def prepare_resume(output: Path, items: list[BatchItem]) -> set[int]:
    """For ``--resume``: rewrite ``output`` keeping only the records that still hold, and
    return the indices of ``items`` they cover (to skip).

    A record holds when its ``rollout_id`` is in the input with the same patch sha256 and
    it is final (scored, or an error a rerun would repeat, e.g. ``task_config``). Records of
    infrastructure errors, of changed patches, of bad input lines (reported again by the
    rerun) and a torn last line (a killed batch) are dropped, so the finished file holds
    one record per rollout. Records whose rollout is not in the input are kept. The
    rewrite is atomic.
    """
    if not output.is_file():
        return set()
    wanted = {it.rollout.rollout_id: (it.index, patch_sha256(it.rollout))
              for it in items if it.rollout is not None}
    keep, skip = [], set()
    for line in output.read_bytes().splitlines():
        try:
            rec = RewardRecord.model_validate_json(line)
        except (ValidationError, ValueError):
            continue
        if rec.error is not None and rec.error.kind == BAD_INPUT:
            continue  # the rerun reports the same bad lines again
        target = wanted.get(rec.rollout_id)
        if target is None:
            keep.append(line)
        elif _final(rec) and target[1] is not None and rec.env.patch_sha256 == target[1] \
                and target[0] not in skip:
            keep.append(line)
            skip.add(target[0])
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=".proctor-resume-", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"".join(line + b"\n" for line in keep))
    os.replace(tmp, output)
    return skip
