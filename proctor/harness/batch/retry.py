"""Retry policy for infrastructure errors (design.md section 6: never scored, never learned).

A record with ``status == "error"`` and ``error.retryable`` (engine gone, container died) is
attempted again, up to ``retries`` more times with exponential backoff. After the last
attempt the record becomes ``error`` with kind ``blocked`` and the last cause. Anything
else is final at once: a scored record (whatever its reward, including honest failures such
as ``did_not_apply``) and non-retryable errors (``task_config``, ``image_missing``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from proctor.record import ErrorInfo, RewardRecord

BLOCKED = "blocked"


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` extra attempts after the first; waits ``backoff_s * 2**i`` seconds
    (capped at ``max_backoff_s``) before retry ``i`` (0-based)."""

    retries: int = 3
    backoff_s: float = 2.0
    max_backoff_s: float = 30.0

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry ``retry`` (0-based): ``backoff_s * 2**retry``, at
        most ``max_backoff_s``."""
        return min(self.backoff_s * (2 ** retry), self.max_backoff_s)


def is_retryable(rec: RewardRecord) -> bool:
    """Whether ``rec`` is an error record whose error may pass on another attempt
    (infrastructure, not the task or the patch)."""
    return rec.status == "error" and rec.error is not None and rec.error.retryable


def with_retries(attempt: Callable[[], RewardRecord], policy: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep) -> RewardRecord:
    """Call ``attempt()`` until its record is final (see the module docstring).

    Returns the final record; ``timing["attempts"]`` says how many calls it took when more
    than one. A record still retryable after ``1 + policy.retries`` calls is returned as
    ``error`` kind ``blocked`` (``retryable=False``), its message naming the attempts and the
    last cause.
    """
    rec = attempt()
    calls = 1
    while is_retryable(rec) and calls <= policy.retries:
        sleep(policy.delay(calls - 1))
        rec = attempt()
        calls += 1
    if calls > 1:
        rec.timing["attempts"] = float(calls)
    if is_retryable(rec):
        cause = rec.error
        rec.error = ErrorInfo(
            kind=BLOCKED, retryable=False,
            message=f"infrastructure error persisted after {calls} attempts; last: "
                    f"{cause.kind}: {cause.message}")
    return rec
