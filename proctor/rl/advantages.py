"""GRPO-style group advantages that cheating cannot game (pure).

Per group (``group_id``; records without one are grouped by ``task_id``):

* **error** records (``status == "error"``): advantage ``None``, masked. Harness noise is
  never a learning signal.
* **flagged** records (``status == "scored"`` and ``flags.exclude_from_advantage``, or an
  integrity violation / tripwire): they do not enter the group's mean and std, so a cheat's
  -1.0 cannot drag the baseline down and make honest failures look good.
* **clean** records: ``(reward - mean) / (std + eps)`` over the clean rewards (sample std,
  as verl and TRL compute it; a group with fewer than two clean rollouts or no spread uses
  ``std = 1``, so a lone rollout gets 0).

``policy="penalize"`` (default): a flagged record keeps its negative signal:
``min((reward - mean) / std, -1, every clean advantage in the group)``, floored at
``min(-max_penalty, lowest clean advantage)``; so it is never above an honest rollout of its
group and always at least one std below the mean. ``policy="exclude"``: advantage 0.0 (no
gradient from it either way).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from proctor.record import RewardRecord

POLICIES = ("penalize", "exclude")


def is_flagged(rec: RewardRecord) -> bool:
    """A scored record that must not shape its group's baseline."""
    return rec.status == "scored" and (rec.flags.exclude_from_advantage
                                       or rec.integrity.violated or rec.flags.tripwire)


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 1.0
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return mean, std if std > 1e-8 else 1.0


def group_advantages(records: Sequence[RewardRecord], policy: str = "penalize",
                     eps: float = 1e-6, max_penalty: float = 5.0) -> list[float | None]:
    """Advantages aligned with ``records`` (float, or None for masked error records).

    Raises:
        ValueError: unknown ``policy``.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    groups: dict[tuple, list[int]] = {}
    for i, rec in enumerate(records):
        key = ("group", rec.group_id) if rec.group_id is not None else ("task", rec.task_id)
        groups.setdefault(key, []).append(i)
    out: list[float | None] = [None] * len(records)
    for members in groups.values():
        clean = [i for i in members if records[i].status == "scored"
                 and not is_flagged(records[i])]
        flagged = [i for i in members if is_flagged(records[i])]
        mean, std = _mean_std([records[i].reward for i in clean])
        for i in clean:
            out[i] = (records[i].reward - mean) / (std + eps)
        lowest = min((out[i] for i in clean), default=0.0)
        for i in flagged:
            if policy == "exclude":
                out[i] = 0.0
                continue
            raw = (records[i].reward - mean) / (std + eps)
            out[i] = max(min(raw, -1.0, lowest), min(-max_penalty, lowest))
    return out
