"""A cap on concurrent sandboxes, so that trainers' thread pools queue instead of
overloading the engine.

:func:`proctor.score` holds one slot from its task-preparation phase to the removal of its
sandboxes (a second slot, taken only when one is free at once, for the overlapping second
sandbox); the batch's task preparation (the baseline's sandboxes) holds one too. Every
adapter (verl, TRL, OpenRLHF, ``proctor serve``, ``proctor batch``) goes through them.

The cap is process-wide (threads queue in arrival order on a condition) and machine-wide
for the processes sharing one ``$PROCTOR_CACHE_DIR``: a held slot is an exclusive
``flock`` on one of the files ``slots/slot-<i>.lock`` (``i < max``) in that directory, so
Ray workers or several trainers on one host share it. Processes with different maxima
share ``max(their maxima)`` slots. A lock is released by the kernel when its process dies.

Default maximum: the number of CPUs this process may run on (``os.sched_getaffinity``);
``$PROCTOR_MAX_SANDBOXES`` (a whole number >= 1) overrides it, :func:`configure` overrides
both (``proctor serve --workers``).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from proctor import cache_dirs
from proctor.errors import InfraError, ProctorError
from proctor.harness.pipeline import cancel

ENV = "PROCTOR_MAX_SANDBOXES"
#: How often a waiter looks again for a slot file freed by another process, or for a
#: cancellation (s).
POLL_S = 0.05


class SlotConfigError(ProctorError):
    """``$PROCTOR_MAX_SANDBOXES`` or :func:`configure`'s value is not a whole number >= 1."""

    kind = "slot_config"


class SlotTimeout(InfraError):
    """No slot became free within :func:`acquire`'s ``timeout``."""

    kind = "slot_timeout"


_cond = threading.Condition()
_max: int | None = None  # None: from the environment on first use
_reserved = 0  # threads of this process past the in-process gate (holding or taking a file)
_in_use = 0  # threads holding a slot (gate and file)
_waiting = 0
_peak = 0


def _parse(value, source: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n < 1 or isinstance(value, bool):
        raise SlotConfigError(f"{source} must be a whole number >= 1 (the most sandboxes "
                              f"alive at once), got {value!r}")
    return n


def default_max() -> int:
    """``$PROCTOR_MAX_SANDBOXES`` when set, else the CPUs of this process's affinity.

    Raises:
        SlotConfigError: the variable is set to anything but a whole number >= 1.
    """
    raw = os.environ.get(ENV)
    if raw is not None and raw.strip() != "":
        return _parse(raw, f"${ENV}")
    return max(1, len(os.sched_getaffinity(0)))


def _limit() -> int:
    global _max
    if _max is None:
        _max = default_max()
    return _max


def configure(max_sandboxes: int) -> None:
    """Set the cap of this process (and its share of the machine-wide slot files). Threads
    already holding slots keep them; a raise lets waiters in at once.

    Raises:
        SlotConfigError: ``max_sandboxes`` is not a whole number >= 1.
    """
    global _max
    n = _parse(max_sandboxes, "max_sandboxes")
    with _cond:
        _max = n
        _cond.notify_all()


def reset_peak() -> None:
    """Start :func:`stats`'s ``peak`` again from the slots in use now."""
    global _peak
    with _cond:
        _peak = _in_use


def stats() -> dict[str, int]:
    """``{"in_use": slots held now, "waiting": threads waiting for one, "peak": most held at
    once since start (or :func:`reset_peak`), "max": the cap}``, this process only."""
    with _cond:
        return {"in_use": _in_use, "waiting": _waiting, "peak": _peak, "max": _limit()}


def slot_dir() -> Path:
    """Where the slot lock files live (:func:`proctor.cache_dirs.slots`)."""
    return cache_dirs.slots()


def _remaining(end: float | None) -> float | None:
    return None if end is None else end - time.monotonic()


def _timed_out(end: float | None, timeout: float | None) -> None:
    rem = _remaining(end)
    if rem is not None and rem <= 0:
        raise SlotTimeout(f"no sandbox slot free within {timeout:g} s "
                          f"(cap {_limit()}: {stats()['in_use']} held in this process)")


def _take_file(n: int, end: float | None, timeout: float | None) -> int:
    """An open descriptor holding an exclusive lock on one of the ``n`` slot files."""
    d = slot_dir()
    d.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % n  # processes start their search at different files
    while True:
        for k in range(n):
            path = d / f"slot-{(start + k) % n}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            return fd
        cancel.check()
        _timed_out(end, timeout)
        rem = _remaining(end)
        time.sleep(POLL_S if rem is None else max(0.0, min(POLL_S, rem)))


@contextmanager
def acquire(timeout: float | None = None) -> Iterator[None]:
    """``with slots.acquire():`` hold one sandbox slot for the block; waits for one.

    Args:
        timeout: most seconds to wait (``0``: only a slot free at once); None: no limit.

    Raises:
        SlotTimeout: none free within ``timeout``.
        Cancelled: the current :mod:`~proctor.harness.pipeline.cancel` scope was cancelled while
            waiting.
        SlotConfigError: bad ``$PROCTOR_MAX_SANDBOXES``.
    """
    global _reserved, _in_use, _waiting, _peak
    end = None if timeout is None else time.monotonic() + max(0.0, timeout)
    n = _limit()
    fd = None
    with _cond:
        _waiting += 1
    try:
        with _cond:
            while _reserved >= _limit():
                cancel.check()
                _timed_out(end, timeout)
                rem = _remaining(end)
                _cond.wait(POLL_S * 4 if rem is None else max(0.0, min(POLL_S * 4, rem)))
            cancel.check()
            _reserved += 1
            n = _limit()
        try:
            fd = _take_file(n, end, timeout)
        except BaseException:
            with _cond:
                _reserved -= 1
                _cond.notify()
            raise
        with _cond:
            _in_use += 1
            _peak = max(_peak, _in_use)
    finally:
        with _cond:
            _waiting -= 1
    try:
        yield
    finally:
        os.close(fd)  # releases the flock
        with _cond:
            _in_use -= 1
            _reserved -= 1
            _cond.notify()
