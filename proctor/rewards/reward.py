"""The reward: a pure function of the recorded measurements (design.md section 3).

No I/O, no clocks, no rounding: stored :class:`~proctor.record.Measurements` can be
regraded at any time. An integrity violation never reaches this function; the executor
records :data:`INTEGRITY_VIOLATION_REWARD` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from proctor.errors import TaskConfigError
from proctor.record import Measurements, SuiteTests
from proctor.rewards.components import diff_cost as _diff_cost
from proctor.rewards.weights import (
    COMPONENTS,
    CREDIT_COMPONENTS,
    PENALTY_WEIGHTS,
    QUALITY_COMPONENTS,
    SUITE_OF,
    Weights,
)

#: Fixed reward of a patch that touches a forbidden path (or flips a tripwire).
INTEGRITY_VIOLATION_REWARD = -1.0

_VISIBLE_ONLY = "visible_only"


@dataclass(frozen=True)
class RewardBreakdown:
    """Every input and intermediate of the total, so it can be recomputed by hand.

    ``components``: keys = ``COMPONENTS`` in order; ``public_tests`` / ``hidden_tests`` hold
    ``c_s = f2p_s - broken_s`` (-1 .. 1), or None when the suite is absent, has no tests, or
    is a pure regression guard (no FAIL_TO_PASS test; its breakage is then the penalty
    ``regression:<suite>``). Quality components are 0 .. 1 or None (not applicable).
    ``weights``: effective weights the total used (0.0 where the component did not apply,
    but a None quality component keeps its weight when progress is 0); they sum to the sum
    of the nominal weights. ``penalties``: name -> amount charged
    (already times its weight). ``diff_cost``: 0 .. 0.10. ``progress``: p in 0 .. 1.
    ``notes``: component or ``"weights"`` -> why it is None / how weights were re-shared.
    """

    total: float
    components: dict[str, float | None]
    weights: dict[str, float]
    penalties: dict[str, float]
    diff_cost: float
    progress: float
    notes: dict[str, str]


def _suite_summary(name: str, suite: SuiteTests | None) -> str:
    if suite is None:
        return f"{name}: absent"
    return f"{name}: {suite.f2p_total} FAIL_TO_PASS, {suite.p2p_total} PASS_TO_PASS"


def _indicated(indicators: dict[str, float], weights: Weights) -> dict[str, float]:
    """Penalty name -> its weight times its indicator clamped to 0 .. 1.

    Raises:
        ValueError: ``visible_only``, an unknown name, or a NaN indicator.
    """
    penalty_weights = {**PENALTY_WEIGHTS, **weights.message.penalty_weights()}
    out = {}
    for name, value in indicators.items():
        if name == _VISIBLE_ONLY:
            raise ValueError("visible_only is derived from the suites; do not pass it")
        if name not in penalty_weights:
            raise ValueError(f"unknown penalty indicator {name!r}")
        if math.isnan(value):
            raise ValueError(f"penalty indicator {name!r} is NaN")
        out[name] = penalty_weights[name] * min(1.0, max(0.0, value))
    return out


def compute_reward(m: Measurements, weights: Weights) -> RewardBreakdown:  # noqa: C901
    """Compute the reward of one measured patch (design.md section 3).

    ``total = sum_s w_s * c_s + p * sum_q w_q * value_q - diff_cost - penalties`` over the
    credit suites s (those with FAIL_TO_PASS tests) and the applicable quality components q
    (measurement not None), with ``c_s = f2p_s - broken_s`` and ``p`` the credit-weighted
    mean of ``f2p_s``. Weights of components that do not apply (None measurement, absent
    or empty suite, pure regression guard) are re-shared over the applicable ones in
    proportion, so the effective weights sum to the nominal sum; except that with progress
    ``p = 0`` (no FAIL_TO_PASS test passes in any suite) a None *quality* component keeps
    its weight: the quality terms are multiplied by 0, so no value of theirs can matter,
    and re-sharing their weight over the (then zero or negative) credit terms would make a
    component's absence change the total. A measured and an unmeasured quality component
    then give a bit-identical total, so the executor need not measure them. A pure
    regression guard suite is charged ``broken_s * nominal_w_s`` as ``regression:<suite>``.
    Penalties: ``PENALTY_WEIGHTS[name] * clamp(indicator, 0, 1)`` for each of
    ``m.penalty_indicators`` (the message checks' ``message_<check>`` indicators weigh
    ``weights.message``), plus ``visible_only`` = ``0.10 * max(0, f2p_public -
    f2p_hidden)`` when both suites have FAIL_TO_PASS tests. No floor, no clamp: the total
    is about -1.0 .. 1.0; a judge's veto caps it at ``m.reward_cap``.

    Raises :class:`~proctor.errors.TaskConfigError` when no suite has a FAIL_TO_PASS test
    (never free points), and ``ValueError`` for an unknown suite or penalty name, a NaN
    indicator, or a ``visible_only`` indicator (that one is derived from the suites).
    """
    unknown = sorted(set(m.suites) - set(SUITE_OF.values()))
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown}; expected {sorted(SUITE_OF.values())}")

    nominal = weights.as_dict()
    components: dict[str, float | None] = dict.fromkeys(COMPONENTS)
    notes: dict[str, str] = {}
    penalties: dict[str, float] = {}
    f2p: dict[str, float] = {}  # suite -> f2p_s, only suites with FAIL_TO_PASS tests

    for comp in CREDIT_COMPONENTS:
        suite_name = SUITE_OF[comp]
        suite = m.suites.get(suite_name)
        if suite is None:
            notes[comp] = f"suite {suite_name!r} absent: weight re-shared"
        elif suite.f2p_total == 0 and suite.p2p_total == 0:
            notes[comp] = f"suite {suite_name!r} has no tests: weight re-shared"
        elif suite.f2p_total == 0:
            penalties[f"regression:{suite_name}"] = suite.broken * nominal[comp]
            notes[comp] = (
                f"suite {suite_name!r} has no FAIL_TO_PASS test (pure regression guard): "
                f"weight re-shared, broken={suite.broken:g} charged as regression:{suite_name}"
            )
        else:
            f2p[suite_name] = suite.f2p_passed / suite.f2p_total
            components[comp] = f2p[suite_name] - suite.broken

    if not f2p:
        detail = "; ".join(_suite_summary(s, m.suites.get(s)) for s in SUITE_OF.values())
        raise TaskConfigError(f"task has no FAIL_TO_PASS test: {detail}")

    # p = 0 exactly when no credit suite has a FAIL_TO_PASS test passing (whatever the
    # weights): the quality terms are then multiplied by 0 and their weights stay put.
    no_progress = all(v == 0 for v in f2p.values())
    for comp in QUALITY_COMPONENTS:
        components[comp] = getattr(m, comp)
        if components[comp] is None:
            reason = m.notes.get(comp) or "not measured"
            notes[comp] = (f"{reason}: weight kept (progress 0: the quality terms are "
                           f"multiplied by 0, nothing to re-share)" if no_progress
                           else f"{reason}: weight re-shared")

    applicable = [c for c in COMPONENTS if components[c] is not None
                  or (no_progress and c in QUALITY_COMPONENTS)]
    nominal_sum = sum(nominal.values())
    applicable_sum = sum(nominal[c] for c in applicable)
    scale = nominal_sum / applicable_sum if applicable_sum > 0 else 0.0
    eff = {c: (nominal[c] * scale if c in applicable else 0.0) for c in COMPONENTS}
    if applicable_sum <= 0:
        notes["weights"] = "every applicable component has weight 0: nothing to re-share"
    elif scale != 1.0:
        dropped = [c for c in COMPONENTS if c not in applicable and nominal[c] > 0]
        notes["weights"] = (
            f"weights of {', '.join(dropped)} re-shared: applicable weights scaled by "
            f"{nominal_sum:g}/{applicable_sum:g}"
        )

    credit = [c for c in CREDIT_COMPONENTS if components[c] is not None]
    credit_w = sum(eff[c] for c in credit)
    if credit_w > 0:
        progress = sum(eff[c] * f2p[SUITE_OF[c]] for c in credit) / credit_w
    else:  # every credit weight is 0: plain mean
        progress = sum(f2p.values()) / len(f2p)

    penalties.update(_indicated(m.penalty_indicators, weights))
    if "public" in f2p and "hidden" in f2p:
        gap = max(0.0, f2p["public"] - f2p["hidden"])
        penalties[_VISIBLE_ONLY] = PENALTY_WEIGHTS[_VISIBLE_ONLY] * gap

    cost = _diff_cost(m.diff_lines)
    values = {c: v for c, v in components.items() if v is not None}
    credit_part = sum(eff[c] * values[c] for c in credit)
    quality_part = sum(eff[c] * values[c] for c in QUALITY_COMPONENTS if c in values)
    total = credit_part + progress * quality_part - cost - sum(penalties.values())
    if m.reward_cap is not None:  # a judge's veto: it can lower a reward, never raise one
        total = min(total, m.reward_cap)
    return RewardBreakdown(
        total=total,
        components=components,
        weights=eff,
        penalties=penalties,
        diff_cost=cost,
        progress=progress,
        notes=notes,
    )
