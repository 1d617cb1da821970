"""Finding the patch in a model completion, and scoring completions.

The patch is found by :func:`proctor.rl.extract.extract_patch` (its module docstring has
the rules: an explicit patch first, then tool calls, the last fenced ``diff`` block (with
earlier blocks of other files), a bare diff; special tokens, reasoning blocks and CRLF
handled).

No patch found: an honest failure, status ``scored``, reward 0.0 (what an empty patch
earns), ``reason == "no_patch"``. Conversational completions (a list of
``{"role", "content"}`` messages, as TRL passes them) are searched in their assistant
messages. Every record of a completion carries what the extraction decided in
``evidence["extraction"]`` (:meth:`~proctor.rl.extract.Extraction.details`: the source of
the patch, the reasoning removed, the diffs and tool calls left out and why).
"""

from __future__ import annotations

import time
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
from proctor.record import Evidence, RewardRecord
from proctor.rl.extract import Extraction, find_patch

NO_PATCH = "no_patch"
#: Environment variables naming the parsers where a trainer passes no options (OpenRLHF's
#: file mode, the HTTP server's default).
REASONING_PARSER_ENV = "PROCTOR_REASONING_PARSER"
TOOL_CALL_PARSER_ENV = "PROCTOR_TOOL_CALL_PARSER"


def parser_options(reasoning_parser: str | None = None, tool_call_parser: str | None = None
                   ) -> dict[str, str]:
    """``{"reasoning_parser", "tool_call_parser"}`` for :class:`Completion`: the names
    given, else :data:`REASONING_PARSER_ENV` / :data:`TOOL_CALL_PARSER_ENV`, else ``auto``.
    Adapters call it when they are built, so a wrong name stops the run at its start.

    Raises:
        ValueError: an unknown parser name (the message lists the known ones).
    """
    import os

    from proctor.rl.reasoning import check_reasoning_parser
    from proctor.rl.tool_calls import check_tool_call_parser

    return {"reasoning_parser": check_reasoning_parser(
                reasoning_parser or os.environ.get(REASONING_PARSER_ENV) or "auto"),
            "tool_call_parser": check_tool_call_parser(
                tool_call_parser or os.environ.get(TOOL_CALL_PARSER_ENV) or "auto")}


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
                    sample_index: int | None = None, why: str | None = None,
                    reason: str = NO_PATCH) -> RewardRecord:
    """The honest-failure record of a completion without a patch: reward 0.0, reason
    ``no_patch`` (an error record if the task itself is invalid); ``why``: what the
    extraction says it looked for (default: :data:`proctor.rl.extract.NOT_FOUND`).
    ``reason``: ``did_not_apply`` for an edit that does not match the task's files."""
    from proctor.harness.pipeline.score import score
    from proctor.rl.extract import NOT_FOUND

    rec = score(task, b"", rollout_id=rollout_id, group_id=group_id,
                sample_index=sample_index)
    if rec.status == "scored":
        rec.reason = reason
        rec.component_notes = {k: f"not measured: {reason}" for k in rec.components}
        rec.component_notes["reason"] = why or NOT_FOUND
    return rec


def converted(task: str | Path, found: Extraction) -> Extraction:
    """``found`` with its edit (V4A ``apply_patch``, SEARCH/REPLACE) converted into a
    unified diff against ``task``'s files (:mod:`proctor.rl.edit_formats`): the patch set,
    ``edit_format`` in the details. An edit that does not match the files: no patch, and
    ``why`` says where (the record's reason is then ``did_not_apply`` for V4A, which names
    lines and files like a diff, and ``no_patch`` for SEARCH/REPLACE). A task that cannot be
    loaded: left as it is (its scoring reports the task's error)."""
    from proctor.rl.edit_formats import EditMismatch, to_unified
    from proctor.task import load_task

    if found.edit is None or found.patch is not None:
        return found
    try:
        repo = load_task(task).repo.resolve()
    except Exception:  # noqa: BLE001 - the task's own error is the record's, later
        return found

    def read(path: str) -> str | None:
        target = (repo / path).resolve()
        if not target.is_relative_to(repo) or not target.is_file():
            return None
        return target.read_text(encoding="utf-8", errors="surrogateescape")

    try:
        found.patch = to_unified(found.edit, read)
        found.why = None
    except EditMismatch as exc:
        found.why = str(exc)
    return found


def _with_extraction(rec: RewardRecord, found: Extraction, seconds: float) -> RewardRecord:
    """``rec`` with what the extraction decided in ``evidence["extraction"]``."""
    rec.evidence["extraction"] = Evidence(command="extract_patch",
                                          duration_s=round(seconds, 6),
                                          details=found.details())
    return rec


@dataclass(frozen=True)
class Completion:
    """One completion to score: its task directory, the completion, an optional explicit
    patch, ids for the record, the reasoning syntaxes to remove (``reasoning_parser``, a
    name of :data:`proctor.rl.reasoning.REASONING_PARSERS`) and the tool-call syntaxes to
    read (``tool_call_parser``, a name of :data:`proctor.rl.tool_calls.TOOL_CALL_PARSERS`)
    and, optionally, the completion's ``token_ids``."""

    task: str
    completion: str | list | dict | None
    patch: str | None = None
    rollout_id: str | None = None
    group_id: str | None = None
    sample_index: int | None = None
    reasoning_parser: str = "auto"
    tool_call_parser: str = "auto"
    #: A text completion's token ids (ints), when the trainer has them: harmony's messages
    #: are then read from them by ``openai-harmony`` (:mod:`proctor.rl.harmony_tokens`).
    token_ids: tuple[int, ...] | None = None
    #: The agent's final message and transcript, checked against the measurements
    #: (:mod:`proctor.harness.pipeline.agent_message`).
    message: str | bytes | None = None
    transcript: object = None


def score_completions(entries: list[Completion], options: BatchOptions | None = None
                      ) -> list[RewardRecord]:
    """Score completions in parallel (``options.workers`` threads, result cache and retries
    as in a batch); one record per entry, in order, each with ``evidence["extraction"]``.
    Never raises for a bad entry.

    Raises:
        ValueError: an entry names an unknown reasoning or tool-call parser (a
            configuration error, before anything is scored).
    """
    options = options or BatchOptions()
    out: list[RewardRecord | None] = [None] * len(entries)
    items = []
    found: list[tuple[Extraction, float]] = []
    for e in entries:
        started = time.perf_counter()
        found.append((find_patch(e.completion, e.patch, reasoning_parser=e.reasoning_parser,
                                 tool_call_parser=e.tool_call_parser,
                                 token_ids=e.token_ids),
                      time.perf_counter() - started))
    for i, (e, (got, seconds)) in enumerate(zip(entries, found, strict=True)):
        rid = e.rollout_id or uuid.uuid4().hex
        got = converted(e.task, got)
        if got.patch is None:
            reason = "did_not_apply" if got.edit and got.edit.format == "v4a" else NO_PATCH
            out[i] = _with_extraction(no_patch_record(
                e.task, rollout_id=rid, group_id=e.group_id, sample_index=e.sample_index,
                why=got.why, reason=reason), got, seconds)
        else:
            items.append(BatchItem(i, Rollout(task=str(e.task), rollout_id=rid,
                                              patch=got.patch, group_id=e.group_id,
                                              sample_index=e.sample_index,
                                              message=e.message, transcript=e.transcript)))
    for index, rec in iter_batch(items, options,
                                 rollout_scorer=shared_rollout_scorer(options)):
        out[index] = _with_extraction(rec, *found[index])
    return out  # type: ignore[return-value]
