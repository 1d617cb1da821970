"""OpenRLHF adapter: the file-mode reward function (``--remote_rm_url <this file>``).

OpenRLHF loads this file and calls ``reward_func(queries, prompts, labels)``: ``queries``
are prompt + response as one string, ``prompts`` the prompts, ``labels`` the
``--label_key`` column. The response is the query with its prompt removed (only the
response is searched for a patch). A label is the task directory, or a JSON object string
``{"task": ..., "patch": ..., "rollout_id": ..., "group_id": ...}``.

    --remote_rm_url /path/to/proctor/rl/openrlhf.py --label_key task

Returns ``{"rewards", "scores", "extra_logs"}``: torch float32 tensors when torch is
importable (always the case inside OpenRLHF), plain lists of floats otherwise (e.g. the
HTTP server). ``rewards`` is the reward (harness errors: 0.0, OpenRLHF has no mask; see
``extra_logs["proctor_valid"]``), ``scores`` the reward clamped to 0..1 for dynamic
filtering, ``extra_logs`` per-sample figures for logging.
"""

from __future__ import annotations

import json

from proctor.harness.batch import BatchOptions
from proctor.rl.completions import Completion, score_completions
from proctor.rl.verl import to_verl_dict


def _tensor(values: list[float]):
    try:
        import torch
    except ImportError:
        return values
    return torch.tensor(values, dtype=torch.float32)


def _entry(query: str, prompt: str, label) -> Completion:
    response = query[len(prompt):] if prompt and query.startswith(prompt) else query
    info = label if isinstance(label, dict) else None
    if info is None and isinstance(label, str) and label.lstrip().startswith("{"):
        info = json.loads(label)
    if info is None:
        return Completion(task=str(label), completion=response)
    if not info.get("task"):
        raise ValueError(f"OpenRLHF label without 'task': {label!r}")
    return Completion(task=str(info["task"]), completion=response, patch=info.get("patch"),
                      rollout_id=info.get("rollout_id"), group_id=info.get("group_id"))


def score_queries(queries, prompts, labels, workers: int | None = None) -> dict:
    """The work of :func:`reward_func`, returning plain lists (JSON-ready)."""
    entries = [_entry(q, p, lab) for q, p, lab in zip(queries, prompts, labels, strict=True)]
    dicts = [to_verl_dict(r) for r in score_completions(entries, BatchOptions(workers=workers))]
    rewards = [d["score"] for d in dicts]
    logs = {f"proctor_{k}": [d[k] for d in dicts] for k in dicts[0] if k != "score"} \
        if dicts else {}
    return {"rewards": rewards, "scores": [min(1.0, max(0.0, r)) for r in rewards],
            "extra_logs": logs}


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF's entry point (see the module docstring)."""
    out = score_queries(queries, prompts, labels)
    return {"rewards": _tensor(out["rewards"]), "scores": _tensor(out["scores"]),
            "extra_logs": {k: _tensor(v) for k, v in out["extra_logs"].items()}}
