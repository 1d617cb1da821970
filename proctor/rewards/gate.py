"""Gate verdict for human use (DESIGN section 3). Pure: no I/O."""

from __future__ import annotations

from proctor.record import Verdict

PASS_AT = 80.0
WARN_AT = 65.0
#: An applicable component below this value fails the gate on its own.
COMPONENT_FLOOR = 0.40


def gate_verdict(
    total: float | None,
    components: dict[str, float | None],
    blockers: list[str],
) -> Verdict:
    """Turn a reward total into a PASS / WARN / FAIL verdict (DESIGN section 3).

    ``score = round(total * 100, 1)`` (about -100 .. 100; not clamped). On that score:
    PASS >= 80, WARN 65 .. 79.9, FAIL < 65. Then, each applicable (non-None) component of
    ``components`` (values about -1 .. 1) below 0.40 adds a blocker naming it, and any
    blocker (the given ones: integrity violation, tripwire, secret in added lines; or a
    component one) forces FAIL. ``total=None`` (nothing was scored) gives score 0.0, FAIL
    and a blocker saying so. The returned ``blockers`` lists the given ones first.
    """
    found = list(blockers)
    if total is None:
        score = 0.0
        found.append("no reward computed")
    else:
        score = round(total * 100, 1)
    for name, value in components.items():
        if value is not None and value < COMPONENT_FLOOR:
            found.append(f"component {name} = {value:.3f} is below {COMPONENT_FLOOR:.2f}")
    if found or score < WARN_AT:
        gate = "FAIL"
    elif score < PASS_AT:
        gate = "WARN"
    else:
        gate = "PASS"
    return Verdict(score=score, gate=gate, blockers=found)
