"""Nothing outlives its owner: labels that name who owns a sandbox, removal of what crashed
harnesses left behind, and removal of this process's sandboxes on SIGINT / SIGTERM.

Every Docker sandbox carries the labels ``org.proctor`` = "1", ``org.proctor.run``,
``org.proctor.owner_host`` (hostname), ``org.proctor.owner_pid``, ``org.proctor.owner_start``
(the owner's start time in clock ticks since boot, from ``/proc/<pid>/stat``, so a reused
pid is not mistaken for the owner) and ``org.proctor.expires`` (unix seconds).

A container is *stale* when its expiry has passed, or when its owner is on this host and is
no longer running. Containers owned by live processes (another engineer's test run, another
trainer) are never touched. The local backend's host directories carry the same facts in a
``.owner`` file (see :mod:`proctor.sandbox.bwrap_backend`).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

LABEL = "org.proctor"
_LIVE: weakref.WeakSet = weakref.WeakSet()
_LOCK = threading.Lock()
_started_reap_done = False
_DOCKER_USED = False  # this process created Docker sandboxes: sweep its own on a signal
_PEAK = 0  # most sandboxes of this process open at once
# Re-entrant: the signal handlers close sandboxes (untrack) in the main thread, which may be
# inside track or untrack when the signal arrives.
_LIVE_LOCK = threading.RLock()


def pid_start_ticks(pid: int) -> str | None:
    """Start time of ``pid`` (clock ticks since boot, as text), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def owner_alive(host: str | None, pid: str | None, start: str | None) -> bool:
    """True unless the owner is known to be gone: same host, and its pid is not running or
    runs a different process (start time differs). Another host's owner counts as alive; a
    sandbox without a host label (older Proctor) counts as this host's."""
    if (host is not None and host != socket.gethostname()) or not (pid or "").isdigit():
        return True
    now = pid_start_ticks(int(pid))
    return now is not None and (start is None or start == now)


def labels(run_id: str, ttl_s: float) -> dict[str, str]:
    """Labels for a new sandbox owned by this process, expiring ``ttl_s`` seconds from now."""
    pid = os.getpid()
    return {
        LABEL: "1",
        f"{LABEL}.run": run_id,
        f"{LABEL}.owner_host": socket.gethostname(),
        f"{LABEL}.owner_pid": str(pid),
        f"{LABEL}.owner_start": pid_start_ticks(pid) or "",
        f"{LABEL}.expires": str(int(time.time() + ttl_s)),
    }


def is_stale(lbl: dict[str, str], now: float | None = None, *, expired: bool = True) -> bool:
    """Whether a sandbox with labels ``lbl`` may be removed: owner gone, or (when
    ``expired``) its expiry time passed. Pure apart from the /proc look-up."""
    now = time.time() if now is None else now
    exp = lbl.get(f"{LABEL}.expires", "")
    if expired and exp.isdigit() and int(exp) < now:
        return True
    return not owner_alive(lbl.get(f"{LABEL}.owner_host"), lbl.get(f"{LABEL}.owner_pid"),
                           lbl.get(f"{LABEL}.owner_start") or None)


@dataclass(frozen=True)
class CleanupReport:
    """What one cleanup pass removed: container ids and host directories."""

    containers: list[str]
    dirs: list[str]


def remove_stale(*, expired: bool = True, client=None) -> CleanupReport:
    """Remove stale Docker sandboxes (see :func:`is_stale`) and stale local-backend
    directories. ``expired=False``: only those whose owner is gone (what each Proctor start
    does). Without a reachable engine only directories are cleaned. Never raises for a
    sandbox that vanished meanwhile."""
    from proctor.sandbox import bwrap_backend

    removed: list[str] = []
    try:
        if client is None:
            from proctor.sandbox.engine import docker_client

            client = docker_client(timeout=10)
        containers = client.containers.list(all=True, filters={"label": LABEL})
    except Exception:  # noqa: BLE001 - no engine: nothing of Docker's to clean
        containers = []
    now = time.time()
    for c in containers:
        if is_stale(c.labels, now, expired=expired):
            try:
                c.remove(force=True, v=True)
                removed.append(c.id)
            except Exception:  # noqa: BLE001 - removed by someone else meanwhile
                pass
    dirs = bwrap_backend.remove_stale_dirs(expired=expired)
    return CleanupReport(removed, dirs)


def at_start() -> None:
    """Once per process (the first score): remove sandboxes whose owner is gone, and install
    the SIGINT / SIGTERM handlers (main thread only)."""
    global _started_reap_done
    with _LOCK:
        if _started_reap_done:
            return
        _started_reap_done = True
    try:
        remove_stale(expired=False)
    except Exception as exc:  # noqa: BLE001 - cleanup must never stop scoring
        print(f"[proctor] start-up cleanup failed: {exc}", file=sys.stderr)
    install_signal_handlers()


def track(sb) -> None:
    """Remember a live sandbox of this process (closed by the signal handlers)."""
    global _DOCKER_USED, _PEAK
    with _LIVE_LOCK:
        _LIVE.add(sb)
        _PEAK = max(_PEAK, len(_LIVE))
    _DOCKER_USED = _DOCKER_USED or type(sb).__name__ == "DockerSandbox"


def untrack(sb) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(sb)


def live_sandboxes() -> tuple[int, int]:
    """(sandboxes of this process open now, the most open at once since the process started
    or :func:`reset_live_peak`)."""
    with _LIVE_LOCK:
        return len(_LIVE), _PEAK


def reset_live_peak() -> None:
    global _PEAK
    with _LIVE_LOCK:
        _PEAK = len(_LIVE)


def close_all() -> int:
    """Close every live sandbox of this process, then remove any Docker container still
    labelled with this process as owner (one created while the signal arrived, before its
    sandbox object knew its id). Returns how many sandboxes were open."""
    live = list(_LIVE)
    for sb in live:
        try:
            sb.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    if _DOCKER_USED:
        _remove_own_containers()
    return len(live)


def _remove_own_containers() -> None:
    try:
        from proctor.sandbox.engine import docker_client

        client = docker_client(timeout=10)
        mine = [f"{LABEL}.owner_pid={os.getpid()}",
                f"{LABEL}.owner_host={socket.gethostname()}"]
        for c in client.containers.list(all=True, filters={"label": mine}):
            c.remove(force=True, v=True)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def _handler(previous: Callable | int | None, signum: int):
    def handle(sig, frame):
        close_all()
        if callable(previous):
            previous(sig, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handle


def install_signal_handlers() -> bool:
    """SIGINT and SIGTERM close this process's sandboxes, then do what they did before.
    Only possible from the main thread; returns whether they were installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if getattr(previous, "_proctor", False):
            continue
        handle = _handler(previous, signum)
        handle._proctor = True
        signal.signal(signum, handle)
    return True
