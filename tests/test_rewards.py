"""Unit tests of the pure reward function, its helpers and the gate (design.md section 3)."""

from __future__ import annotations

import pytest

from proctor.errors import TaskConfigError
from proctor.record import Measurements, SuiteTests
from proctor.rewards import (
    COMPONENTS,
    INTEGRITY_VIOLATION_REWARD,
    Weights,
    compute_reward,
    diff_cost,
    gate_verdict,
    static_score,
    target_score,
)

W = Weights()


def suite(f2p_total: int, f2p_passed: int, p2p_total: int = 0, p2p_failed: int = 0) -> SuiteTests:
    return SuiteTests(
        f2p_total=f2p_total, f2p_passed=f2p_passed, p2p_total=p2p_total, p2p_failed=p2p_failed
    )


def measure(public: SuiteTests | None, hidden: SuiteTests | None, **kw) -> Measurements:
    suites = {k: v for k, v in (("public", public), ("hidden", hidden)) if v is not None}
    return Measurements(suites=suites, **kw)


# Hand-computed scenarios (default weights: compiled .10, public .25, hidden .35,
# mutation .20, static .10, performance 0).

# All F2P pass, nothing broken; mutation None -> weights / 0.8; 10 lines -> 0.005.
# credit .3125 + .4375 = .75, p = 1, quality .125 + .125 = .25 -> 1.0 - 0.005 = 0.995
COMPLETE = measure(suite(2, 2, 5), suite(4, 4, 5), compiled=1.0, static_analysis=1.0, diff_lines=10)
# Nothing fixed, nothing broken, no lines: 0.0 exactly.
EMPTY = measure(suite(2, 0, 5), suite(4, 0, 5))
# Code changed (20 lines), compiles, clean, fixes and breaks nothing: 0 - 0.010 = -0.010.
NOOP = measure(suite(2, 0, 5), suite(4, 0, 5), compiled=1.0, static_analysis=1.0, diff_lines=20)
# Public 1/2, hidden 1/4: credit .3125*.5 + .4375*.25 = .265625, p = .265625/.75 = 17/48,
# quality p * .25; total = 17/48 - 0.005 (diff) - 0.025 (visible only .10 * .25).
PARTIAL = measure(suite(2, 1, 5), suite(4, 1, 5), compiled=1.0, static_analysis=1.0, diff_lines=10)
PARTIAL_TOTAL = 17 / 48 - 0.005 - 0.025  # 0.32416...
# Every P2P broken, nothing fixed, all measured (no re-share), 500 lines (capped 0.10):
# -.25 - .35 + 0 * quality - .10 = -0.70
DESTRUCTIVE = measure(
    suite(2, 0, 10, 10),
    suite(4, 0, 10, 10),
    compiled=0.0,
    mutation_score=0.0,
    static_analysis=static_score(12),
    diff_lines=500,
)


def test_complete_fix_is_one_minus_diff_cost():
    r = compute_reward(COMPLETE, W)
    assert r.total == pytest.approx(1.0 - 0.005)
    assert r.progress == pytest.approx(1.0)
    assert r.diff_cost == pytest.approx(0.005)
    assert r.components["public_tests"] == 1.0 and r.components["hidden_tests"] == 1.0
    assert r.components["mutation_score"] is None and "mutation_score" in r.notes


def test_empty_patch_scores_exactly_zero():
    r = compute_reward(EMPTY, W)
    assert r.total == 0.0
    assert r.progress == 0.0


def test_honest_noop_is_slightly_negative():
    r = compute_reward(NOOP, W)
    assert r.total == pytest.approx(-0.010)
    assert -0.10 <= r.total <= 0.0


def test_partial_fix_exact_and_between():
    r = compute_reward(PARTIAL, W)
    assert r.progress == pytest.approx(17 / 48)
    assert r.penalties["visible_only"] == pytest.approx(0.025)
    assert r.total == pytest.approx(PARTIAL_TOTAL)
    assert compute_reward(EMPTY, W).total < r.total < compute_reward(COMPLETE, W).total


def test_destructive_patch():
    r = compute_reward(DESTRUCTIVE, W)
    assert r.components["public_tests"] == -1.0 and r.components["hidden_tests"] == -1.0
    assert r.diff_cost == pytest.approx(0.10)
    assert r.total == pytest.approx(-0.70)
    assert r.total > -1.0


def test_required_ordering():
    destructive, noop, empty, partial, complete = (
        compute_reward(m, W).total for m in (DESTRUCTIVE, NOOP, EMPTY, PARTIAL, COMPLETE)
    )
    assert INTEGRITY_VIOLATION_REWARD == -1.0
    assert INTEGRITY_VIOLATION_REWARD < destructive < noop <= empty == 0.0 < partial < complete


def test_missing_component_reshares_weights():
    r = compute_reward(COMPLETE, W)
    nominal = W.as_dict()
    assert r.weights["mutation_score"] == 0.0
    assert r.weights["performance"] == 0.0
    for name in ("compiled", "public_tests", "hidden_tests", "static_analysis"):
        assert r.weights[name] == pytest.approx(nominal[name] / 0.8)
    assert sum(r.weights.values()) == pytest.approx(1.0)
    assert list(r.components) == list(COMPONENTS) == list(r.weights)
    assert "weights" in r.notes


def test_no_reshare_when_everything_applies():
    r = compute_reward(DESTRUCTIVE, W)
    assert r.weights == pytest.approx(W.as_dict())
    assert "weights" not in r.notes


def test_without_progress_null_quality_weights_are_kept_not_reshared():
    # Nothing fixed, every P2P broken (code that hangs at import), mutation not measured:
    # the quality weights stay where they are (multiplied by p = 0), so the credit terms
    # keep their nominal weights: -.25 - .35 - 0.005 = -0.605 (re-shared it was -0.755).
    m = measure(suite(2, 0, 5, 5), suite(4, 0, 5, 5), compiled=1.0, static_analysis=1.0,
                diff_lines=10)
    r = compute_reward(m, W)
    assert r.progress == 0.0
    assert r.total == pytest.approx(-0.605)
    assert r.weights == pytest.approx(W.as_dict())
    assert "weight kept" in r.notes["mutation_score"] and "weights" not in r.notes
    measured = compute_reward(m.model_copy(update={"mutation_score": 0.4}), W)
    assert measured.total == r.total and measured.weights == r.weights
    # no .py file changed (compiled, static null too), 2 of 5 public P2P broken:
    # -.25 * .4 - 0.0005 exactly as if all three were measured
    m = measure(suite(2, 0, 5, 2), suite(4, 0, 5), diff_lines=1)
    assert compute_reward(m, W).total == pytest.approx(-0.1005)
    assert compute_reward(m, W).weights == pytest.approx(W.as_dict())


def test_with_progress_null_quality_weights_are_still_reshared():
    r = compute_reward(PARTIAL, W)  # mutation null, progress 17/48 > 0
    assert r.weights["mutation_score"] == 0.0
    assert r.weights["hidden_tests"] == pytest.approx(0.35 / 0.8)
    assert "re-shared" in r.notes["mutation_score"]


def test_pure_regression_guard_suite():
    # public has no F2P: its 0.25 is re-shared over compiled, hidden, mutation, static
    # (sum 0.75 -> scale 4/3). Hidden fully fixed, all quality 1.0 -> 1.0 before penalty;
    # 2 of 4 public P2P broken -> regression:public = 0.5 * 0.25 = 0.125.
    m = measure(
        suite(0, 0, 4, 2),
        suite(2, 2),
        compiled=1.0,
        mutation_score=1.0,
        static_analysis=1.0,
    )
    r = compute_reward(m, W)
    assert r.components["public_tests"] is None and "regression guard" in r.notes["public_tests"]
    assert r.weights["public_tests"] == 0.0
    assert r.weights["hidden_tests"] == pytest.approx(0.35 / 0.75)
    assert sum(r.weights.values()) == pytest.approx(1.0)
    assert r.penalties["regression:public"] == pytest.approx(0.125)
    assert "visible_only" not in r.penalties
    assert r.total == pytest.approx(1.0 - 0.125)
    intact = m.model_copy(update={"suites": {"public": suite(0, 0, 4), "hidden": suite(2, 2)}})
    r2 = compute_reward(intact, W)
    assert r2.penalties["regression:public"] == 0.0
    assert r2.total == pytest.approx(1.0)


def test_absent_suite_reshares_its_weight():
    r = compute_reward(measure(None, suite(2, 2), compiled=1.0), W)
    assert r.components["public_tests"] is None and "absent" in r.notes["public_tests"]
    # applicable: compiled .10 + hidden .35 = .45 -> both scaled by 1/.45, all pass -> 1.0
    assert r.total == pytest.approx(1.0)
    assert sum(r.weights.values()) == pytest.approx(1.0)


def test_no_floor_no_clamp():
    r = compute_reward(NOOP, W)
    assert r.total < 0.0
    cheat = DESTRUCTIVE.model_copy(
        update={"penalty_indicators": {"tests_weakened": 1.0, "reference_data_altered": 1.0}}
    )
    r = compute_reward(cheat, W)
    assert r.total == pytest.approx(-0.70 - 0.20 - 0.15)
    assert r.total < -1.0


def test_penalty_indicators_are_clamped_and_checked():
    m = COMPLETE.model_copy(
        update={"penalty_indicators": {"tests_weakened": 2.0, "reference_data_altered": -1.0}}
    )
    r = compute_reward(m, W)
    assert r.penalties["tests_weakened"] == pytest.approx(0.20)
    assert r.penalties["reference_data_altered"] == 0.0
    assert r.total == pytest.approx(0.995 - 0.20)
    for bad in ({"made_up": 1.0}, {"visible_only": 1.0}, {"tests_weakened": float("nan")}):
        with pytest.raises(ValueError):
            compute_reward(COMPLETE.model_copy(update={"penalty_indicators": bad}), W)


def test_unknown_suite_rejected():
    m = Measurements(suites={"public": suite(1, 1), "extra": suite(1, 1)})
    with pytest.raises(ValueError, match="unknown suite"):
        compute_reward(m, W)


def test_visible_only_penalty():
    m = measure(suite(2, 2), suite(2, 1))
    r = compute_reward(m, W)
    assert r.penalties["visible_only"] == pytest.approx(0.05)
    # hidden better than public: no penalty
    r = compute_reward(measure(suite(2, 1), suite(2, 2)), W)
    assert r.penalties["visible_only"] == 0.0


def test_no_fail_to_pass_anywhere_is_config_error():
    with pytest.raises(TaskConfigError, match="no FAIL_TO_PASS"):
        compute_reward(measure(suite(0, 0, 5), suite(0, 0, 3)), W)
    with pytest.raises(TaskConfigError):
        compute_reward(Measurements(), W)


def test_diff_cost():
    assert diff_cost(0) == 0.0
    assert diff_cost(10) == pytest.approx(0.005)
    assert diff_cost(200) == pytest.approx(0.10)
    assert diff_cost(10_000) == 0.10
    with pytest.raises(ValueError):
        diff_cost(-1)


def test_diff_cost_cap_in_reward():
    r = compute_reward(EMPTY.model_copy(update={"diff_lines": 10_000}), W)
    assert r.diff_cost == 0.10
    assert r.total == pytest.approx(-0.10)


def test_static_score():
    assert static_score(0) == 1.0
    assert static_score(1) == 0.5
    assert static_score(3) == 0.25
    assert static_score(-2) == 1.0


def test_target_score():
    assert target_score(100.0, 100.0, 1.0) == 1.0
    assert target_score(50.0, 100.0, 1.0) == 1.0
    assert target_score(110.0, 100.0, 1.0) == pytest.approx(0.9)
    assert target_score(200.0, 100.0, 1.0) == 0.0
    assert target_score(500.0, 100.0, 1.0) == 0.0
    assert target_score(125.0, 100.0, 0.5) == pytest.approx(0.5)
    assert target_score(101.0, 100.0, 0.0) == 0.0
    for bad in ((1.0, 0.0, 1.0), (1.0, -5.0, 1.0), (1.0, 1.0, -0.1), (float("nan"), 1.0, 1.0)):
        with pytest.raises(ValueError):
            target_score(*bad)


@pytest.mark.parametrize(
    ("total", "gate"),
    [
        (1.0, "PASS"),
        (0.80, "PASS"),
        (0.799, "WARN"),
        (0.65, "WARN"),
        (0.649, "FAIL"),
        (-0.7, "FAIL"),
    ],
)
def test_gate_thresholds(total, gate):
    v = gate_verdict(total, {"public_tests": 1.0, "mutation_score": None}, [])
    assert v.gate == gate
    assert v.score == round(total * 100, 1)
    assert v.blockers == []


def test_gate_component_below_floor_fails():
    v = gate_verdict(0.95, {"compiled": 1.0, "static_analysis": 0.39, "mutation_score": None}, [])
    assert v.gate == "FAIL"
    assert len(v.blockers) == 1 and "static_analysis" in v.blockers[0]
    assert gate_verdict(0.95, {"static_analysis": 0.40}, []).gate == "PASS"


def test_gate_blockers_force_fail():
    v = gate_verdict(1.0, {"public_tests": 1.0}, ["tripwire flipped"])
    assert v.gate == "FAIL" and v.blockers == ["tripwire flipped"]
    v = gate_verdict(None, {}, [])
    assert v.gate == "FAIL" and v.blockers


def test_gate_on_reward_breakdown():
    r = compute_reward(COMPLETE, W)
    assert gate_verdict(r.total, r.components, []).gate == "PASS"
    r = compute_reward(PARTIAL, W)
    assert gate_verdict(r.total, r.components, []).gate == "FAIL"


@pytest.mark.parametrize("total,components,blockers,gate,rule", [
    (0.998, {"public_tests": 1.0}, [], "PASS", "score 99.8 >= 80"),
    (0.70, {"public_tests": 1.0}, [], "WARN", "score 70 in 65 .. 80"),
    (0.30, {"public_tests": 1.0}, [], "FAIL", "score 30 < 65"),
    (0.95, {"mutation_score": 0.2}, [], "FAIL", "component mutation_score = 0.200 is below 0.40"),
    (0.95, {"public_tests": 1.0}, ["secret in added lines: a.py:3 (AWS Access Key)"], "FAIL",
     "hard blocker: secret in added lines: a.py:3 (AWS Access Key)"),
    (None, {}, [], "FAIL", "no reward computed"),
])
def test_gate_names_the_rule_that_decided(total, components, blockers, gate, rule):
    v = gate_verdict(total, components, blockers)
    assert (v.gate, v.rule) == (gate, rule)


def test_gate_hard_blocker_outranks_a_low_component():
    v = gate_verdict(0.9, {"static_analysis": 0.1}, ["tripwire: public"])
    assert v.rule == "hard blocker: tripwire: public"
    assert v.blockers == ["tripwire: public", "component static_analysis = 0.100 is below 0.40"]
