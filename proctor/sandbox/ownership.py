"""Who owns a sandbox, and which of this process's sandboxes are open.

Every Docker sandbox carries the labels ``org.proctor`` = "1", ``org.proctor.run``,
``org.proctor.owner_host`` (hostname), ``org.proctor.owner_pid``, ``org.proctor.owner_start``
(the owner's start time in clock ticks since boot, from ``/proc/<pid>/stat``, so a reused
pid is not mistaken for the owner) and ``org.proctor.expires`` (unix seconds). The local
backend's host directories carry the same facts in a ``.owner`` file (see
:mod:`proctor.sandbox.bwrap_backend`). A sandbox is *stale* when its expiry has passed, or
when its owner is on this host and is no longer running (:func:`is_stale`).

The backends :func:`track` each sandbox they open and :func:`untrack` it on close, so
:mod:`proctor.sandbox.cleanup` can close what is open when a signal arrives; work the host
does outside any sandbox goes in a :func:`host_dir`, owned and swept the same way. Every
such directory is made by :func:`claim_dir`, which registers it before it exists, so a
signal arriving while it is made (in any thread) never leaves it behind; once the process is
ending (:func:`stop_new`), no thread can open a sandbox or claim a directory any more.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LABEL = "org.proctor"
_LIVE: weakref.WeakSet = weakref.WeakSet()
_DOCKER_USED = False  # this process created Docker sandboxes: sweep its own on a signal
_PEAK = 0  # most sandboxes of this process open at once
_STOPPED = False  # the process is ending: no new sandbox or directory (see stop_new)
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


class ShuttingDown(RuntimeError):
    """The process is ending (:func:`stop_new`): no sandbox or directory may be opened."""


def stop_new() -> None:
    """Refuse every later :func:`track` and :func:`claim_dir` in this process (any thread):
    called once the process is about to end on a signal, before its sandboxes and
    directories are snapshotted for removal, so nothing opened after the snapshot leaks."""
    global _STOPPED
    with _LIVE_LOCK:
        _STOPPED = True


def _refuse_if_stopped() -> None:
    if _STOPPED:
        raise ShuttingDown("the process is ending: no new sandbox is opened")


def track(sb) -> None:
    """Remember a live sandbox of this process (closed by the signal handlers).

    Raises:
        ShuttingDown: after :func:`stop_new`.
    """
    global _DOCKER_USED, _PEAK
    with _LIVE_LOCK:
        _refuse_if_stopped()
        _LIVE.add(sb)
        _PEAK = max(_PEAK, len(_LIVE))
    _DOCKER_USED = _DOCKER_USED or type(sb).__name__ == "DockerSandbox"


def untrack(sb) -> None:
    """Forget a sandbox :func:`track` remembered (it is closing); an unknown one is fine."""
    with _LIVE_LOCK:
        _LIVE.discard(sb)


def live_sandboxes() -> tuple[int, int]:
    """(sandboxes of this process open now, the most open at once since the process started
    or :func:`reset_live_peak`)."""
    with _LIVE_LOCK:
        return len(_LIVE), _PEAK


def reset_live_peak() -> None:
    """Start the peak :func:`live_sandboxes` reports over, from the sandboxes open now."""
    global _PEAK
    with _LIVE_LOCK:
        _PEAK = len(_LIVE)


def live() -> list:
    """The sandboxes of this process open now (a snapshot)."""
    with _LIVE_LOCK:
        return list(_LIVE)


def docker_used() -> bool:
    """Whether this process has opened a Docker sandbox."""
    return _DOCKER_USED


#: Prefix of the host directories a process works in outside any sandbox (e.g. the task
#: repository's snapshot being built): ``<tempdir>/proctor-host-<purpose>-<random>``.
HOST_DIR_PREFIX = "proctor-host-"
_HOST_DIRS: set[str] = set()


def claim_dir(prefix: str, base: Path | None = None, *, owner=None) -> Path:
    """Create a fresh empty directory ``base/<prefix><random>`` (mode 0700; ``base``
    defaults to the temp dir), registered with :func:`live_host_dirs` before it exists: a
    signal handler running at any point of this call (this thread's or another's) either
    finds it registered or finds nothing made. ``owner``, a sandbox, is :func:`track`-ed in
    the same step, so a snapshot never holds the directory without its sandbox.
    :func:`release_dir` forgets it once removed.

    Raises:
        ShuttingDown: after :func:`stop_new`.
        OSError: ``base`` is missing or not writable.
    """
    base = Path(base) if base is not None else Path(tempfile.gettempdir())
    while True:
        path = base / f"{prefix}{secrets.token_hex(5)}"
        with _LIVE_LOCK:
            _refuse_if_stopped()
            _HOST_DIRS.add(str(path))
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                _HOST_DIRS.discard(str(path))
                continue
            except BaseException:
                _HOST_DIRS.discard(str(path))
                raise
            if owner is not None:
                track(owner)
            return path


def release_dir(path: Path | str) -> None:
    """Forget a :func:`claim_dir` directory (it has been removed); an unknown one is fine."""
    with _LIVE_LOCK:
        _HOST_DIRS.discard(str(path))


@contextmanager
def host_dir(purpose: str, ttl_s: float = 3600.0) -> Iterator[Path]:
    """A fresh temporary host directory owned by this process, removed on the way out.

    It carries a ``.owner`` file with :func:`labels` (so a later process's sweep removes
    it once this one is gone, even after ``kill -9``) and is known to
    :func:`proctor.sandbox.cleanup.close_all` (so SIGINT / SIGTERM remove it too). Write
    below it, not next to the ``.owner`` file."""
    path = claim_dir(f"{HOST_DIR_PREFIX}{purpose}-")
    try:
        (path / ".owner").write_text(json.dumps(labels(f"host-{purpose}", ttl_s)))
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        release_dir(path)


def live_host_dirs() -> list[str]:
    """The :func:`claim_dir` directories of this process not yet released (a snapshot):
    :func:`host_dir` ones and the local backend's sandbox dirs."""
    with _LIVE_LOCK:
        return sorted(_HOST_DIRS)
