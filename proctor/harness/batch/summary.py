"""Figures of a finished (or running) batch, from its records alone (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from proctor.record import RewardRecord


def is_violation(rec: RewardRecord) -> bool:
    """Cheating caught: integrity violation or a flipped tripwire (reward -1.0)."""
    return rec.status == "scored" and (rec.integrity.violated or rec.flags.tripwire)


@dataclass
class TaskFigures:
    """Per task: counts, mean reward over scored records (None when none scored)."""

    task_id: str
    rollouts: int = 0
    scored: int = 0
    errors: int = 0
    violations: int = 0
    reward_sum: float = 0.0

    @property
    def mean_reward(self) -> float | None:
        """Mean reward of the task's scored records; None when none was scored."""
        return self.reward_sum / self.scored if self.scored else None


@dataclass
class BatchSummary:
    """Whole-batch figures. Rates are fractions (0..1) of all records; ``slowest`` holds
    (seconds, rollout_id, task_id) of the slowest records measured (cache hits excluded)."""

    total: int = 0
    scored: int = 0
    errors: int = 0
    violations: int = 0
    cache_hits: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, TaskFigures] = field(default_factory=dict)
    slowest: list[tuple[float, str, str]] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        """Error records as a fraction (0..1) of all records; 0.0 for an empty batch."""
        return self.errors / self.total if self.total else 0.0

    @property
    def violation_rate(self) -> float:
        """Records that caught cheating (:func:`is_violation`) as a fraction (0..1) of all
        records; 0.0 for an empty batch."""
        return self.violations / self.total if self.total else 0.0


def summarize(records: Iterable[RewardRecord], slowest: int = 5) -> BatchSummary:
    """Count, average and rank ``records`` (pure)."""
    s = BatchSummary()
    kinds: dict[str, int] = defaultdict(int)
    timed = []
    for rec in records:
        s.total += 1
        t = s.tasks.setdefault(rec.task_id, TaskFigures(rec.task_id))
        t.rollouts += 1
        if rec.status == "error":
            s.errors += 1
            t.errors += 1
            kinds[rec.error.kind if rec.error else "unknown"] += 1
        else:
            s.scored += 1
            t.scored += 1
            t.reward_sum += rec.reward or 0.0
        if is_violation(rec):
            s.violations += 1
            t.violations += 1
        if rec.timing.get("cache_hit"):
            s.cache_hits += 1
        else:
            timed.append((rec.timing.get("total_s", 0.0), rec.rollout_id, rec.task_id))
    s.error_kinds = dict(kinds)
    s.slowest = sorted(timed, reverse=True)[:slowest]
    return s
