"""Nothing outlives its owner: removal of what crashed harnesses left behind, and removal
of this process's sandboxes on SIGINT / SIGTERM.

Stale sandboxes (:func:`proctor.sandbox.ownership.is_stale`: expired, or their owner on this
host is gone) are removed; those owned by live processes (another engineer's test run,
another trainer) are never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from proctor.sandbox import bwrap_backend, ownership, warm_pool
from proctor.sandbox.ownership import LABEL, is_stale

_LOCK = threading.Lock()
_started_reap_done = False


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
    removed: list[str] = []
    try:
        if client is None:
            from proctor.sandbox.engine import docker_client

            client = docker_client(timeout=10)
        containers = client.containers.list(all=True, filters={"label": LABEL},
                                            ignore_removed=True)
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
    dirs = bwrap_backend.remove_stale_dirs(expired=expired) + _remove_stale_host_dirs(expired)
    return CleanupReport(removed, dirs)


def _remove_stale_host_dirs(expired: bool) -> list[str]:
    """Remove :func:`~proctor.sandbox.ownership.host_dir` directories whose owner is gone
    (or, with ``expired``, whose expiry passed); returns their paths."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(ownership.HOST_DIR_PREFIX + "*"):
        try:
            owner = json.loads((d / ".owner").read_text())
        except (OSError, ValueError):
            continue
        if is_stale(owner, expired=expired):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


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


def close_all(*, final: bool = False) -> int:
    """Close every live sandbox of this process, remove its claimed host directories (one
    being made while the signal arrived included), then remove any Docker container still
    labelled with this process as owner (one created while the signal arrived, before its
    sandbox object knew its id). ``final``: the process ends right after, so other threads
    may open nothing more (:func:`~proctor.sandbox.ownership.stop_new`). Returns how many
    sandboxes were open."""
    if final:
        ownership.stop_new()
    # no waiting sandbox is handed out once closed; those being made are swept below
    warm_pool.drain_warm(wait_s=0.0)
    live = ownership.live()
    for sb in live:
        try:
            sb.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    for d in ownership.live_host_dirs():
        try:
            bwrap_backend.remove_dir(Path(d))  # unmounts a local sandbox's tmpfs areas first
        except Exception:  # noqa: BLE001 - best effort on the way out: the others still go
            pass
        ownership.release_dir(d)
    if ownership.docker_used():
        _remove_own_containers()
    return len(live)


def _remove_own_containers() -> None:
    try:
        from proctor.sandbox.engine import docker_client

        client = docker_client(timeout=10)
        mine = [f"{LABEL}.owner_pid={os.getpid()}",
                f"{LABEL}.owner_host={socket.gethostname()}"]
        for c in client.containers.list(all=True, filters={"label": mine},
                                        ignore_removed=True):
            c.remove(force=True, v=True)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def _handler(previous: Callable | int | None, signum: int):
    def handle(sig, frame):
        ends = not callable(previous) and signum != signal.SIGINT
        try:
            close_all(final=ends)
        finally:  # whatever the cleanup met, the signal still ends the process
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
