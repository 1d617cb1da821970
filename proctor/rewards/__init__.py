"""Part 4 of the design, the reward: a pure function of the measurements. The component
scores, the weights (``task.toml`` ``[weights]``), the total with its penalties, and the
PASS / WARN / FAIL gate verdict. Nothing here runs code or reads files."""

from __future__ import annotations

from proctor.rewards.components import diff_cost, static_score, target_score
from proctor.rewards.gate import gate_verdict
from proctor.rewards.reward import INTEGRITY_VIOLATION_REWARD, compute_reward
from proctor.rewards.weights import COMPONENTS, Weights

__all__ = [
    "COMPONENTS", "INTEGRITY_VIOLATION_REWARD", "Weights", "compute_reward", "diff_cost",
    "gate_verdict", "static_score", "target_score"
]
