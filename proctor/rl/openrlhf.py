"""OpenRLHF adapter: the file-mode reward function (``--reward.remote_url <this file>``).

OpenRLHF (0.11) loads this file and calls ``reward_func(queries, prompts, labels)`` from a
thread, one sample per call: ``queries`` are ``tokenizer.decode(prompt ids + response ids,
skip_special_tokens=False)``, so they keep the chat template's special tokens and the EOS;
``prompts`` the prompts as given; ``labels`` the ``--data.label_key`` column. The response is the
query after its prompt (:func:`response_of`; only the response is searched for a patch, see
:mod:`proctor.rl.extract`). A label is the task directory, or a JSON object (or its string)
``{"task": ..., "patch": ..., "rollout_id": ..., "group_id": ...}``.

    --reward.remote_url /path/to/proctor/rl/openrlhf.py --data.label_key task

Returns ``{"rewards", "scores", "extra_logs"}``: torch float32 tensors when torch is
importable (always the case inside OpenRLHF), plain lists of floats otherwise (e.g. the
HTTP server). ``rewards`` is the reward (harness errors: 0.0, OpenRLHF has no mask; see
``extra_logs["proctor_valid"]``), ``scores`` the reward clamped to 0..1 for dynamic
filtering, ``extra_logs`` per-sample figures for logging.

Never raises for one bad sample (OpenRLHF logs a reward function's exception and drops the
sample's reward): a label that is not a task, a missing task directory, a query that does
not hold its prompt each give that sample an error record (reward 0.0, ``proctor_valid``
0.0, the reason in ``proctor_error``... see :func:`score_queries`). Lists of different
lengths raise ValueError (the caller's bug, not a sample's).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from proctor.harness.batch import BAD_INPUT, BatchOptions, error_record
from proctor.record import RewardRecord
from proctor.rl.completions import Completion, parser_options, score_completions
from proctor.rl.extract import SPECIAL_TOKEN as _SPECIAL
from proctor.rl.verl import VERL_KEYS, to_verl_dict


def _tensor(values: list[float]):
    try:
        import torch
    except ImportError:
        return values
    return torch.tensor(values, dtype=torch.float32)


#: The model family's syntaxes: ``PROCTOR_REASONING_PARSER`` / ``PROCTOR_TOOL_CALL_PARSER``
#: (vLLM's parser names; default ``auto``), read when OpenRLHF loads this file: a wrong
#: name stops the run at its start (:func:`proctor.rl.completions.parser_options`).
_PARSERS = parser_options()
_TOKEN = re.compile(rf"{_SPECIAL}|\s+")
#: Generation prompts of common chat templates: the response starts after the last one.
_ASSISTANT_HEADERS = ("<|im_start|>assistant", "<|start_header_id|>assistant<|end_header_id|>",
                      "<start_of_turn>model", "<｜Assistant｜>", "<|assistant|>",
                      "<|start|>assistant", "[/INST]")


def _normalised(text: str) -> tuple[str, list[int]]:
    """``text`` without special tokens and whitespace, and for each kept character the
    index after it in ``text``."""
    kept, ends, pos = [], [], 0
    for m in _TOKEN.finditer(text):
        for k in range(pos, m.start()):
            kept.append(text[k])
            ends.append(k + 1)
        pos = m.end()
    for k in range(pos, len(text)):
        kept.append(text[k])
        ends.append(k + 1)
    return "".join(kept), ends


def response_of(query: str, prompt: str) -> str | None:
    """The response part of an OpenRLHF query, or None when the prompt cannot be found.

    Tried in order: the query starts with the prompt; contains it (a BOS before it); the
    same with special tokens and whitespace ignored (the tokenizer's decode does not give
    the prompt's text back); the query starts with the end of the prompt (OpenRLHF cut a
    long prompt from the left); the text after the last chat-template generation prompt
    (``<|im_start|>assistant`` ...) in the query. Unless the query starts with the prompt,
    a generation prompt after the prompt's end wins over that end: the prompt was only
    the user's message inside the template (the rest of the template, a diff quoted in the
    system or user turns, is not the response).
    """
    if not prompt:
        return query
    if query.startswith(prompt):
        return query[len(prompt):]
    end = None
    if (at := query.find(prompt)) >= 0:
        end = at + len(prompt)
    else:
        nq, ends = _normalised(query)
        np_, _ = _normalised(prompt)
        if np_ and (at := nq.find(np_)) >= 0:
            end = ends[at + len(np_) - 1]
        elif np_:
            tail = np_[-64:] if len(np_) > 128 else np_[len(np_) // 2:]
            at = nq.find(tail)
            if at >= 0 and np_.endswith(nq[:at + len(tail)]):
                end = ends[at + len(tail) - 1]
    cut = max((query.rfind(h, end or 0) + len(h) if h in query[end or 0:] else -1)
              for h in _ASSISTANT_HEADERS)
    if cut >= 0:  # the prompt is only part of the templated prompt (the user's message)
        return query[cut:]
    return None if end is None else query[end:]


def _label_info(label) -> dict:
    """The label as ``{"task", ...}`` (``patch`` a string or None, ids strings or None);
    raises ValueError with the reason."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            label = json.loads(label)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"label is not valid JSON ({exc}): {label[:200]!r}") from None
    if isinstance(label, dict):
        if not isinstance(label.get("task"), str) or not label["task"].strip():
            raise ValueError(f"label has no 'task' (the task directory): {str(label)[:200]!r}")
        if not isinstance(label.get("patch"), str | None):
            raise ValueError(f"label's 'patch' must be diff text, got "
                             f"{type(label['patch']).__name__}")
        label = dict(label)
        for key in ("rollout_id", "group_id"):
            value = label.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                label[key] = str(value)
            elif not isinstance(value, str | None):
                raise ValueError(f"label's {key!r} must be a string or an integer, got "
                                 f"{type(value).__name__}")
        return label
    if isinstance(label, str) and label.strip():
        return {"task": label}
    raise ValueError(f"label must be a task directory or a JSON object with 'task', got "
                     f"{type(label).__name__} {str(label)[:200]!r}")


def _entry(query, prompt, label) -> Completion | RewardRecord:
    try:
        info = _label_info(label)
    except ValueError as exc:
        return error_record(rollout_id=None, kind=BAD_INPUT, message=str(exc))
    ids = dict(rollout_id=info.get("rollout_id"), group_id=info.get("group_id"))
    task = str(info["task"])
    try:
        is_task = Path(task, "task.toml").is_file()
    except OSError:  # a name too long, a directory it may not read
        is_task = False
    if not is_task:
        return error_record(kind=BAD_INPUT, task=task, **ids,
                            message=f"no task at {task!r} (no task.toml there)")
    response = response_of(str(query or ""), str(prompt or ""))
    if response is None and not info.get("patch"):
        return error_record(kind=BAD_INPUT, task=task, **ids,
                            message="the query does not contain its prompt: cannot tell the "
                                    "response apart (is the prompt what OpenRLHF was given?)")
    return Completion(task=task, completion=response, patch=info.get("patch"), **ids,
                      **_PARSERS)


def score_records(queries, prompts, labels, workers: int | None = None
                  ) -> list[RewardRecord]:
    """One record per sample, in order: scored, or an error record (kind ``bad_input``)
    for a sample that cannot be scored (bad label, missing task, a query without its
    prompt). Raises ValueError when the three lists differ in length."""
    queries, prompts, labels = list(queries), list(prompts), list(labels)
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"queries, prompts and labels differ in length: {len(queries)}, "
                         f"{len(prompts)}, {len(labels)}")
    entries = [_entry(q, p, lab) for q, p, lab in zip(queries, prompts, labels, strict=True)]
    todo = [e for e in entries if isinstance(e, Completion)]
    scored = iter(score_completions(todo, BatchOptions(workers=workers)) if todo else [])
    return [next(scored) if isinstance(e, Completion) else e for e in entries]


def reply(records: list[RewardRecord]) -> dict:
    """``{"rewards", "scores", "extra_logs"}`` of ``records`` as plain lists (JSON-ready):
    ``extra_logs`` has ``proctor_<key>`` for every key of :data:`proctor.rl.verl.VERL_KEYS`
    but ``score``; an error record is reward 0.0, ``proctor_valid`` 0.0. Pure."""
    dicts = [to_verl_dict(r) for r in records]
    rewards = [d["score"] for d in dicts]
    logs = {f"proctor_{k}": [d[k] for d in dicts] for k in VERL_KEYS if k != "score"}
    return {"rewards": rewards, "scores": [min(1.0, max(0.0, r)) for r in rewards],
            "extra_logs": logs}


def score_queries(queries, prompts, labels, workers: int | None = None) -> dict:
    """The work of :func:`reward_func`, returning plain lists (JSON-ready): ``rewards``,
    ``scores`` and ``extra_logs`` (see :func:`reply`). A sample that cannot be scored (bad
    label, missing task, see the module docstring) gets an error record: reward 0.0,
    ``proctor_valid`` 0.0. Raises ValueError when the three lists differ in length."""
    return reply(score_records(queries, prompts, labels, workers))


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF's entry point (see the module docstring)."""
    out = score_queries(queries, prompts, labels)
    return {"rewards": _tensor(out["rewards"]), "scores": _tensor(out["scores"]),
            "extra_logs": {k: _tensor(v) for k, v in out["extra_logs"].items()}}
