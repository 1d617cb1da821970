"""Pure helpers that turn raw measurements into component values (design.md section 3).

No I/O, no clocks: each helper maps numbers to a number so stored runs can be regraded.
"""

from __future__ import annotations

import math

from proctor.rewards.weights import DIFF_COST_CAP, DIFF_COST_PER_LINE


def diff_cost(diff_lines: int) -> float:
    """Cost of the size of a change (design.md section 3, ``min(diff_cost, 0.10)``).

    ``diff_lines`` is the number of changed lines (added + removed), ``>= 0``. Returns
    ``DIFF_COST_PER_LINE * diff_lines`` capped at ``DIFF_COST_CAP``: a float in
    ``0 .. DIFF_COST_CAP`` (0.0005 per line, 0.10 from 200 lines on). Raises ``ValueError``
    for a negative count.
    """
    if diff_lines < 0:
        raise ValueError(f"diff_lines must be >= 0, got {diff_lines}")
    return min(DIFF_COST_PER_LINE * diff_lines, DIFF_COST_CAP)


def static_score(new_findings: int) -> float:
    """Static-analysis component from the ruff findings the patch introduces (design.md 2, 3).

    ``new_findings`` is patched minus base findings. Returns ``1 / (1 + new_findings)`` in
    ``(0, 1]``: 1.0 for a clean change, 0.5 for one new finding. A negative count (the patch
    removed more findings than it added) counts as 0 new findings, so scores 1.0.
    """
    return 1.0 / (1.0 + max(0, new_findings))


def target_score(measured: float, target: float, tolerance: float) -> float:
    """Score of a lower-is-better target such as latency or memory (design.md section 3).

    Returns 1.0 when ``measured <= target``, falls linearly to 0.0 at
    ``target * (1 + tolerance)`` and stays 0.0 beyond; the result is in ``0 .. 1``. Never
    ``1 - measured/target``, which gives 0 for exactly meeting the target. Examples with
    ``tolerance=1.0``: measured == target -> 1.0, 10% over -> 0.9, double -> 0.0. With
    ``tolerance=0`` any excess scores 0.0.

    Raises ``ValueError`` when ``target <= 0``, ``tolerance < 0`` or any input is NaN.
    """
    if any(math.isnan(x) for x in (measured, target, tolerance)):
        raise ValueError(f"NaN in target_score({measured}, {target}, {tolerance})")
    if target <= 0:
        raise ValueError(f"target must be positive, got {target}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if measured <= target:
        return 1.0
    if tolerance == 0:
        return 0.0
    return max(0.0, 1.0 - (measured - target) / (target * tolerance))
