"""The CLI daemon: a process with Proctor's modules already imported that forks a fresh
process for each ``proctor score``, so that the command starts in milliseconds instead of
the ~0.6 s its imports cost (pydantic's models, docker-py, rich, typer).

Both ends of one protocol live here; this module imports the standard library only, so
that the client side (:func:`run_in_daemon`, called by :mod:`proctor.launcher` before any
other import) stays cheap.

- **Who may use a daemon**: a daemon serves only the processes that would have run exactly
  the same code in exactly the same way. The key (:func:`daemon_key`) covers the user, the
  interpreter and its flags, ``sys.path``, every file of the ``proctor`` package (path,
  size, mtime), the mtime of each ``site-packages`` directory (a package installed or
  removed changes it) and the environment variables read at interpreter start or by
  Proctor (:data:`KEYED_PREFIXES`, :data:`KEYED_ENV`). The socket is named by the key, so a
  client finds only a daemon of its own code; a daemon of older code is never used again
  and ends when idle. On connecting, the daemon also compares the client's process with
  its own (:func:`process_kind`: group and groups, namespaces, cgroup, resource limits,
  nice value, CPU affinity) and declines any difference: the client then runs the
  command itself.
- **What runs**: for each request the daemon forks a watcher, which forks the runner in a
  session of its own. The runner takes the client's standard input, output and error
  (passed over the socket), its working directory, its whole environment, its umask, its
  argv and the signals it ignores, then waits. The watcher tells the client ``ready``; only
  when the client answers ``go`` (the command is the daemon's from then on; a client that
  waited too long has run it itself and answers nothing, and the runner is killed before it
  did anything) does the runner return from :func:`serve` to run the command as a
  ``proctor`` process of its own would (its exit, ``atexit`` handlers and threads as
  usual). The watcher forwards the signals the client gets (SIGINT, SIGTERM, SIGHUP,
  SIGQUIT), sends SIGTERM to the runner if the client goes away, and reports how the runner
  ended (``exit N``, or ``signal N``: the client then ends by the same signal).
- **What differs from a process of its own**: the runner is not in the client's process
  group or session (job control: Ctrl-Z stops the client only).
- **Safety**: the socket's directory is the user's own (mode 0700, checked by both ends),
  and the daemon serves only its own uid (``SO_PEERCRED``). It forks only while it has a
  single thread; otherwise it answers ``busy`` and the client runs the command itself.

Files: ``$XDG_RUNTIME_DIR`` (else ``/tmp``) ``/proctor-daemon-<uid>/<key>.sock``.
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import io
import json
import math
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
from dataclasses import dataclass, field

#: Environment variables that are part of a daemon's key: those the interpreter reads at
#: start (``PYTHON*``, the locale) and Proctor's own (read at run time, but a user who sets
#: one expects it to count). Every other variable is the client's in the runner, unkeyed.
KEYED_PREFIXES = ("PYTHON", "PROCTOR_", "LC_", "DOCKER_")
KEYED_ENV = ("LANG", "HOME", "PATH", "TMPDIR", "XDG_CACHE_HOME", "VIRTUAL_ENV", "TZ")
#: ``PROCTOR_DAEMON=0``: never hand a command to a daemon (not part of the key).
DISABLE_ENV = "PROCTOR_DAEMON"
#: ``PROCTOR_DAEMON_WAIT_S``: seconds a client waits for the daemon's ``ready`` before it
#: runs the command itself (default :data:`START_TIMEOUT_S`; not part of the key).
WAIT_ENV = "PROCTOR_DAEMON_WAIT_S"
UNKEYED = frozenset({DISABLE_ENV, WAIT_ENV})
#: Seconds a daemon waits for a command before it ends.
IDLE_S = 900.0
#: Signals the client forwards to the runner.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Signals by which the client, its runner ended by one, ends itself too (any other one, a
#: crash's SIGSEGV say, is reported as exit 128 + N without a core of the client's own).
ENDED_ALIKE = frozenset({*FORWARDED, signal.SIGKILL, signal.SIGPIPE, signal.SIGALRM,
                         signal.SIGUSR1, signal.SIGUSR2})
START_TIMEOUT_S = 10.0
#: Paths that mean this process's own descriptors (process substitution gives
#: ``/dev/fd/63``): a command naming one runs in the client, where they are.
OWN_PATHS = ("/dev/fd/", "/proc/self/", "/proc/thread-self/")
#: The request's size limit (argv and environment) and the seconds it may take to arrive.
MAX_REQUEST = 4 * 1024 * 1024
REQUEST_TIMEOUT_S = 5.0
#: How often a watcher looks at its runner when the kernel gives no process descriptor.
POLL_S = 0.02
_HEADER = struct.Struct("!I")
_FINGERPRINT_SKIP = {"__pycache__"}


class DaemonError(Exception):
    """A daemon could not be started, reached or stopped (the message says why)."""


@dataclass(frozen=True)
class Request:
    """What the runner runs: the client's ``argv`` (``argv[0]`` its program name), working
    directory ``cwd``, environment ``env``, ``umask`` and the signals it ignores."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    ignored: list[int] = field(default_factory=list)


# ---- the key ----------------------------------------------------------------------------


def package_fingerprint(root: str) -> str:
    """sha256 over every entry under ``root`` (``__pycache__`` skipped): relative path, size
    and mtime in ns, sorted. A change to any of Proctor's files changes it; an entry that
    cannot be read (a dangling link, a file removed meanwhile) counts as itself."""
    digest = hashlib.sha256()
    entries = []
    stack = [root]
    seen = {os.path.realpath(root)}
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                found = list(it)
        except OSError:
            entries.append(f"{os.path.relpath(top, root)}\0unreadable")
            continue
        for entry in found:
            if entry.name in _FINGERPRINT_SKIP:
                continue
            rel = os.path.relpath(entry.path, root)
            try:
                if entry.is_dir(follow_symlinks=True):
                    real = os.path.realpath(entry.path)
                    if real not in seen:  # a linked directory counts, once (no loops)
                        seen.add(real)
                        stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=True)
                entries.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}")
            except OSError:
                entries.append(f"{rel}\0missing")
    for line in sorted(entries):
        digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def keyed_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` that is in a daemon's key (:data:`KEYED_PREFIXES`,
    :data:`KEYED_ENV`; never :data:`UNKEYED`)."""
    return {k: v for k, v in env.items()
            if k not in UNKEYED and (k in KEYED_ENV or k.startswith(KEYED_PREFIXES))}


def key_parts(env: dict[str, str] | None = None,
              package_root: str | None = None) -> dict[str, str]:
    """What a daemon's key is made of, by name, each part as a short hash: ``user``,
    ``interpreter`` (executable, version, ``sys.flags``, ``-W``, ``-X``), ``sys.path``,
    ``site-packages`` (the mtimes of those on ``sys.path``), ``package files``
    (:func:`package_fingerprint` of ``package_root``, default this package), and ``$NAME``
    for each variable of :func:`keyed_env` of ``env`` (default ``os.environ``)."""
    env = dict(os.environ) if env is None else env
    root = package_root or os.path.dirname(os.path.abspath(__file__))
    mtimes = []
    for entry in sys.path:
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            try:
                mtimes.append(os.stat(entry).st_mtime_ns)
            except OSError:
                mtimes.append(None)
    parts = {"user": os.getuid(),
             "interpreter": [sys.executable, sys.version, tuple(sys.flags), sys.warnoptions,
                             sorted(map(str, sys._xoptions.items()))],
             "sys.path": sys.path, "site-packages": mtimes,
             "package files": package_fingerprint(root)}
    parts.update({f"${name}": value for name, value in sorted(keyed_env(env).items())})
    return {name: _short_hash(value) for name, value in parts.items()}


def daemon_key(env: dict[str, str] | None = None, package_root: str | None = None) -> str:
    """The key of the daemon this process may use (hex, 24 characters): the hash of
    :func:`key_parts` (same arguments)."""
    return _short_hash(sorted(key_parts(env, package_root).items()))


def differing_parts(mine: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """The names of the :func:`key_parts` in which two processes differ (a variable set in
    only one of them counts)."""
    return sorted(name for name in mine.keys() | theirs.keys()
                  if mine.get(name) != theirs.get(name))


def _short_hash(value) -> str:
    return hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()[:24]


def socket_dir() -> str:
    """The directory of this user's daemon sockets (see the module docstring)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"proctor-daemon-{os.getuid()}")


def socket_path(key: str | None = None) -> str:
    """The socket of the daemon with ``key`` (default: :func:`daemon_key`)."""
    return os.path.join(socket_dir(), f"{key or daemon_key()}.sock")


def running_keys() -> list[str]:
    """The keys of this user's daemon sockets (some may be stale: a daemon killed)."""
    try:
        names = os.listdir(socket_dir())
    except OSError:
        return []
    return sorted(n[:-5] for n in names if n.endswith(".sock"))


def _own_dir(path: str, create: bool) -> bool:
    """Whether ``path`` is a directory of this user that nobody else can enter (made so,
    mode 0700, when ``create``)."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and st.st_mode & 0o077 == 0)


#: The lines of ``/proc/<pid>/status`` in :func:`process_kind`.
_STATUS_KIND = ("Gid", "Groups", "Cpus_allowed_list", "Mems_allowed_list", "NoNewPrivs",
                "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def process_kind(pid: int | str = "self") -> dict[str, str] | None:
    """What a command's process inherits beyond its environment, read from ``/proc/<pid>``:
    group and groups, capabilities, no-new-privileges and seccomp, namespaces, cgroup,
    resource limits, OOM score adjustment, LSM label, nice value, CPU and memory
    affinity. Two processes with equal kinds run a command alike (a Landlock domain is not
    visible there). None when it cannot be read."""
    where = f"/proc/{pid}"
    try:
        with open(f"{where}/status") as f:
            status = {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
        kind = {name: status.get(name, "") for name in _STATUS_KIND}
        kind["nice"] = str(os.getpriority(os.PRIO_PROCESS, 0 if pid == "self" else int(pid)))
        for name in ("cgroup", "limits"):
            with open(f"{where}/{name}") as f:
                kind[name] = f.read()
        for name in ("oom_score_adj", "attr/current"):
            try:
                with open(f"{where}/{name}") as f:
                    kind[name] = f.read()
            except OSError:  # not on this kernel (attr/current without an LSM: EINVAL)
                kind[name] = ""
        for ns in sorted(os.listdir(f"{where}/ns")):
            kind[f"ns/{ns}"] = os.readlink(f"{where}/ns/{ns}")
    except (OSError, ValueError):
        return None
    return kind


# ---- the client -------------------------------------------------------------------------


class _Interrupted(Exception):
    """A forwarded signal came before the daemon took the command: the command runs here."""


class _Forwarder:
    """The client's handlers of the forwarded signals. Before ``go``, a signal ends the
    handshake (:class:`_Interrupted`; it is raised again once the handlers are back, and
    the command runs here); after, each one is sent to the watcher. The signals this
    process ignores stay ignored (and are ignored in the runner too); ``proctor score``
    ignores neither SIGINT nor SIGTERM (:func:`proctor.launcher.main` takes them back)."""

    def __init__(self) -> None:
        self.conn: socket.socket | None = None
        self.kept: list[int] = []
        self.previous = {}
        self.ignored = []
        for signum in FORWARDED:
            handler = signal.getsignal(signum)
            if handler == signal.SIG_IGN:
                self.ignored.append(int(signum))
                continue
            self.previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum, _frame) -> None:
        if self.conn is None:
            self.kept.append(signum)
            if len(self.kept) == 1:  # once: the handshake ends, the rest is kept for later
                raise _Interrupted
            return
        try:
            self.conn.sendall(f"signal {signum}\n".encode())
        except OSError:
            pass

    def take(self, conn: socket.socket) -> None:
        """Send ``go``; from then on, signals go to the watcher. No signal is handled
        between the two (held meanwhile): a command is taken exactly when ``go`` is sent.

        Raises:
            OSError: ``go`` could not be sent (the command was not taken).
        """
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        try:
            conn.sendall(b"go\n")
            self.conn = conn
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

    def restore(self) -> None:
        """The previous handlers back (signals held while they change)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        try:
            for signum, handler in self.previous.items():
                signal.signal(signum, handler)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

    def replay(self) -> None:
        """The signals kept, raised again (once the handlers are back: the command runs
        here after all)."""
        for signum in self.kept:
            signal.raise_signal(signum)


def run_in_daemon(argv: list[str]) -> int | None:
    """Run ``proctor`` with ``argv`` (``argv[0]`` the program name) in this environment's
    daemon, if one runs: its exit status (a runner ended by a signal of
    :data:`ENDED_ALIKE` ends this process by the same signal), or None when no daemon took
    it (none runs for this code and environment, ``PROCTOR_DAEMON=0``, it declined, did
    not answer within ``$PROCTOR_DAEMON_WAIT_S`` (default 10 s), a signal came first, one
    of this process's standard streams is closed, or ``argv`` names one of its descriptors:
    :data:`OWN_PATHS`), and the caller runs the command itself. Once a daemon took it, it
    never runs here too. The command's output goes straight to this process's standard
    output and error."""
    if os.environ.get(DISABLE_ENV) == "0":
        return None
    try:
        path = socket_path()
        wait_s = _wait_s(os.environ.get(WAIT_ENV))
    except (OSError, ValueError):  # no key to be had, a bad wait: run it here
        return None
    if not os.path.exists(path) or not _own_dir(os.path.dirname(path), create=False):
        return None
    if not all(_is_open(fd) for fd in (0, 1, 2)):  # a closed stream is the command's to see
        return None
    if any(mark in arg for arg in argv for mark in OWN_PATHS):
        return None  # ``<(cmd)`` names a descriptor of this process, which no runner has
    deadline = time.monotonic() + wait_s
    forwarder = _Forwarder()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(_left(deadline))
        conn.connect(path)
        body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                           "umask": _umask(), "ignored": forwarder.ignored}).encode()
        conn.settimeout(_left(deadline))
        socket.send_fds(conn, [_HEADER.pack(len(body)) + body], [0, 1, 2])
        lines = _Lines(conn)
        conn.settimeout(_left(deadline))
        if lines.read() != b"ready":
            raise ConnectionError("declined")
        conn.settimeout(None)
        forwarder.take(conn)
    except (OSError, _Interrupted):  # a stale socket, a daemon gone, slow, declining
        forwarder.restore()
        conn.close()
        forwarder.replay()
        return None
    try:  # the command is the daemon's now
        line = (lines.read() or b"").decode(errors="replace").strip()
    except OSError:
        line = ""
    finally:
        conn.close()
        forwarder.restore()
    return _ended(line)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _left(deadline: float) -> float:
    """Seconds to ``deadline`` for one socket operation.

    Raises:
        TimeoutError: it has passed.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the daemon did not answer in time")
    return left


def _wait_s(text: str | None) -> float:
    """:data:`WAIT_ENV`'s seconds (default :data:`START_TIMEOUT_S`).

    Raises:
        ValueError: not a finite number of seconds >= 0.
    """
    wait_s = float(text) if text else START_TIMEOUT_S
    if not math.isfinite(wait_s) or wait_s < 0:
        raise ValueError(f"{WAIT_ENV}={text!r}: seconds >= 0 expected")
    return wait_s


def _ended(line: str) -> int:
    """The exit status the watcher's report ``line`` gives this process."""
    kind, _, value = line.partition(" ")
    if kind == "exit" and value.lstrip("-").isdigit():
        return int(value)
    if kind == "signal" and value.isdigit():
        signum = int(value)
        if signum in ENDED_ALIKE:
            sys.stdout.flush()
            if signum != signal.SIGKILL:  # its handler cannot be set
                signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        return 128 + signum
    sys.stderr.write("proctor: the daemon lost the command's exit status (it may have run, "
                     "or may still be ending); to run it apart from the daemon: "
                     "PROCTOR_DAEMON=0\n")
    return 3


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---- the server -------------------------------------------------------------------------


def serve(key: str, idle_s: float = IDLE_S, *, ready=None, spares=None) -> Request | None:
    """Serve the daemon with ``key`` on :func:`socket_path` until idle for ``idle_s``
    seconds (no command run), told to stop, ended by SIGTERM or SIGINT, or until another
    daemon takes over the socket. Returns None in this process once it ends (its socket
    removed, the commands it runs ended), and, in each runner forked for a command, the
    :class:`Request` to run (the runner's standard streams, directory, environment, umask
    and signals already the client's; the forwarded signals blocked until
    :func:`unblock_signals`). ``ready()`` is called once the socket accepts. ``spares``:
    what runners use that the daemon starts ahead while no command runs, an object with
    ``fill()`` (start what is missing; must not start threads), ``handed_over()`` (after a
    fork: the runner has them now), ``close()`` (the daemon ends) and ``len()`` (how many
    are started, in ``status``).

    Raises:
        DaemonError: the socket's directory is not this user's alone, or the socket cannot
            be made there.
    """
    path = socket_path(key)
    if not _own_dir(os.path.dirname(path), create=True):
        raise DaemonError(f"{os.path.dirname(path)} is not a directory of this user alone "
                          "(mode 0700): no daemon socket there")
    try:
        server = _Server(key, path, idle_s, spares)
    except OSError as exc:
        raise DaemonError(f"cannot listen on {path}: {exc}") from None
    try:
        gc.collect()
        gc.freeze()  # what is loaded now stays out of every runner's collections and exit
        if ready is not None:
            ready()
        return server.loop()
    finally:
        server.close()


class _Server:
    """The listening socket and the watchers of one daemon (see :func:`serve`)."""

    def __init__(self, key: str, path: str, idle_s: float, spares=None) -> None:
        self.key, self.path, self.idle_s, self.spares = key, path, idle_s, spares
        self.me = os.getpid()
        self.kind = process_kind()
        self.parts = key_parts()
        tmp = f"{path}.{self.me}.tmp"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.path.exists(tmp):
                os.unlink(tmp)
            self.listener.bind(tmp)
            self.listener.listen(64)
            self.inode = os.stat(tmp).st_ino  # a rename keeps it: ours whoever renames next
            os.replace(tmp, path)  # a dead daemon's socket goes; a live one's ends by itself
        except BaseException:
            self.listener.close()
            raise
        self.stopping: list[int] = []
        self.previous = {s: signal.signal(s, lambda signum, _f: self.stopping.append(signum))
                         for s in (signal.SIGTERM, signal.SIGINT)}
        # ignored, children would be reaped unseen: no watcher could report its runner's end
        self.previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.watchers: set[int] = set()
        self.started = self.last = time.monotonic()
        self.served = 0

    def _ours(self) -> bool:
        """Whether the socket path still leads to this daemon's socket."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def loop(self) -> Request | None:
        """Accept requests until the daemon ends (None) or, in a runner, the request."""
        while not self.stopping:
            _reap(self.watchers)
            if not self.watchers and time.monotonic() - self.last > self.idle_s:
                return None
            if not self._ours():  # another daemon took the socket
                return None
            if self.spares is not None and not self.watchers:  # idle: not a runner's CPU
                self.spares.fill()
            readable, _, _ = select.select([self.listener], [], [], 0.5)
            if not readable:
                continue
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    answer = self._answer(conn)
                except OSError:  # the client went away: nothing of its command ran
                    answer = None
                finally:
                    if os.getpid() == self.me:  # the client's streams: the runner's alone
                        _close_passed()
                if answer == "stop":
                    return None
                if isinstance(answer, Request):  # in the runner
                    return answer
        return None

    def _answer(self, conn: socket.socket) -> Request | str | None:
        """Handle one connection: "stop", the request in a runner, else None."""
        peer = _peer(conn)
        if peer is None:
            return None
        req = _take_request(conn)
        if req is None:
            return None
        if req.argv == ["--stop"]:
            conn.sendall(b"stopping\n")
            return "stop"
        if req.argv == ["--status"]:
            alike = self.kind is not None and process_kind(peer) == self.kind
            conn.sendall((json.dumps({"pid": self.me, "key": self.key, "served": self.served,
                                      "up_s": round(time.monotonic() - self.started, 1),
                                      "idle_s": self.idle_s, "serves_you": alike,
                                      "key_parts": self.parts,
                                      "spares": len(self.spares or ())})
                          + "\n").encode())
            return None
        import threading

        if threading.active_count() != 1:  # forking a threaded process is unsafe
            conn.sendall(b"busy\n")
            return None
        if self.kind is None or process_kind(peer) != self.kind:
            conn.sendall(b"differs\n")  # other limits, groups or namespaces: run it there
            return None
        try:
            pid = os.fork()
        except OSError:
            conn.sendall(b"busy\n")
            return None
        if pid == 0:  # the watcher; _watch returns only in the runner
            self.listener.close()
            return _watch(conn, req)
        self.watchers.add(pid)
        if self.spares is not None:
            self.spares.handed_over()
        self.served += 1
        self.last = time.monotonic()
        return None

    def close(self) -> None:
        """In the daemon (nothing in a runner): close the socket, remove it if it is still
        ours, restore the signals and wait for the watchers (their runners end on their
        own)."""
        if os.getpid() != self.me:
            return
        self.listener.close()
        if self.spares is not None:
            self.spares.close()
        if self._ours():
            try:
                os.unlink(self.path)
            except OSError:
                pass
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        while self.watchers:
            _reap(self.watchers)
            time.sleep(0.05)


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def _peer(conn: socket.socket) -> int | None:
    """The connecting process's pid, or None when it is not this user's."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("iII"))
    pid, uid, _gid = struct.unpack("iII", creds)
    return pid if uid == os.getuid() else None


#: The client's standard streams, received with the request being handled.
_PASSED: list[int] = []


def _close_passed() -> None:
    for fd in _PASSED:
        try:
            os.close(fd)
        except OSError:
            pass
    _PASSED.clear()


def _take_request(conn: socket.socket) -> Request | None:
    """The request (its three descriptors in :data:`_PASSED`), or None for a malformed
    one (its descriptors closed)."""
    end = time.monotonic() + REQUEST_TIMEOUT_S
    fds: list[int] = []
    try:
        conn.settimeout(REQUEST_TIMEOUT_S)
        data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
        while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack(
                data[:_HEADER.size])[0]:
            if len(data) > MAX_REQUEST or time.monotonic() > end:
                raise ValueError("request too large or too slow")
            conn.settimeout(max(0.01, end - time.monotonic()))
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("request cut short")
            data += chunk
        conn.settimeout(None)
        body = json.loads(data[_HEADER.size:])
        req = Request([str(a) for a in body["argv"]], str(body.get("cwd", "/")),
                      {str(k): str(v) for k, v in body.get("env", {}).items()},
                      int(body.get("umask", 0o022)),
                      [int(s) for s in body.get("ignored", [])])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        for fd in fds:
            os.close(fd)
        return None
    _PASSED[:] = fds
    if req.argv in (["--status"], ["--stop"]):
        _close_passed()
        return req
    if len(fds) != 3:
        _close_passed()
        return None
    return req


def _watch(conn: socket.socket, req: Request) -> Request:
    """In the watcher: fork the runner (which gets ``req`` back to run once released);
    once the runner is set up, tell the client ``ready`` (``busy`` if it could not be), let
    the runner go on the client's ``go``, forward its signals, report how the runner ended,
    and end. Returns only in the runner; the watcher always ends in here."""
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a terminal's hangup is not ours
        fds = list(_PASSED)
        set_r, set_w = os.pipe()
        gate_r, gate_w = os.pipe()
        runner = os.fork()
    except BaseException:
        os._exit(1)
    if runner == 0:
        return _runner(conn, req, fds, set_w, gate_r, (set_r, gate_w))
    try:
        for fd in (set_w, gate_r, *fds):
            os.close(fd)
        _serve_client(conn, req, runner, set_r, gate_w)
    except BaseException:
        os._exit(1)
    os._exit(0)


def _runner(conn, req: Request, fds: list[int], set_w: int, gate_r: int,
            others: tuple[int, int]) -> Request:
    """In the runner: become the client's process, say so to the watcher, wait to be let
    go (ended at once, nothing run, if not)."""
    try:
        conn.close()
        for fd in others:
            os.close(fd)
        _die_with_parent()
        _become_client(req, fds)
        os.write(set_w, b"s")
        os.close(set_w)
        released = os.read(gate_r, 1) == b"g"
        os.close(gate_r)
    except BaseException:  # the daemon's fault: said in its log (the watcher answers busy)
        os._exit(70)
    if not released:  # the client did not take it: nothing ran
        os._exit(70)
    return req


def _die_with_parent() -> None:
    """SIGTERM to this process when its parent (the watcher) ends: a runner never outlives
    the one process that reports its end to the client."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # it ended before the request took hold
        os._exit(70)


def _serve_client(conn: socket.socket, req: Request, runner: int, set_r: int,
                  gate_w: int) -> None:
    """The watcher's dialogue with the client (see :func:`_watch`)."""
    released = False
    try:
        set_up = os.read(set_r, 1) == b"s"
        os.close(set_r)
        try:
            wait_s = _wait_s(req.env.get(WAIT_ENV))
        except ValueError:
            wait_s = START_TIMEOUT_S
        conn.settimeout(wait_s + 5.0)
        if not set_up:  # the runner could not become the client's: it runs the command
            conn.sendall(b"busy\n")
            raise ConnectionError("the runner could not be set up")
        lines = _Lines(conn)
        conn.sendall(b"ready\n")
        if lines.read() != b"go":
            raise ConnectionError("the client did not take the command")
        conn.settimeout(None)
        os.write(gate_w, b"g")
        released = True
        os.close(gate_w)
        report = _follow_runner(lines, runner)
        try:
            conn.sendall(f"{report}\n".encode())
        except OSError:
            pass
    except BaseException:
        _kill(runner, signal.SIGTERM if released else signal.SIGKILL)
        try:
            os.waitpid(runner, 0)
        except ChildProcessError:
            pass
        raise


class _Lines:
    """Lines read from a socket, by ``recv`` (never more than what is there)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buf, self.eof = conn, b"", False

    def read(self) -> bytes | None:
        """The next line (without its newline), waiting for it; None at the end."""
        while b"\n" not in self.buf:
            if not self.take():
                return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def take(self) -> bool:
        """One ``recv`` into the buffer; False at the end."""
        chunk = self.conn.recv(4096)
        self.buf += chunk
        self.eof = not chunk
        return bool(chunk)

    def complete(self) -> list[bytes]:
        """The complete lines already read."""
        *done, self.buf = self.buf.split(b"\n")
        return done


def _follow_runner(lines: _Lines, runner: int) -> str:
    """Forward the client's signals until the runner ends (SIGTERM to it if the client
    goes away); how it ended: ``exit N`` or ``signal N``."""
    try:
        pidfd = os.pidfd_open(runner)
    except (AttributeError, OSError):  # no process descriptors here: look every POLL_S
        pidfd = None
    poller = select.poll()
    poller.register(lines.conn, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    client = True
    pending = lines.complete()
    while True:
        for line in pending:
            kind, _, value = line.decode(errors="replace").strip().partition(" ")
            if kind == "signal" and value.isdigit() and int(value) in FORWARDED:
                _kill(runner, int(value))
        pending = []
        done, status = os.waitpid(runner, os.WNOHANG)
        if done:
            break
        events = dict(poller.poll(None if pidfd is not None else POLL_S * 1000))
        if not client or lines.conn.fileno() not in events:
            continue
        try:
            more = lines.take()
        except OSError:
            more = False
        if not more:  # the client went away: end its command
            client = False
            poller.unregister(lines.conn)
            _kill(runner, signal.SIGTERM)
            continue
        pending = lines.complete()
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _become_client(req: Request, fds: list[int]) -> None:
    """In the runner: a session of its own; the client's streams as fds 0..2 (and ``sys``'s
    streams over them), its directory, environment, umask, argv and time zone; signals as a
    fresh interpreter has them, but those the client ignores, and the forwarded ones
    blocked until :func:`unblock_signals`."""
    import tempfile

    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    os.setsid()
    unbuffered = bool(getattr(sys.stdout, "write_through", False))  # ``python -u``
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    errors = getattr(sys.stdout, "errors", None) or "strict"
    for old in (sys.stdout, sys.stderr):
        try:
            old.flush()
        except (AttributeError, OSError, ValueError):
            pass
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    for target, fd in enumerate(high):
        os.dup2(fd, target)
        os.close(fd)
    # as the interpreter opens them: "\n" kept as is, stdout line-buffered on a terminal,
    # stderr line-buffered, both unbuffered with ``-u``
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                 encoding=encoding, errors=errors, newline="\n")
    sys.stdout = io.TextIOWrapper(_writer(1, unbuffered), encoding=encoding, errors=errors,
                                  newline="\n", line_buffering=os.isatty(1) and not unbuffered,
                                  write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(_writer(2, unbuffered), encoding=encoding,
                                  errors="backslashreplace", newline="\n",
                                  line_buffering=not unbuffered, write_through=unbuffered)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.chdir(req.cwd)
    os.environ.clear()
    os.environ.update(req.env)
    time.tzset()
    tempfile.tempdir = None  # read $TMPDIR again
    os.umask(req.umask)
    sys.argv = list(req.argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    for signum in req.ignored:
        signal.signal(signum, signal.SIG_IGN)


def _writer(fd: int, unbuffered: bool):
    raw = io.FileIO(fd, "w", closefd=False)
    return raw if unbuffered else io.BufferedWriter(raw)


def unblock_signals() -> None:
    """In a runner, once it runs the command: the forwarded signals, blocked since the
    fork, are delivered (any that came meanwhile now)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)


#: The request a runner was forked for, handed from ``proctor daemon run`` to the launcher.
_HANDED: list[Request] = []
#: Non-empty when this process runs under :func:`proctor.launcher.main`, which runs a
#: handed-over request (an entry point that does not would end every runner unrun).
LAUNCHED: list[bool] = []


def hand_over(req: Request) -> None:
    """In a runner: keep ``req`` for :func:`take_request` (``proctor daemon run``'s command
    returns, then the launcher runs ``req``)."""
    _HANDED[:] = [req]


def take_request() -> Request | None:
    """The request handed over in this process (once), or None: not a runner."""
    return _HANDED.pop() if _HANDED else None


# ---- asking a daemon ---------------------------------------------------------------------


def ask(op: str, key: str | None = None, timeout: float = 5.0) -> dict | None:
    """``op`` ("status" or "stop") to the daemon with ``key`` (default this environment's):
    its answer (status: ``pid``, ``key``, ``served``, ``up_s``, ``idle_s``; stop:
    ``{"stopping": True}``), or None when none answers."""
    path = socket_path(key)
    if not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(path)
        body = json.dumps({"argv": [f"--{op}"]}).encode()
        conn.sendall(_HEADER.pack(len(body)) + body)
        line = conn.makefile("rb").readline().decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        conn.close()
    if op == "stop":
        return {"stopping": True} if line == "stopping" else None
    try:
        return json.loads(line)
    except ValueError:
        return None
