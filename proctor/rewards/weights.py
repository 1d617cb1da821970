"""Component weights of the reward (design.md section 3).

Defaults sum to 1.0. ``public_tests`` and ``hidden_tests`` are *credit* weights
(relative to the baseline); the others are *quality* weights, scaled by progress.
Hidden outweighs public because it measures generalisation.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: Components in the fixed order of every record.
COMPONENTS: tuple[str, ...] = (
    "compiled",
    "public_tests",
    "hidden_tests",
    "mutation_score",
    "static_analysis",
    "performance",
)
CREDIT_COMPONENTS: tuple[str, ...] = ("public_tests", "hidden_tests")
QUALITY_COMPONENTS: tuple[str, ...] = (
    "compiled", "mutation_score", "static_analysis", "performance"
)
#: The suite each credit component measures.
SUITE_OF: dict[str, str] = {"public_tests": "public", "hidden_tests": "hidden"}


class MessageWeights(BaseModel):
    """Penalty weights of the checks of the agent's message (task.toml ``[weights.message]``;
    :mod:`proctor.rewards.message_checks`): each is charged once when its kind of finding
    is there. Small by default: the patch's measurements decide the reward; a false claim
    also fails the gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    false_claim: float = Field(0.20, ge=0)
    garbage: float = Field(0.05, ge=0)
    fidelity: float = Field(0.05, ge=0)

    def penalty_weights(self) -> dict[str, float]:
        """Penalty indicator name (``message_<check>``) -> weight."""
        return {f"{MESSAGE_PENALTY_PREFIX}{name}": float(getattr(self, name))
                for name in MessageWeights.model_fields}


#: Penalty indicators of the message checks are named ``message_<check>``.
MESSAGE_PENALTY_PREFIX = "message_"


class Weights(BaseModel):
    """Non-negative weight per component; ``performance`` is 0 unless a task declares a
    benchmark. ``message``: the penalty weights of the message checks (not components)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compiled: float = Field(0.10, ge=0)
    public_tests: float = Field(0.25, ge=0)
    hidden_tests: float = Field(0.35, ge=0)
    mutation_score: float = Field(0.20, ge=0)
    static_analysis: float = Field(0.10, ge=0)
    performance: float = Field(0.0, ge=0)
    message: MessageWeights = MessageWeights()

    def as_dict(self) -> dict[str, float]:
        """Component name -> weight, for every name of :data:`COMPONENTS` in that order."""
        return {name: float(getattr(self, name)) for name in COMPONENTS}


#: Penalty weights for subtler cheating (each times an indicator in 0..1).
#: ``suspicious_code`` (design.md section 3): penalty-severity findings
#: of :mod:`proctor.harness.tamper.suspicious_code` in code the patch adds to non-test files.
PENALTY_WEIGHTS: dict[str, float] = {
    "tests_weakened": 0.20,
    "reference_data_altered": 0.15,
    "visible_only": 0.10,
    "suspicious_code": 0.20,
}

#: Cap of the diff-size cost, and its rate per changed line (added + removed).
DIFF_COST_CAP = 0.10
DIFF_COST_PER_LINE = 0.0005
