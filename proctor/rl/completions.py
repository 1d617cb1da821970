"""Finding the patch in a model completion, and scoring completions.

The patch is found by :func:`proctor.rl.extract.extract_patch` (its module docstring has
the rules: an explicit patch first, then tool calls, the last fenced ``diff`` block (with
earlier blocks of other files), a bare diff; special tokens, reasoning blocks and CRLF
handled).

No patch found: an honest failure, status ``scored``, reward 0.0 (what an empty patch
earns), ``reason == "no_patch"``. Conversational completions (a list of
``{"role", "content"}`` messages, as TRL passes them) are searched in their assistant
messages.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from proctor.harness.batch import (
    BatchItem,
    BatchOptions,
    Rollout,
    iter_batch,
    shared_rollout_scorer,
)
from proctor.record import RewardRecord
from proctor.rl.extract import extract_patch

NO_PATCH = "no_patch"


def completion_text(completion: str | list | dict | None) -> str:
    """Text of a completion: a string as is; a message dict's ``content``; a list of
    messages joined (assistant messages only when roles are given)."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    msgs = [m for m in completion if isinstance(m, dict)]
    if any("role" in m for m in msgs):
        msgs = [m for m in msgs if m.get("role") == "assistant"]
    return "\n".join(str(m.get("content") or "") for m in msgs)


def no_patch_record(task: str | Path, *, rollout_id: str, group_id: str | None = None,
                    sample_index: int | None = None) -> RewardRecord:
    """The honest-failure record of a completion without a patch: reward 0.0, reason
    ``no_patch`` (an error record if the task itself is invalid)."""
    from proctor.harness.pipeline.score import score

    rec = score(task, b"", rollout_id=rollout_id, group_id=group_id,
                sample_index=sample_index)
    if rec.status == "scored":
        rec.reason = NO_PATCH
        note = "no diff found in the completion (no fenced diff block, no explicit patch)"
        rec.component_notes = {k: f"not measured: {NO_PATCH}" for k in rec.components}
        rec.component_notes["reason"] = note
    return rec


@dataclass(frozen=True)
class Completion:
    """One completion to score: its task directory, the completion, an optional explicit
    patch, and ids for the record."""

    task: str
    completion: str | list | dict | None
    patch: str | None = None
    rollout_id: str | None = None
    group_id: str | None = None
    sample_index: int | None = None


def score_completions(entries: list[Completion], options: BatchOptions | None = None
                      ) -> list[RewardRecord]:
    """Score completions in parallel (``options.workers`` threads, result cache and retries
    as in a batch); one record per entry, in order. Never raises for a bad entry."""
    options = options or BatchOptions()
    out: list[RewardRecord | None] = [None] * len(entries)
    items = []
    for i, e in enumerate(entries):
        rid = e.rollout_id or uuid.uuid4().hex
        patch = extract_patch(e.completion, e.patch)
        if patch is None:
            out[i] = no_patch_record(e.task, rollout_id=rid, group_id=e.group_id,
                                     sample_index=e.sample_index)
        else:
            items.append(BatchItem(i, Rollout(task=str(e.task), rollout_id=rid, patch=patch,
                                              group_id=e.group_id,
                                              sample_index=e.sample_index)))
    for index, rec in iter_batch(items, options,
                                 rollout_scorer=shared_rollout_scorer(options)):
        out[index] = rec
    return out  # type: ignore[return-value]
