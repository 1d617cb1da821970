"""Gate verdict for human use (design.md section 3). Pure: no I/O."""

from __future__ import annotations

from proctor.record import Verdict

PASS_AT = 80.0
WARN_AT = 65.0
#: An applicable component below this value fails the gate on its own.
COMPONENT_FLOOR = 0.40
#: Components that count for the floor rule. The style tier of static analysis is only
#: reported (it is not a component), so every component here is a scored one.
FLOORED_COMPONENTS = ("compiled", "public_tests", "hidden_tests", "mutation_score",
                      "static_analysis", "performance")


def gate_verdict(
    total: float | None,
    components: dict[str, float | None],
    blockers: list[str],
) -> Verdict:
    """Turn a reward total into a PASS / WARN / FAIL verdict (design.md section 3).

    ``score = round(total * 100, 1)`` (about -100 .. 100; not clamped). Rules, in the order
    they are checked (``Verdict.rule`` names the first that decided):

    1. a hard blocker given by the caller (integrity violation, tripwire, secret in added
       lines) -> FAIL;
    2. no reward computed (``total=None``) -> FAIL;
    3. an applicable (non-None) component of :data:`FLOORED_COMPONENTS` below 0.40
       (values about -1 .. 1) -> FAIL;
    4. the score: PASS >= 80, WARN 65 .. 79.9, FAIL < 65.

    ``blockers`` lists the given ones first, then the component ones.
    """
    found = list(blockers)
    score = 0.0 if total is None else round(total * 100, 1)
    low = [f"component {name} = {value:.3f} is below {COMPONENT_FLOOR:.2f}"
           for name, value in components.items()
           if name in FLOORED_COMPONENTS and value is not None and value < COMPONENT_FLOOR]
    if blockers:
        return Verdict(score=score, gate="FAIL", blockers=found + low,
                       rule=f"hard blocker: {blockers[0]}")
    if total is None:
        return Verdict(score=score, gate="FAIL", blockers=["no reward computed"],
                       rule="no reward computed")
    if low:
        return Verdict(score=score, gate="FAIL", blockers=low, rule=low[0])
    if score >= PASS_AT:
        return Verdict(score=score, gate="PASS", rule=f"score {score:g} >= {PASS_AT:g}")
    if score >= WARN_AT:
        return Verdict(score=score, gate="WARN",
                       rule=f"score {score:g} in {WARN_AT:g} .. {PASS_AT:g}")
    return Verdict(score=score, gate="FAIL", rule=f"score {score:g} < {WARN_AT:g}")
