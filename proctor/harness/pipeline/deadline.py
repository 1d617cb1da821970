"""The per-patch deadline (``[timeouts] per_patch``) and who is to blame when it passes.

Pure bookkeeping on a clock: no sandbox, no I/O. The executor asks it for each step's
timeout, marks the steps that run or read what the patch brought (:meth:`Deadline.patch_code`)
and, when the deadline keeps a step from running or cuts it short, asks it who ran the
clock out (:meth:`Deadline.ran_out`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from proctor.errors import InfraError
from proctor.sandbox import KILLERS_WAIT_SLACK_S

#: A step is not started with less than this many seconds left: it could do nothing useful
#: in them (a sandbox command alone costs a tenth of that), and each such step would still
#: cost its container overhead after the deadline.
MIN_STEP_S = 1.0
#: Note of a component the deadline kept from running or cut short, when the patch's own
#: code used the time (its value is then 0.0, or its tests count as failed).
NOT_RUN_NOTE = "not run: per-patch deadline"


class Deadline:
    """The per-patch deadline: ``score()`` returns within ``per_patch`` seconds (plus the
    teardown of its sandboxes and the kill grace of the step the deadline ended; the
    executor promises ``per_patch + 10`` s), whatever the patch does.

    The clock starts with the pipeline. Task preparation (the baseline phase: sandbox
    backend, environment, the baseline and the image's module list, each computed once per
    task and cached) is not counted (:meth:`exclude`); everything after it is.

    Every step's timeout is ``min(its own timeout, what is left)`` (:meth:`budget`), and a
    step with less than :data:`MIN_STEP_S` left is not started (:meth:`can_start`): no
    floor, so after the deadline no step still takes a second plus its container overhead.

    The rule when the deadline keeps a step from running or cuts it short (its timeout was
    the deadline's, shorter than its own, and it ran out): who ran the clock out decides.
    The time since the clock started is split in two: the **patch's**, while at least one
    step that runs or reads what the patch brought was running in some sandbox (file
    checks, public and hidden suites, the mutation step, the benchmark, the kills of what
    they left behind; :meth:`patch_code`), and the **harness's**, the rest (sandbox
    creation, the copy of the repo and ``git apply``, tamper checks, host work). Time
    during which both ran counts as the patch's, so nothing the patch's code does can
    make the harness look slow.

    * The patch's share is the larger: its own code consumed the time, an honest failure,
      scored. Tests that did not run count as failed; a component that could still change
      the reward is 0.0 with the note :data:`NOT_RUN_NOTE`, never null (a null re-shares
      its weight and raises the reward); never ``status: error``.
    * Otherwise the harness's own operations ran the clock out: :class:`InfraError`
      (retryable), not the agent's failure.
    """

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = float(seconds)
        self._clock = clock
        self._start = clock()
        self.end = self._start + self.seconds
        self._lock = threading.Lock()
        self._running = 0  # patch-code steps running now, over every thread
        self._since = 0.0  # when the first of them started
        self._patch_s = 0.0  # patch-code time of the intervals already closed

    def exclude(self, seconds: float) -> None:
        """Do not count ``seconds`` just spent (task preparation): the deadline moves on."""
        with self._lock:
            self._start += seconds
            self.end += seconds

    def left(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self.end - self._clock())

    def budget(self, step: float) -> float:
        """A step's timeout: ``min(step, what is left)``, 0.0 once the deadline passed."""
        return min(float(step), self.left())

    def can_start(self, need: float = MIN_STEP_S) -> bool:
        """At least ``need`` seconds are left: a step may start."""
        return self.left() >= need

    @staticmethod
    def capped(step: float, given: float) -> bool:
        """The deadline, not the step's own timeout ``step``, bounded a step given ``given``
        seconds. Pure."""
        return given < step

    @contextmanager
    def patch_code(self) -> Iterator[None]:
        """``with deadline.patch_code():`` around a step that runs or reads what the patch
        brought: its wall time is the patch's (see the class docstring). Thread-safe;
        nested and concurrent steps count once."""
        with self._lock:
            if self._running == 0:
                self._since = self._clock()
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._patch_s += self._clock() - self._since

    def shares(self) -> tuple[float, float]:
        """(the patch's seconds, the harness's seconds) since the clock started."""
        with self._lock:
            now = self._clock()
            patch = self._patch_s + (now - self._since if self._running else 0.0)
            return patch, max(0.0, now - self._start - patch)

    def ran_out(self, step: str, *, cut: bool = False) -> str:
        """The deadline kept ``step`` from running (or, ``cut``, cut it short): returns the
        note to record when the patch's code used the larger share of the time.

        Raises:
            InfraError: the harness's own operations used the larger share (retryable).
        """
        patch, harness = self.shares()
        if harness >= patch:
            raise InfraError(
                f"per-patch deadline ({self.seconds:g} s) passed in the harness's own "
                f"operations ({harness:.1f} s of sandbox creation, copies and checks, "
                f"{patch:.1f} s of the patch's code) before {step} could "
                f"{'finish' if cut else 'run'}")
        how = "cut short" if cut else "not started"
        return (f"{NOT_RUN_NOTE} ({step} {how}: {patch:.1f} s of the patch's code, "
                f"{harness:.1f} s of the harness's own operations)")


def mutation_budgets(left: float, timeout_s: float, per_suite: float) -> tuple[float, float]:
    """(the mutation step's own timeout, what it may wait for the public suite's killers)
    with ``left`` seconds of the deadline left: nominally ``timeout_s`` (copy, generation,
    runner) and ``per_suite`` + :data:`KILLERS_WAIT_SLACK_S`; capped so that the two
    together (the runner's whole time) end within ``left``. Pure."""
    timeout = max(0.0, min(float(timeout_s), left))
    wait = max(0.0, min(per_suite + KILLERS_WAIT_SLACK_S, left - timeout))
    return timeout, wait


def file_check_budgets(left: float, compile_s: float, static_s: float, restore_s: float
                       ) -> tuple[float, float, float]:
    """Timeouts of the file checks' command (compile check, static analysis, restore of the
    public tests: one after the other) with ``left`` seconds left: each its own, capped at
    0.4, 0.4 and 0.2 of what is left so that together they end within it. Pure."""
    return min(compile_s, 0.4 * left), min(static_s, 0.4 * left), min(restore_s, 0.2 * left)
