"""verl adapter: ``custom_reward_function`` for the naive and the batch reward managers.

Dataset (parquet) fields it reads: ``reward_model.ground_truth`` = the task directory (or a
dict with ``task``), optional ``extra_info`` keys ``task`` (overrides), ``patch`` (explicit
patch, see :mod:`proctor.rl.completions`), ``rollout_id``, ``group_id``, ``sample_index``.
``solution_str`` is the decoded response only (verl strips the prompt).

Config (naive reward manager, one call per sample)::

    custom_reward_function:
      path: /path/to/proctor/rl/verl.py
      name: compute_score

Config (batch reward manager, one call per batch, scored in parallel)::

    reward_model:
      reward_manager: batch
    custom_reward_function:
      path: /path/to/proctor/rl/verl.py
      name: compute_score_batch
      reward_kwargs:
        workers: 8

Every sample returns the same all-numeric keys (:data:`VERL_KEYS`), so verl can stack them
into ``reward_extra_info``. ``valid`` is 1.0 for a scored record and 0.0 for a harness
error; an error's ``score`` is 0.0 (verl has no mask), so filter or weight on ``valid``.
Null components are reported as 0.0.
"""

from __future__ import annotations

from proctor.harness.batch import BatchOptions
from proctor.record import RewardRecord
from proctor.rewards.weights import COMPONENTS
from proctor.rl.completions import NO_PATCH, Completion, score_completions

VERL_KEYS = ("score", "valid", "integrity_violation", "tripwire", "no_patch", "public_f2p",
             "hidden_f2p", "public_broken", "hidden_broken", "diff_cost", *COMPONENTS,
             "duration_s")


def to_verl_dict(rec: RewardRecord) -> dict[str, float]:
    """The record as verl's per-sample dict: every key of :data:`VERL_KEYS`, floats only."""
    ok = rec.status == "scored"
    out = dict.fromkeys(VERL_KEYS, 0.0)
    out.update(score=float(rec.reward) if ok else 0.0, valid=1.0 if ok else 0.0,
               integrity_violation=float(rec.integrity.violated), tripwire=float(
                   rec.flags.tripwire), no_patch=float(rec.reason == NO_PATCH),
               diff_cost=float(rec.diff_cost), duration_s=float(rec.timing.get("total_s", 0.0)))
    for suite in ("public", "hidden"):
        t = rec.tests.get(suite)
        if t is not None:
            out[f"{suite}_f2p"] = float(t.f2p or 0.0)
            out[f"{suite}_broken"] = float(t.broken)
    for name in COMPONENTS:
        value = rec.components.get(name)
        out[name] = float(value) if value is not None else 0.0
    return out


def _completion(solution_str: str, ground_truth, extra_info: dict | None) -> Completion:
    info = dict(extra_info or {})
    gt_task = ground_truth.get("task") if isinstance(ground_truth, dict) else ground_truth
    task = info.get("task") or gt_task
    if not task:
        raise ValueError("verl sample without a task: set reward_model.ground_truth (or "
                         "extra_info['task']) to the task directory")
    sample = info.get("sample_index")
    return Completion(task=str(task), completion=solution_str, patch=info.get("patch"),
                      rollout_id=info.get("rollout_id"), group_id=info.get("group_id"),
                      sample_index=int(sample) if sample is not None else None)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs
                  ) -> dict[str, float]:
    """verl's per-sample ``compute_score``; ``data_source`` is not used.

    Returns:
        ``{"score": reward, "valid": 1.0 | 0.0, ...}`` with every key of :data:`VERL_KEYS`.

    Raises:
        ValueError: the sample names no task.
    """
    rec = score_completions([_completion(solution_str, ground_truth, extra_info)],
                            BatchOptions(workers=1))[0]
    return to_verl_dict(rec)


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None,
                        workers: int | None = None, **kwargs) -> list[dict[str, float]]:
    """The batch reward manager's form: lists in, one dict per sample out, in order,
    scored ``workers`` at a time (default: cores)."""
    n = len(solution_strs)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    entries = [_completion(s, g, e) for s, g, e in zip(solution_strs, ground_truths, infos,
                                                        strict=True)]
    return [to_verl_dict(r) for r in score_completions(entries, BatchOptions(workers=workers))]
