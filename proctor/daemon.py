"""The CLI daemon: a process with Proctor's modules already imported that forks a fresh
process for each ``proctor score``, so that the command starts in milliseconds instead of
the ~0.6 s its imports cost (pydantic's models, docker-py, rich, typer).

Both ends of one protocol live here; this module imports the standard library only, so
that the client side (:func:`run_in_daemon`, called by :mod:`proctor.launcher` before any
other import) stays cheap.

- **Who may use a daemon**: a daemon serves only the processes that would have run exactly
  the same code in exactly the same way: the key (:func:`daemon_key`) covers the user, the
  interpreter, ``sys.path``, every file of the ``proctor`` package (path, size, mtime) and
  the mtime of each ``site-packages`` directory (a package installed or removed changes it),
  and the environment variables read at interpreter start or by Proctor
  (:data:`KEYED_ENV`). The socket is named by the key, so a client finds only a daemon of
  its own code; a daemon of older code is simply never used again and ends when idle.
- **What runs**: for each request the daemon forks a watcher, which forks the runner. The
  runner takes the client's standard input, output and error (passed over the socket), its
  working directory, its whole environment, its umask and its argv, resets every signal to
  the interpreter's default, then returns from :func:`serve` to run the command as a normal
  ``proctor`` process would (its exit, ``atexit`` handlers and threads as usual). The
  watcher reports the runner's exit status to the client (``exit N``, or ``signal N`` when
  a signal ended it), forwards the signals the client gets (SIGINT, SIGTERM, SIGHUP,
  SIGQUIT), and sends SIGTERM to the runner if the client goes away.
- **What differs from a process of its own**: the runner's resource limits, cgroup and
  session are the daemon's, not the client's shell's.
- **Safety**: the socket's directory is the user's own (mode 0700, checked by both ends),
  and the daemon serves only its own uid (``SO_PEERCRED``). It forks only while it has a
  single thread; otherwise it answers ``busy`` and the client runs the command itself.

Files: ``$XDG_RUNTIME_DIR`` (else ``/tmp``) ``/proctor-daemon-<uid>/<key>.sock``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
from dataclasses import dataclass

#: Environment variables that are part of a daemon's key: those the interpreter reads at
#: start (``PYTHON*``, the locale) and Proctor's own (read at run time, but a user who sets
#: one expects it to count). Every other variable is the client's in the runner, unkeyed.
KEYED_PREFIXES = ("PYTHON", "PROCTOR_", "LC_", "DOCKER_")
KEYED_ENV = ("LANG", "HOME", "PATH", "TMPDIR", "XDG_CACHE_HOME", "VIRTUAL_ENV")
#: ``PROCTOR_DAEMON=0``: never hand a command to a daemon (not part of the key).
DISABLE_ENV = "PROCTOR_DAEMON"
#: Seconds a daemon waits for a request before it ends.
IDLE_S = 900.0
#: Signals the client forwards to the runner.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Seconds a client waits for the daemon to start its command before running it itself (the
#: command, should it start later, is ended at once: its client is gone).
START_TIMEOUT_S = 10.0
#: The request's size limit (argv and environment).
MAX_REQUEST = 4 * 1024 * 1024
_HEADER = struct.Struct("!I")
_FINGERPRINT_SKIP = {"__pycache__"}


class DaemonError(Exception):
    """A daemon could not be started, reached or stopped (the message says why)."""


@dataclass(frozen=True)
class Request:
    """What the runner runs: the client's ``argv`` (``argv[0]`` its program name), working
    directory ``cwd``, environment ``env`` and ``umask``."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int


def package_fingerprint(root: str) -> str:
    """sha256 over every file under ``root`` (``__pycache__`` skipped): relative path, size
    and mtime in ns, sorted. A change to any of Proctor's files changes it."""
    digest = hashlib.sha256()
    entries = []
    stack = [root]
    while stack:
        top = stack.pop()
        with os.scandir(top) as it:
            for entry in it:
                if entry.name in _FINGERPRINT_SKIP:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    st = entry.stat(follow_symlinks=True)
                    entries.append(f"{os.path.relpath(entry.path, root)}\0{st.st_size}\0"
                                   f"{st.st_mtime_ns}")
    for line in sorted(entries):
        digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def keyed_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` that is in a daemon's key (:data:`KEYED_PREFIXES`,
    :data:`KEYED_ENV`; never :data:`DISABLE_ENV`)."""
    return {k: v for k, v in env.items()
            if k != DISABLE_ENV and (k in KEYED_ENV or k.startswith(KEYED_PREFIXES))}


def daemon_key(env: dict[str, str] | None = None, package_root: str | None = None) -> str:
    """The key of the daemon this process may use (hex, 24 characters): user, interpreter,
    ``sys.path`` and the mtimes of its ``site-packages`` directories, the package's files
    (:func:`package_fingerprint` of ``package_root``, default this package) and
    :func:`keyed_env` of ``env`` (default ``os.environ``)."""
    env = dict(os.environ) if env is None else env
    root = package_root or os.path.dirname(os.path.abspath(__file__))
    mtimes = []
    for entry in sys.path:
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            try:
                mtimes.append(os.stat(entry).st_mtime_ns)
            except OSError:
                mtimes.append(None)
    parts = [os.getuid(), sys.executable, sys.version, sys.path, mtimes,
             package_fingerprint(root), sorted(keyed_env(env).items())]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:24]


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
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and st.st_mode & 0o077 == 0)


# ---- the client -------------------------------------------------------------------------


def run_in_daemon(argv: list[str]) -> int | None:
    """Run ``proctor`` with ``argv`` (``argv[0]`` the program name) in this environment's
    daemon, if one runs: its exit status (this process then ends the same way: a runner
    ended by signal N ends this process with N too), or None when no daemon may take it
    (none runs for this code and environment, ``PROCTOR_DAEMON=0``, it is busy), and the
    caller runs the command itself. The command's output goes straight to this process's
    standard output and error."""
    if os.environ.get(DISABLE_ENV) == "0":
        return None
    path = socket_path()
    if not os.path.exists(path) or not _own_dir(os.path.dirname(path), create=False):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                           "umask": _umask()}).encode()
        socket.send_fds(conn, [_HEADER.pack(len(body)) + body], [0, 1, 2])
        conn.settimeout(START_TIMEOUT_S)
        reply = _read_line(conn)
        conn.settimeout(None)
    except OSError:  # a stale socket, a daemon gone or stuck: run it here
        conn.close()
        return None
    if reply != "started":
        conn.close()
        return None
    return _follow(conn)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def _follow(conn: socket.socket) -> int:
    """Forward this process's signals to the runner until the watcher reports how it
    ended."""
    previous = {}

    def forward(signum, _frame):
        try:
            conn.sendall(f"signal {signum}\n".encode())
        except OSError:
            pass

    for signum in FORWARDED:
        previous[signum] = signal.signal(signum, forward)
    try:
        line = _read_line(conn)
    finally:
        conn.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    kind, _, value = line.partition(" ")
    if kind == "exit" and value.lstrip("-").isdigit():
        return int(value)
    if kind == "signal" and value.isdigit():
        signum = int(value)
        sys.stdout.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    sys.stderr.write("proctor: the daemon's runner ended without an exit status; "
                     "run the command again with PROCTOR_DAEMON=0\n")
    return 3


# ---- the server -------------------------------------------------------------------------


def serve(key: str, idle_s: float = IDLE_S, *, ready=None) -> Request | None:
    """Serve the daemon with ``key`` on :func:`socket_path` until idle for ``idle_s``
    seconds, told to stop, ended by SIGTERM or SIGINT, or until another daemon takes over
    the socket. Returns None in this process once it ends (its socket removed), and, in
    each runner forked for a request, the :class:`Request` to run (the runner's standard
    streams, working directory, environment, umask and signals already the client's).
    ``ready()`` is called once the socket accepts.

    Raises:
        DaemonError: the socket's directory is not this user's alone.
    """
    path = socket_path(key)
    if not _own_dir(os.path.dirname(path), create=True):
        raise DaemonError(f"{os.path.dirname(path)} is not a directory of this user alone "
                          "(mode 0700): no daemon socket there")
    server = _Server(key, path, idle_s)
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

    def __init__(self, key: str, path: str, idle_s: float) -> None:
        self.key, self.path, self.idle_s = key, path, idle_s
        self.me = os.getpid()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = f"{path}.{self.me}.tmp"
        self.listener.bind(tmp)
        self.listener.listen(64)
        os.replace(tmp, path)  # a dead daemon's stale socket goes; a live one's ends itself
        self.inode = os.stat(path).st_ino
        self.stopping: list[int] = []
        self.previous = {s: signal.signal(s, lambda signum, _f: self.stopping.append(signum))
                         for s in (signal.SIGTERM, signal.SIGINT)}
        self.watchers: set[int] = set()
        self.started = self.last = time.monotonic()
        self.served = 0

    def _ours(self) -> bool:
        """Whether the socket path still leads to this daemon's socket."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except FileNotFoundError:
            return False

    def loop(self) -> Request | None:
        """Accept requests until the daemon ends (None) or, in a runner, the request."""
        while not self.stopping:
            _reap(self.watchers)
            if not self.watchers and time.monotonic() - self.last > self.idle_s:
                return None
            if not self._ours():  # another daemon took the socket
                return None
            readable, _, _ = select.select([self.listener], [], [], 0.5)
            if not readable:
                continue
            conn, _ = self.listener.accept()
            self.last = time.monotonic()
            with conn:
                if not _same_user(conn):
                    continue
                req = _take_request(conn)
                if req is None:
                    continue
                if req.argv == ["--stop"]:
                    conn.sendall(b"stopping\n")
                    return None
                try:
                    runner = self._handle(conn, req)
                finally:
                    if os.getpid() == self.me:  # the client's streams are the runner's alone
                        for fd in _PASSED:
                            os.close(fd)
                        _PASSED.clear()
                if runner is not None:
                    return runner
        return None

    def _handle(self, conn: socket.socket, req: Request) -> Request | None:
        """Answer a status request, or fork the watcher and its runner: None here, the
        request in the runner."""
        if req.argv == ["--status"]:
            conn.sendall((json.dumps({"pid": self.me, "key": self.key, "served": self.served,
                                      "up_s": round(time.monotonic() - self.started, 1),
                                      "idle_s": self.idle_s}) + "\n").encode())
            return None
        import threading

        if threading.active_count() != 1:  # forking a threaded process is unsafe
            conn.sendall(b"busy\n")
            return None
        pid = os.fork()
        if pid == 0:  # the watcher; _watch returns only in the runner
            self.listener.close()
            runner = _watch(conn, req)
            for signum, handler in self.previous.items():
                signal.signal(signum, handler)
            return runner
        self.watchers.add(pid)
        self.served += 1
        return None

    def close(self) -> None:
        """In the daemon (nothing in a runner): close the socket, remove it if it is still
        ours, restore the signals and wait for the watchers (their runners end on their
        own)."""
        if os.getpid() != self.me:
            return
        self.listener.close()
        if self._ours():
            os.unlink(self.path)
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


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _take_request(conn: socket.socket) -> Request | None:
    """The request and its three descriptors (kept as fds 0..2 of the runner later), or
    None for a malformed one."""
    conn.settimeout(5.0)
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
        while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack(
                data[:_HEADER.size])[0]:
            if len(data) > MAX_REQUEST:
                raise ValueError("request too large")
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("request cut short")
            data += chunk
        body = json.loads(data[_HEADER.size:])
        req = Request([str(a) for a in body["argv"]], str(body.get("cwd", "/")),
                      {str(k): str(v) for k, v in body.get("env", {}).items()},
                      int(body.get("umask", 0o022)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        conn.settimeout(None)
    if req.argv in (["--status"], ["--stop"]):
        for fd in fds:
            os.close(fd)
        return req
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    _PASSED[:] = fds
    return req


#: The client's standard streams, received with the request being handled.
_PASSED: list[int] = []


def _watch(conn: socket.socket, req: Request) -> Request | None:
    """In the watcher: fork the runner (which gets ``req`` back to run), tell the client it
    started, forward its signals, report how the runner ended, and end."""
    fds = list(_PASSED)
    try:
        runner = os.fork()
    except OSError:
        os._exit(1)
    if runner == 0:
        conn.close()
        _become_client(req, fds)
        return req
    for fd in fds:
        os.close(fd)
    code = 3
    try:
        conn.sendall(b"started\n")
        pidfd = os.pidfd_open(runner)
        buf = b""
        open_conn = True
        while True:
            readable, _, _ = select.select([pidfd] + ([conn] if open_conn else []), [], [])
            if pidfd in readable:
                break
            chunk = conn.recv(256)
            if not chunk:  # the client went away: end its command
                open_conn = False
                _kill(runner, signal.SIGTERM)
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                kind, _, value = line.decode(errors="replace").partition(" ")
                if kind == "signal" and value.isdigit() and int(value) in FORWARDED:
                    _kill(runner, int(value))
        _, status = os.waitpid(runner, 0)
        if os.WIFSIGNALED(status):
            report = f"signal {os.WTERMSIG(status)}"
        else:
            code = os.waitstatus_to_exitcode(status)
            report = f"exit {code}"
        if open_conn:
            conn.sendall(f"{report}\n".encode())
        code = 0
    except OSError:
        pass
    finally:
        os._exit(code)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _become_client(req: Request, fds: list[int]) -> None:
    """In the runner: the client's streams as fds 0..2 (and ``sys``'s streams over them),
    its directory, environment, umask and argv; signals as a fresh interpreter has them."""
    import io
    import tempfile

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    encoding = sys.stdout.encoding or "utf-8"
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                 encoding=encoding, errors=sys.stdin.errors or "strict")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                  encoding=encoding, errors=sys.stdout.errors or "strict",
                                  line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                  encoding=encoding, errors="backslashreplace",
                                  line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.chdir(req.cwd)
    os.environ.clear()
    os.environ.update(req.env)
    tempfile.tempdir = None  # read $TMPDIR again
    os.umask(req.umask)
    sys.argv = list(req.argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)


#: The request a runner was forked for, handed from ``proctor daemon run`` to the launcher.
_HANDED: list[Request] = []


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
        line = _read_line(conn)
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
