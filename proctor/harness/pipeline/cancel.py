"""Cancelling the scoring of rollouts nobody waits for any more (an HTTP client that went
away): what has not started never starts, what runs loses its sandboxes.

A :class:`Scope` is set for the calling context with :func:`scope`; every thread that scores
on its behalf runs in a copy of that context (the batch pool and the executor's own pool
submit through :func:`contextvars.copy_context`). Once :meth:`Scope.cancel` is called:

* waiting for a sandbox slot (:mod:`proctor.harness.pipeline.slots`) raises :class:`Cancelled`;
* a rollout not started yet is not scored (:meth:`RolloutScorer.score_item
  <proctor.harness.batch.run.RolloutScorer.score_item>` returns a ``cancelled`` error record);
* the sandboxes the executor opened for the scope (:func:`adopt`) are removed, so the steps
  running in them fail at once; a sandbox opened afterwards is removed as soon as it is
  adopted;
* records made under a cancelled scope are never written to the result cache.

The shared task preparation (the baseline, computed once for every request) is never
adopted: another request may be waiting for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from proctor.errors import InfraError

#: ``error.kind`` of a record whose scoring was cancelled.
CANCELLED = "cancelled"


class Cancelled(InfraError):
    """The scoring was cancelled (its requester went away). Not retryable: nobody waits."""

    kind = CANCELLED
    retryable = False


class Scope:
    """One cancellable unit of work (e.g. one HTTP request). Thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._sandboxes: list = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called (once cancelled, always cancelled)."""
        return self._event.is_set()

    def cancel(self) -> int:
        """Cancel: remove every adopted sandbox still open (errors ignored: it may be closing
        already). Blocks while the engine removes them. Returns how many were closed."""
        self._event.set()
        with self._lock:
            sandboxes, self._sandboxes = self._sandboxes, []
        for sb in sandboxes:
            try:
                sb.close()
            except Exception:  # noqa: BLE001 - removed meanwhile, or the engine is gone
                pass
        return len(sandboxes)

    def adopt(self, sb) -> None:
        """Remove ``sb`` when the scope is cancelled; at once (raising :class:`Cancelled`)
        when it already is."""
        with self._lock:
            if not self._event.is_set():
                self._sandboxes.append(sb)
                return
        try:
            sb.close()
        finally:
            raise Cancelled("scoring cancelled: its requester went away")


_CURRENT: ContextVar[Scope | None] = ContextVar("proctor_cancel_scope", default=None)


@contextmanager
def scope(s: Scope | None = None) -> Iterator[Scope]:
    """``with cancel.scope() as s:`` makes ``s`` (a new :class:`Scope` by default) the
    current scope of this context."""
    s = s or Scope()
    token = _CURRENT.set(s)
    try:
        yield s
    finally:
        _CURRENT.reset(token)


def current() -> Scope | None:
    """The scope of this context (set by :func:`scope`), or None outside any."""
    return _CURRENT.get()


def requested() -> bool:
    """The current scope (if any) is cancelled."""
    s = _CURRENT.get()
    return s is not None and s.cancelled


def check() -> None:
    """Raise :class:`Cancelled` when the current scope is cancelled."""
    if requested():
        raise Cancelled("scoring cancelled: its requester went away")


def adopt(sb) -> None:
    """:meth:`Scope.adopt` on the current scope; nothing without one."""
    s = _CURRENT.get()
    if s is not None:
        s.adopt(sb)
