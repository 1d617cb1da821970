"""Host mutant generator processes: how one is started, asked and ended, and the ones
started ahead of the score that will use them (standard library only, so that the
``proctor`` launcher can start one before its heavy imports).

A generator is ``mutmut_adapter.py serve`` (``proctor/suites/incontainer``) run by an
interpreter with the sandbox's mutmut and libcst on its path: one JSON request per line on
its stdin, one answer per line on its stdout, its first line saying it is ready and with
which versions. It ends when its stdin closes. :mod:`proctor.suites.mutant_generator` keeps
pools of them; this module holds the processes.

Started ahead (*spares*): a process starts its generator at its first score, where loading
mutmut and libcst takes CPU from the two sandboxes' test runs (~0.35 s of that score's wall
time on 2 cores). So the generator a score started is recorded (:func:`remember`, in
``<daemon key>.generator.json`` beside the daemon's logs), and the next process starts the
same one ahead: ``proctor score`` at its own start, on the core its imports leave idle
(:func:`start_early`); the CLI daemon while no command runs, for the runner it forks next
(:class:`Spares`). A pool takes a spare whose argv it would have started itself
(:func:`adopt`): the same interpreter, libraries and code, so the same mutants. A record
runs only :func:`argvs`' boot code, in its first way (confined when bubblewrap is there),
with this interpreter or a tools venv's and libraries from the tools' caches, from a file of
this user's alone (:func:`recorded`).
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from proctor import cache_dirs

ADAPTER_DIR = Path(__file__).resolve().parent / "suites" / "incontainer"
#: Address-space limit of a generator process (bytes).
MEMORY_LIMIT_BYTES = 2 << 30
#: Seconds to wait for a generator to load mutmut.
START_TIMEOUT_S = 30.0
#: Seconds before a generator that could not start (or a spare that died unused) is tried
#: again.
BROKEN_RETRY_S = 300.0

_BOOT = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, ({mem}, {mem}))\n"
    "sys.path[:0] = {path!r}\n"
    "import mutmut_adapter\n"
    "sys.exit(mutmut_adapter.main(['serve']))\n"
)


class Server:
    """One ``mutmut_adapter.py serve`` process. ``ask`` returns its answer or None (the
    process is then dead: timeout, crash, garbage).

    ``mutmut``: the version it must say it loaded, waited for here (else :meth:`ensure_ready`
    reads its ready line later: a spare). ``detached``: started for another process to use
    (:class:`Spares`): not a child of this process (it runs under a short-lived
    intermediate, so the starter never reaps it and no ``waitpid`` of a forked user can go
    wrong), known by a pidfd.

    Raises:
        OSError: it could not be started, or did not say it loaded ``mutmut``.
    """

    def __init__(self, argv: list[str], *, mutmut: str | None = None,
                 detached: bool = False) -> None:
        self.argv = argv
        self._buf = b""
        self.timed_out = False  # the last read ran out of time (not a dead process)
        self.versions: dict | None = None
        self.proc: subprocess.Popen | None = None
        self.pidfd: int | None = None
        if detached:
            self.pidfd, stdin_fd, self._out = _spawn_detached(argv)
            self._in = os.fdopen(stdin_fd, "wb")
            return
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                                     start_new_session=True)
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        if mutmut is not None and not self.ensure_ready(mutmut):
            raise OSError(f"the generator did not start with mutmut {mutmut}: "
                          f"{self.versions!r}")

    def ensure_ready(self, mutmut: str) -> bool:
        """Whether the process said it is ready with mutmut ``mutmut`` (read once, up to
        :data:`START_TIMEOUT_S`); if not, it is closed."""
        if self.versions is None:
            ready = self._read_line(START_TIMEOUT_S)
            self.versions = (ready or {}).get("ready") or {}
        if self.versions.get("mutmut") != mutmut:
            self.close()
            return False
        return True

    def ask(self, request: dict, timeout: float) -> dict | None:
        """Send ``request``; its answer, or None (the process is then closed) when it did
        not come within ``timeout`` seconds or was no JSON object."""
        try:
            self._in.write(json.dumps(request).encode() + b"\n")
            self._in.flush()
        except (OSError, ValueError):
            self.close()
            return None
        answer = self._read_line(timeout)
        if answer is None:
            self.close()
        return answer

    def _read_line(self, timeout: float) -> dict | None:
        end = time.monotonic() + timeout
        self.timed_out = False
        fd = self._out
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if fd < 0 or left <= 0 or not select.select([fd], [], [], left)[0]:
                self.timed_out = fd >= 0
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            data = json.loads(line)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    @property
    def alive(self) -> bool:
        """Whether the process still runs."""
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pidfd is not None and not select.select([self.pidfd], [], [], 0)[0]

    def close(self) -> None:
        """Kill the process and close this process's ends of its pipes."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        elif self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass
        self._close_pipes()

    def release(self) -> None:
        """Close this process's ends only (the process goes on for a forked user)."""
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None:
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            return
        for close in (self._in.close, lambda: os.close(self._out),
                      lambda: os.close(self.pidfd) if self.pidfd is not None else None):
            try:
                close()
            except (OSError, TypeError):
                pass
        self._out, self.pidfd = -1, None


def _spawn_detached(argv: list[str]) -> tuple[int, int, int]:
    """Start ``argv`` under a short-lived intermediate process (so it is not this process's
    child): (a pidfd of it, the write end of its stdin, the read end of its stdout). The
    intermediate lives until the pidfd is open, so the pid cannot have been reused by then
    (the process is the intermediate's child, a zombie at worst).

    Raises:
        OSError: no process could be started.
    """
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    said_r, said_w = os.pipe()
    go_r, go_w = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        for fd in (in_r, in_w, out_r, out_w, said_r, said_w, go_r, go_w):
            os.close(fd)
        raise
    if middle == 0:  # the intermediate: start the server, say its pid, wait, end
        code = 1
        try:
            proc = subprocess.Popen(argv, stdin=in_r, stdout=out_w,
                                    stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                                    start_new_session=True)
            os.write(said_w, str(proc.pid).encode())
            os.close(said_w)
            os.close(go_w)
            os.read(go_r, 1)  # until the starter closes it: its pidfd is open
            code = 0
        finally:
            os._exit(code)
    for fd in (in_r, out_w, said_w, go_r):
        os.close(fd)
    pidfd = -1
    try:
        said = os.read(said_r, 32)
        if said.isdigit():
            pidfd = os.pidfd_open(int(said))
    except OSError:
        pass
    finally:
        os.close(said_r)
        os.close(go_w)
        os.waitpid(middle, 0)
    if pidfd < 0:
        os.close(in_w)
        os.close(out_r)
        raise OSError(f"could not start {argv[0]}")
    return pidfd, in_w, out_r


def argvs(python: str, path: list[str]) -> list[list[str]]:
    """How to start a generator: confined by bubblewrap when it is there (read-only view of
    only the interpreter and the libraries, no network, own PID namespace, and an
    unprivileged user when we are root: libcst parses the patch's code), else plain."""
    argv = [python, "-I", "-S", "-B", "-c",
            _BOOT.format(mem=MEMORY_LIMIT_BYTES, path=[str(ADAPTER_DIR), *path])]
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return [argv]
    # no --die-with-parent: that is PR_SET_PDEATHSIG, tied to the *thread* that started the
    # process (a scoring pool's thread, which ends with its rollout), so every idle server
    # would die before its next request. The server ends at the end of its stdin instead,
    # which closes with this process however it ends.
    confined = [bwrap, "--unshare-all", "--new-session",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/"]
    if os.geteuid() == 0:
        confined += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
    seen = {"/usr", "/bin", "/lib", "/lib64", "/lib32", sys.base_prefix, sys.prefix,
            str(Path(python).resolve().parent), str(Path(python).parent.parent), str(ADAPTER_DIR),
            *path}
    for p in sorted(seen):
        confined += ["--ro-bind-try", p, p]
    return [confined + ["--", *argv], argv]


#: The record of the last generator started (set by :func:`start_early` or :class:`Spares`;
#: a daemon's runners inherit it).
_record: Path | None = None
#: Spares, by argv, until a pool adopts them (a daemon's: until a fork hands them over).
_spares: dict[tuple[str, ...], Server] = {}


def record_path(key: str) -> Path:
    """Where the generator started under daemon key ``key`` is recorded (its directory
    made)."""
    logs = cache_dirs.daemon_logs()
    logs.mkdir(parents=True, exist_ok=True)
    return logs / f"{key}.generator.json"


def remember(origin: tuple[str, list[str]] | None, argv: list[str]) -> None:
    """Record the generator just started (``argv``, made by :func:`argvs` from ``origin`` =
    (python, library path)) for the next process's spare; only its first way (confined
    when bubblewrap is there): a start that fell back to the plain way is not made a habit."""
    if _record is None or origin is None or argv != argvs(*origin)[0]:
        return
    try:
        text = json.dumps({"python": origin[0], "path": origin[1], "argv": argv})
        if _read_record() == text:
            return
        tmp = _record.with_name(f".{_record.name}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, _record)
    except OSError:  # only a head start for the next process
        pass


def _read_record() -> str | None:
    """The record's text, if it is a regular file of this user's that no one else may
    write (read from the descriptor that was checked; opened without blocking, so a FIFO
    in its place is refused, not waited on)."""
    try:
        fd = os.open(_record, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (OSError, TypeError):
        return None
    with os.fdopen(fd) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        return f.read(1 << 20)


def recorded() -> list[str] | None:
    """The recorded generator's argv, if the record is this user's own file and names the
    first way :func:`argvs` starts one with this interpreter or a tools venv's
    (``<venvs>/<id>/bin/python``), and libraries from the tools' caches only (absolute
    paths): so what runs is this module's boot code with the sandbox's tools."""
    try:
        data = json.loads(_read_record() or "null")
        python, path, argv = data["python"], data["path"], data["argv"]
        if not isinstance(python, str) or not isinstance(path, list) or not all(
                isinstance(x, str) and os.path.isabs(x) for x in path):
            return None
        trusted = [cache_dirs.gen_tools().resolve(), cache_dirs.venvs().resolve()]
        venv_python = Path(python)
        if python != sys.executable and not (
                venv_python.name == "python" and venv_python.parent.name == "bin"
                and venv_python.parent.parent.parent.resolve() == trusted[1]):
            return None
        if not all(any(Path(x).resolve().is_relative_to(t) for t in trusted) for x in path):
            return None
        return argv if argv == argvs(python, path)[0] else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def adopt(candidates: list[list[str]]) -> tuple[list[str], Server] | None:
    """A spare started as the first of ``candidates`` (a pool's ways to start its
    generator, in order), now the caller's; None if there is none."""
    spare = _spares.pop(tuple(candidates[0]), None) if candidates else None
    return None if spare is None else (candidates[0], spare)


def start_early(record: Path) -> None:
    """In a process about to score (``proctor score``, before its heavy imports): set the
    record and start the generator it names as this process's own child, not waited for
    (a pool adopts it). Never raises: only a head start."""
    global _record
    _record = record
    if os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0":
        return
    argv = recorded()
    if argv is None:
        return
    try:
        _spares[tuple(argv)] = Server(argv)
    except OSError:
        pass


def close_spares() -> None:
    """End the spares no pool took (this process's own and inherited ones)."""
    for spare in _spares.values():
        spare.close()
    _spares.clear()


class Spares:
    """The CLI daemon's (:func:`proctor.daemon.serve`'s ``spares``): at most one
    generator started ahead, like the one its last runner started (recorded in ``record``,
    a file of this user's). Single-threaded, as the daemon must stay to fork: a spare's
    start does not wait for it to load, and it is never this process's child."""

    def __init__(self, record: Path) -> None:
        global _record
        _record = record
        self.failed_at = -math.inf  # when a spare last died unused or could not start

    def fill(self) -> None:
        """Start a spare unless a live one is there, or one died unused less than
        :data:`BROKEN_RETRY_S` seconds ago (call while no command runs)."""
        for argv, spare in list(_spares.items()):
            if not spare.alive:
                spare.close()
                del _spares[argv]
                self.failed_at = time.monotonic()
        if _spares or os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0" or not hasattr(
                os, "pidfd_open") or time.monotonic() - self.failed_at < BROKEN_RETRY_S:
            return
        if threading.active_count() != 1:  # its start forks: never a threaded process
            return
        argv = recorded()
        if argv is None:
            return
        try:
            _spares[tuple(argv)] = Server(argv, detached=True)
        except OSError:
            self.failed_at = time.monotonic()

    @staticmethod
    def handed_over() -> None:
        """After a fork: the child has the spares; this process lets go of them."""
        for spare in _spares.values():
            spare.release()
        _spares.clear()

    @staticmethod
    def close() -> None:
        """End the spares not handed over."""
        close_spares()

    def __len__(self) -> int:
        return len(_spares)
