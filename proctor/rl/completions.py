"""Finding the patch in a model completion, and scoring completions.

Where the patch comes from, first match wins:

1. An explicit patch: verl ``extra_info["patch"]``, a TRL dataset column ``patch``, an
   OpenRLHF label ``{"patch": ...}``. Use it when the agent loop already produced the diff
   (e.g. ``git diff`` of the agent's workspace); the completion text is then ignored.
2. The **last** fenced block (```` ``` ```` or ``~~~``) whose info string is ``diff``,
   ``patch`` or ``udiff``.
3. The last fenced block of any language whose body is a unified diff (starts with
   ``diff --git`` or a ``--- `` / ``+++ `` header pair).
4. The whole completion, when it is itself a unified diff (starts with ``diff --git`` or
   ``--- ``).

No patch found: an honest failure, status ``scored``, reward 0.0 (what an empty patch
earns), ``reason == "no_patch"``. Conversational completions (a list of
``{"role", "content"}`` messages, as TRL passes them) are searched in their assistant
messages' contents.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from proctor.harness.batch import BatchOptions, iter_batch, shared_rollout_scorer
from proctor.harness.rollout_io import BatchItem, Rollout
from proctor.record import RewardRecord

NO_PATCH = "no_patch"
DIFF_LANGS = {"diff", "patch", "udiff"}
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)"
                    r"[ \t]*$", re.M | re.S)
_DIFF_START = re.compile(r"\A(diff --git |--- \S.*\n\+\+\+ )")


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


def _looks_like_diff(text: str) -> bool:
    return bool(_DIFF_START.match(text.lstrip("\n")))


def extract_patch(completion: str | list | dict | None, explicit: str | None = None
                  ) -> str | None:
    """The patch text (ending in a newline), or None when there is none (pure)."""
    if explicit is not None and explicit.strip():
        return explicit
    text = completion_text(completion)
    blocks = [(m["info"].strip().split()[0].lower() if m["info"].strip() else "", m["body"])
              for m in _FENCE.finditer(text)]
    chosen = next((body for lang, body in reversed(blocks) if lang in DIFF_LANGS), None)
    if chosen is None:
        chosen = next((body for _, body in reversed(blocks) if _looks_like_diff(body)), None)
    if chosen is None and _looks_like_diff(text):
        chosen = text
    if chosen is None or not chosen.strip():
        return None
    return chosen.lstrip("\n") if chosen.endswith("\n") else chosen.lstrip("\n") + "\n"


def no_patch_record(task: str | Path, *, rollout_id: str, group_id: str | None = None,
                    sample_index: int | None = None) -> RewardRecord:
    """The honest-failure record of a completion without a patch: reward 0.0, reason
    ``no_patch`` (an error record if the task itself is invalid)."""
    from proctor.harness.executor import score

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
