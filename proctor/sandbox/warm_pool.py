"""Warm sandboxes: made ahead, in the background, so that a rollout does not wait for one.

A :class:`WarmPool` holds sandboxes of one kind (:class:`WarmKey`: backend, environment,
limits, mounts, expiry) that nothing has run in. :meth:`WarmPool.take` hands one out, once:
a sandbox never comes back to the pool (its taker closes it), so no patch ever runs where
another ran. When none is ready it returns None at once and the rollout makes its own, as
without a pool; every take starts a replacement in the background. At most ``size``
sandboxes wait; one that waited longer than :data:`MAX_IDLE_S` is closed instead of handed
out. Their ownership labels are those of any sandbox of this process (expiry: the wait
allowed plus the rollout's), so the signal handlers close them and ``proctor cleanup``
removes those of a process that died. A sandbox that cannot be made pauses the pool for
:data:`FAIL_PAUSE_S` (the rollout then meets the failure itself, as without a pool).

Pools are per process and off unless sized: for a batch's life (:func:`warm_sandboxes`, as
``proctor batch`` and :func:`proctor.score_batch` do, drained when it ends), for the
process's (:func:`configure_warm`, as ``proctor serve`` does, or
``$PROCTOR_WARM_SANDBOXES``). A single ``proctor score`` has nothing to overlap them with.
:func:`drain_warm` closes every waiting sandbox (at the process's exit too).
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from proctor.errors import ProctorError
from proctor.sandbox.backends import open_sandbox
from proctor.sandbox.base import Limits, Sandbox

ENV = "PROCTOR_WARM_SANDBOXES"
#: Seconds a sandbox may wait in a pool; older ones are closed, not handed out.
MAX_IDLE_S = 120.0
#: Seconds a pool stops making sandboxes after one could not be made.
FAIL_PAUSE_S = 30.0
#: Seconds closing a pool waits for the sandboxes being made (each is closed when done).
CLOSE_WAIT_S = 60.0


class WarmConfigError(ProctorError):
    """``$PROCTOR_WARM_SANDBOXES`` or :func:`configure_warm`'s value is not a whole number >= 0."""

    kind = "warm_config"


@dataclass(frozen=True)
class WarmKey:
    """What the pool's sandboxes are made from (as :func:`~proctor.sandbox.open_sandbox`
    takes it): ``ttl_s`` is the rollout's expiry (the pool adds :data:`MAX_IDLE_S`);
    ``mounts``: (path inside, host directory) pairs, sorted."""

    backend: str
    env: str
    limits: Limits
    ttl_s: float
    mounts: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, backend: str, env: str, limits: Limits, ttl_s: float,
           mounts: dict[str, Path] | None) -> WarmKey:
        """The key of sandboxes opened with these arguments."""
        return cls(backend, env, limits, float(ttl_s),
                   tuple(sorted((k, str(v)) for k, v in (mounts or {}).items())))


Opener = Callable[..., Sandbox]


class WarmPool:
    """Up to ``size`` never-used sandboxes of ``key``, made in background threads by
    ``opener`` (:func:`~proctor.sandbox.open_sandbox`'s signature). Thread-safe.
    ``counts``: ``taken`` (a waiting sandbox handed out), ``missed`` (none was ready),
    ``made``, ``failed``, ``expired`` (closed after :data:`MAX_IDLE_S`)."""

    def __init__(self, key: WarmKey, size: int, opener: Opener = open_sandbox) -> None:
        self.key, self.size, self._opener = key, size, opener
        self._idle: deque[tuple[float, Sandbox]] = deque()
        self._making = 0
        self._failed_at: float | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)  # a sandbox being made is done
        self.counts: Counter[str] = Counter()

    def take(self) -> Sandbox | None:
        """A waiting sandbox (the caller owns and closes it), or None when none is ready;
        either way, a replacement is started."""
        self.expire()
        with self._lock:
            got = self._idle.popleft()[1] if self._idle else None
            self.counts["taken" if got is not None else "missed"] += 1
        self.fill()
        return got

    def fill(self) -> None:
        """Start making sandboxes until ``size`` are waiting or being made (not while the
        pool is paused after a failure, nor once it is closed)."""
        with self._lock:
            paused = self._failed_at is not None and \
                time.monotonic() - self._failed_at < FAIL_PAUSE_S
            n = 0 if self._closed or paused else self.size - len(self._idle) - self._making
            self._making += max(n, 0)
        for _ in range(n):
            threading.Thread(target=self._make, name="proctor-warm-sandbox",
                             daemon=True).start()

    def _make(self) -> None:
        k, sb = self.key, None
        try:
            sb = self._opener(k.backend, k.env, k.limits, f"warm-{secrets.token_hex(6)}",
                              k.ttl_s + MAX_IDLE_S, {p: Path(h) for p, h in k.mounts})
        except Exception:  # noqa: BLE001 - the rollouts make their own and meet it there
            with self._lock:
                self._failed_at = time.monotonic()
                self.counts["failed"] += 1
        finally:
            with self._lock:
                if sb is not None and not self._closed:
                    self._idle.append((time.monotonic(), sb))
                    self.counts["made"] += 1
                    sb = None
            if sb is not None:  # the pool closed while it was being made
                _close_quietly(sb)
            with self._lock:
                self._making -= 1
                self._done.notify_all()

    def expire(self) -> int:
        """Close the sandboxes that waited longer than :data:`MAX_IDLE_S`; how many."""
        now = time.monotonic()
        with self._lock:
            stale = [sb for made_at, sb in self._idle if now - made_at > MAX_IDLE_S]
            self._idle = deque((t, sb) for t, sb in self._idle if now - t <= MAX_IDLE_S)
            self.counts["expired"] += len(stale)
        for sb in stale:
            _close_quietly(sb)
        return len(stale)

    def waiting(self) -> int:
        """Sandboxes waiting now."""
        with self._lock:
            return len(self._idle)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> int:
        """Close every waiting sandbox and make no more; returns how many were closed.
        One being made is closed when it is done: waits up to ``wait_s`` seconds for that,
        so nothing of the pool outlives the call."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        for _, sb in idle:
            _close_quietly(sb)
        with self._lock:
            self._done.wait_for(lambda: self._making == 0, wait_s)
        return len(idle)


def _close_quietly(sb: Sandbox) -> None:
    try:
        sb.close()
    except Exception:  # noqa: BLE001 - best effort: the sweeper removes what is left
        pass


_size: int | None = None  # None: from the environment on first use
_holds: list[int] = []  # sizes of the open :func:`warm_sandboxes` blocks
_pools: dict[WarmKey, WarmPool] = {}
_pools_lock = threading.RLock()


def _parse(value, source: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise WarmConfigError(f"{source} must be a whole number >= 0 (sandboxes kept "
                              f"waiting per kind; 0: none), not {value!r}")
    return n


def configure_warm(size: int) -> None:
    """Keep up to ``size`` sandboxes waiting per kind from now on, for the process's life
    (0: none, but see :func:`warm_sandboxes`). Overrides ``$PROCTOR_WARM_SANDBOXES``.

    Raises:
        WarmConfigError: ``size`` is not a whole number >= 0.
    """
    global _size
    n = _parse(size, "the warm sandbox count")
    with _pools_lock:
        _size = n
    _resize()


@contextmanager
def warm_sandboxes(size: int) -> Iterator[None]:
    """At least ``size`` sandboxes waiting per kind inside the block (a batch's workers);
    when the last such block ends and the process keeps none otherwise, the waiting ones
    are closed, so a batch leaves nothing behind. Blocks may nest and overlap (threads).

    Raises:
        WarmConfigError: ``size`` is not a whole number >= 0.
    """
    n = _parse(size, "the warm sandbox count")
    with _pools_lock:
        _holds.append(n)
    _resize()
    try:
        yield
    finally:
        with _pools_lock:
            _holds.remove(n)
        _resize()


def _resize() -> None:
    """Apply :func:`warm_pool_size` to every pool; all closed when it is 0."""
    n = warm_pool_size()
    with _pools_lock:
        pools = list(_pools.values())
        if n == 0:
            _pools.clear()
    for pool in pools:
        if n == 0:
            pool.close()
        else:
            pool.size = n


def warm_pool_size() -> int:
    """Sandboxes kept waiting per kind: the largest of :func:`configure_warm`'s (else
    ``$PROCTOR_WARM_SANDBOXES``, else 0) and the open :func:`warm_sandboxes` blocks'.

    Raises:
        WarmConfigError: ``$PROCTOR_WARM_SANDBOXES`` is set to something else than a whole
            number >= 0.
    """
    global _size
    with _pools_lock:
        if _size is None:
            raw = os.environ.get(ENV)
            _size = 0 if raw in (None, "") else _parse(raw, f"${ENV}")
        return max([_size, *_holds])


def take_warm(key: WarmKey, opener: Opener = open_sandbox) -> Sandbox | None:
    """A never-used sandbox of ``key`` from this process's pool (made on first use), or
    None at once when pools are off or none is ready (then make one as usual)."""
    size = warm_pool_size()
    if size <= 0:
        return None
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = WarmPool(key, size, opener)
        others = [p for p in _pools.values() if p is not pool]
    for other in others:  # a kind no rollout asks for any more keeps nothing waiting long
        other.expire()
    return pool.take()


def warm_waiting() -> int:
    """Sandboxes waiting in every pool of this process."""
    with _pools_lock:
        pools = list(_pools.values())
    return sum(p.waiting() for p in pools)


def settle_warm(wait_s: float = CLOSE_WAIT_S) -> list[Sandbox]:
    """Wait up to ``wait_s`` seconds until no pool is making a sandbox; then the sandboxes
    waiting in every pool (still theirs: for a check of what this process leaves behind,
    which must not count them)."""
    with _pools_lock:
        pools = list(_pools.values())
    out: list[Sandbox] = []
    end = time.monotonic() + wait_s
    for p in pools:
        with p._lock:
            p._done.wait_for(lambda p=p: p._making == 0, max(0.0, end - time.monotonic()))
            out += [sb for _, sb in p._idle]
    return out


def warm_counts() -> dict[str, int]:
    """The :attr:`WarmPool.counts` of every open pool of this process, summed."""
    with _pools_lock:
        pools = list(_pools.values())
    total: Counter[str] = Counter()
    for p in pools:
        with p._lock:
            total.update(p.counts)
    return {k: total[k] for k in ("taken", "missed", "made", "failed", "expired")}


def drain_warm(wait_s: float = CLOSE_WAIT_S) -> int:
    """Close every pool of this process and the sandboxes waiting in them (they are made
    again on the next :func:`take_warm`), waiting up to ``wait_s`` seconds for those being
    made; returns how many waited."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    return sum(p.close(wait_s) for p in pools)


atexit.register(drain_warm)
