"""Mutant generation on the host, in warm long-lived processes (the CPU of each rollout).

Generating mutants in the sandbox costs every rollout a fresh interpreter that loads mutmut
and libcst (~0.3 s of CPU, most of the step's preparation). Generation only *parses* the
patched sources (no code of the repo runs), so it can run on the host in a process that
stays up: ``mutmut_adapter.py serve`` (the same code, the same mutmut and libcst as the
sandbox's, so the same mutants, see ``tests/test_mutant_generator.py``).

Where its libraries come from:

* docker backend: the image's own ``site-packages``, copied once per image id into
  ``$PROCTOR_CACHE_DIR/gen-tools/<image id>`` and run by this host's Python, which must be
  the image's version (:data:`~proctor.sandbox.toolchain.SANDBOX_PYTHON`); ``-I -S``, so
  nothing of the host's environment is on its path;
* local backend: the tools venv's own interpreter.

Confinement: libcst parses the patch's code, so the process runs under bubblewrap when it
is there (read-only view of the interpreter and the libraries only, no network, its own
PID namespace, an unprivileged user namespace and no capabilities when we are root); where
bubblewrap is missing or cannot start, it runs unconfined with the same limits.

Anything that goes wrong (another Python, a library that will not load, a request over its
timeout, a dead process, an answer it cannot give) makes :func:`generate` return None: the
caller then generates in the sandbox as before, whose verdict stands. The process has an
address-space limit (:data:`MEMORY_LIMIT_BYTES`) and each request a timeout, so a
pathological source cannot take the host down. Thread-safe: each concurrent caller gets a
process of its own from a small pool. The processes stay up between rollouts (the first is
started ahead, :func:`warm`) and end when their stdin closes, which it does with this
process however it ends.
"""

from __future__ import annotations

import atexit
import io
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from proctor import cache_dirs
from proctor.sandbox import SANDBOX_PYTHON, SANDBOX_TOOLS

ADAPTER_DIR = Path(__file__).resolve().parent / "incontainer"
#: Address-space limit of a generator process (bytes).
MEMORY_LIMIT_BYTES = 2 << 30
#: Seconds to wait for a generator to load mutmut, and for one answer by default.
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 10.0
#: Seconds a pool whose generator could not start waits before it is tried again.
BROKEN_RETRY_S = 300.0
SITE_PACKAGES = f"/opt/proctor/venv/lib/python{SANDBOX_PYTHON}/site-packages"

_BOOT = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, ({mem}, {mem}))\n"
    "sys.path[:0] = {path!r}\n"
    "import mutmut_adapter\n"
    "sys.exit(mutmut_adapter.main(['serve']))\n"
)


class _Server:
    """One ``mutmut_adapter.py serve`` process. ``ask`` returns its answer or None (the
    process is then dead: timeout, crash, garbage).

    ``detached``: started for another process to use (:class:`Spares`): not a child of
    this process (it runs under a short-lived intermediate, so the starter never reaps it
    and no ``waitpid`` of a forked user can go wrong), known by a pidfd, and not waited for:
    its ready line is read by whoever takes it (:meth:`ensure_ready`)."""

    def __init__(self, argv: list[str], *, detached: bool = False) -> None:
        self.argv = argv
        self._buf = b""
        self.timed_out = False  # the last read ran out of time (not a dead process)
        self.versions: dict | None = None
        self.proc: subprocess.Popen | None = None
        self.pidfd: int | None = None
        if detached:
            pid, stdin_fd, self._out = _spawn_detached(argv)
            self._in = os.fdopen(stdin_fd, "wb")
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self._close_pipes()
                raise
            return
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                                     start_new_session=True)
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        if not self.ensure_ready():
            raise OSError(f"the generator did not start with mutmut "
                          f"{SANDBOX_TOOLS['mutmut']}: {self.versions!r}")

    def ensure_ready(self) -> bool:
        """Whether the process said it is ready with the sandbox's mutmut (read once, up to
        :data:`START_TIMEOUT_S`); if not, it is closed."""
        if self.versions is None:
            ready = self._read_line(START_TIMEOUT_S)
            self.versions = (ready or {}).get("ready") or {}
        if self.versions.get("mutmut") != SANDBOX_TOOLS["mutmut"]:
            self.close()
            return False
        return True

    def ask(self, request: dict, timeout: float) -> dict | None:
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
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pidfd is not None and not select.select([self.pidfd], [], [], 0)[0]

    def close(self) -> None:
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
    child): (its pid, the write end of its stdin, the read end of its stdout).

    Raises:
        OSError: no process could be started.
    """
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    said_r, said_w = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        for fd in (in_r, in_w, out_r, out_w, said_r, said_w):
            os.close(fd)
        raise
    if middle == 0:  # the intermediate: start the server, say its pid, end
        code = 1
        try:
            proc = subprocess.Popen(argv, stdin=in_r, stdout=out_w,
                                    stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                                    start_new_session=True)
            os.write(said_w, str(proc.pid).encode())
            code = 0
        finally:
            os._exit(code)
    for fd in (in_r, out_w, said_w):
        os.close(fd)
    os.waitpid(middle, 0)
    said = os.read(said_r, 32)
    os.close(said_r)
    if not said.isdigit():
        os.close(in_w)
        os.close(out_r)
        raise OSError(f"could not start {argv[0]}")
    return int(said), in_w, out_r


class _Pool:
    """Idle servers of one interpreter + library path, reused across rollouts. ``argvs``:
    ways to start one, tried in order until one starts (then kept).

    A pool whose servers cannot start is *broken* for :data:`BROKEN_RETRY_S` seconds, then
    tried again: a start that failed because the machine was loaded (the generator did not
    answer within :data:`START_TIMEOUT_S`) does not disable host generation for the life of
    the process, and a pool with nothing to start (``argvs`` empty) is not started at all.
    An idle server that died while it waited is dropped, and a request that a reused
    server could not take (its process gone, not a timeout) is asked once more of a fresh
    one."""

    def __init__(self, argvs: list[list[str]],
                 origin: tuple[str, list[str]] | None = None) -> None:
        self.argvs = argvs
        self.origin = origin  # (python, library path) the argvs were made from
        self.idle: list[_Server] = []
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)  # a warming server was added, or failed
        self.broken: str | None = None  # why the last start failed, while it stands
        self.broken_at = 0.0  # time.monotonic() of that failure
        self.warming = False  # a server is being started for ``idle`` (:meth:`warm`)

    def warm(self) -> None:
        """Start one server for ``idle`` unless one is idle or being started, or the pool
        is broken (blocks while it starts: call it from a background thread, see
        :func:`warm`). A request meanwhile waits for that server rather than start its own."""
        with self.lock:
            if self.idle or self.warming or not self.argvs or (
                    self.broken and time.monotonic() - self.broken_at < BROKEN_RETRY_S):
                return
            self.warming = True
        server = None
        try:
            server = self._start()
        finally:
            with self.lock:
                if server is not None:
                    self.idle.append(server)
                self.warming = False
                self.ready.notify_all()

    def generate(self, files: dict, timeout: float, max_mutants: int | None = None,
                 seed: int = 0, import_roots: list[str] = ()) -> dict | None:
        request = {"files": files, "max_mutants": max_mutants, "seed": seed,
                   "import_roots": list(import_roots)}
        server, reused = self._take()
        if server is None:
            return None
        started = time.monotonic()
        answer = server.ask(request, timeout)
        if answer is None and reused and not server.timed_out:
            server, _ = self._take(fresh=True)  # the idle one had died: a new one, once
            if server is None:
                return None
            answer = server.ask(request, max(1.0, timeout - (time.monotonic() - started)))
        if server.alive:
            with self.lock:
                self.idle.append(server)
        return answer

    def _take(self, fresh: bool = False) -> tuple[_Server | None, bool]:
        """An idle live server (reused=True) or a newly started one; None if none starts."""
        dead = []
        server = None
        with self.lock:
            if self.broken and time.monotonic() - self.broken_at < BROKEN_RETRY_S:
                return None, False
            if not fresh:  # a server being warmed is sooner than a new one
                self.ready.wait_for(lambda: self.idle or not self.warming, START_TIMEOUT_S)
            while self.idle and not fresh:
                candidate = self.idle.pop()
                if candidate.alive:
                    server = candidate
                    break
                dead.append(candidate)
        for s in dead:
            s.close()
        if server is not None and server.ensure_ready():  # a spare reads its ready line here
            return server, True
        return self._start(), False

    def _start(self) -> _Server | None:
        problems = []
        for argv in list(self.argvs):
            try:
                server = _Server(argv)
            except OSError as exc:
                problems.append(str(exc))
                continue
            self.argvs = [argv]  # what worked, from now on
            with self.lock:
                self.broken = None
            _remember(self.origin, argv)
            return server
        with self.lock:
            self.broken = "; ".join(problems) or "no interpreter with these tools"
            self.broken_at = time.monotonic()
        return None

    def close(self) -> None:
        with self.lock:
            servers, self.idle = self.idle, []
        for s in servers:
            s.close()


_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()
atexit.register(lambda: close_all())


def _argvs(python: str, path: list[str]) -> list[list[str]]:
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


def _image_site_packages(sb) -> Path | None:
    """The docker image's site-packages, copied once into the cache; None if unavailable."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != SANDBOX_PYTHON:
        return None
    image_id = getattr(sb, "image_id", None)
    client = getattr(sb, "_client", None)
    if not image_id or client is None:
        return None
    root = cache_dirs.gen_tools() / image_id.replace(":", "-")
    if (root / "site-packages").is_dir():
        return root / "site-packages"
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root.parent))
    container = None
    try:
        container = client.containers.create(image_id, command=["true"], network_disabled=True)
        stream, _ = container.get_archive(SITE_PACKAGES)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            tar.extractall(tmp, filter="data")
        try:
            tmp.rename(root)
        except OSError:  # another process made it first
            pass
    except Exception:  # noqa: BLE001 - no host generation; the sandbox generates
        return None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    return root / "site-packages" if (root / "site-packages").is_dir() else None


def _pool_for(sb) -> _Pool:
    """The pool for ``sb``'s tools, made once per process: a failure to find them (another
    Python, the copy from the image failed) is remembered as a pool that does not start, so
    it is not looked for again, with a container each time, on every rollout; only after
    :data:`BROKEN_RETRY_S` seconds (a transient failure of the copy)."""
    venv = getattr(sb, "_venv", None)
    key = f"venv:{venv}" if venv is not None else f"image:{getattr(sb, 'image_id', None)}"
    with _pools_lock:
        known = _pools.get(key)
        if known is not None and (known.argvs or known.broken is None
                                  or time.monotonic() - known.broken_at < BROKEN_RETRY_S):
            return known
    origin: tuple[str, list[str]] | None = None
    if venv is not None:  # local backend: the tools venv's interpreter
        python = Path(venv) / "bin" / "python"
        if python.exists():
            site = sorted(Path(venv).glob("lib/python*/site-packages"))
            origin = (str(python), [str(p) for p in site])
    else:
        site = _image_site_packages(sb)
        if site is not None:
            origin = (sys.executable, [str(site)])
    argvs = _argvs(*origin) if origin is not None else []
    with _pools_lock:
        if _pools.get(key) is known:  # new, or the tools looked for again
            _pools[key] = _Pool(argvs, origin)
            _adopt(_pools[key])
        return _pools[key]


def generate(sb, sources: dict[str, tuple[str, list[int]]], *,
             max_mutants: int | None = None, seed: int = 0,
             timeout: float = REQUEST_TIMEOUT_S, import_roots: list[str] = ()) -> dict | None:
    """Mutants of ``sources`` (repo path -> (patched text, changed line numbers)) made on
    the host with the tools of ``sb``'s image or venv; at most ``max_mutants`` of them,
    drawn with ``seed`` before rendering (``mutmut_adapter.generate_all``);
    ``import_roots``: the task's ``pythonpath`` (repo dirs whose files import without it).

    Returns ``{"files": {path: rewritten source}, "mutants": [...], "errors": [...]}``
    exactly as ``mutmut_adapter.py generate`` would have made them in the sandbox, or None
    when the host cannot generate (then generate in the sandbox). Never raises."""
    if os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0":
        return None
    try:
        pool = _pool_for(sb)
    except Exception:  # noqa: BLE001 - no host generation; the sandbox generates
        return None
    try:
        answer = pool.generate({p: {"code": c, "lines": sorted(n)} for p, (c, n)
                                in sources.items()}, timeout, max_mutants, seed,
                                    import_roots)
    except Exception:  # noqa: BLE001 - only a shortcut: the sandbox generates
        return None
    if not answer or "fatal" in answer or not isinstance(answer.get("mutants"), list):
        return None
    return answer


def warm(sb) -> None:
    """Start a generator for ``sb``'s tools in a background thread when none is idle
    (:meth:`_Pool.warm`), so the first rollout of a process does not wait for it; a no-op
    when host generation is off or cannot start. Returns once the tools are found (the
    first call for an image copies them out of it, as the first request would), never
    raises."""
    if os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0":
        return
    try:  # here, not in the thread: the first call may copy the tools out of the image
        pool = _pool_for(sb)
    except Exception:  # noqa: BLE001 - only a head start: a request starts its own
        return
    threading.Thread(target=pool.warm, name="proctor-mutant-generator-warm",
                     daemon=True).start()


# Spares: generators a long-lived parent (the CLI daemon) starts while it is idle, for the
# processes it forks next (a runner would otherwise start its own during its first score,
# whose two sandboxes it would take CPU from: ~0.35 s of that score's wall time on 2 cores).
# A runner records the generator it started; the parent starts the same one ahead; the next
# runner forked inherits it and takes it into its pool. The same interpreter, libraries and
# boot code, so the same mutants.

#: The record of the last generator started (set in the daemon, inherited by its runners).
_record: Path | None = None
#: Started spares, by argv: in the parent until a fork hands them over, then in the child.
_spares: dict[tuple[str, ...], _Server] = {}


def _remember(origin: tuple[str, list[str]] | None, argv: list[str]) -> None:
    """In a runner: record the generator just started (``argv``, made by :func:`_argvs`
    from ``origin`` = (python, library path)) for the daemon's next spare."""
    if _record is None or origin is None:
        return
    try:
        text = json.dumps({"python": origin[0], "path": origin[1], "argv": argv})
        if _record.exists() and _record.read_text() == text:
            return
        tmp = _record.with_name(f".{_record.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, _record)
    except OSError:  # only a head start for the next runner
        pass


def _recorded() -> list[str] | None:
    """The recorded generator's argv, if the record is this user's own file and names a
    way :func:`_argvs` starts one with this interpreter or a tools venv's, and libraries
    from the tools' caches only (so the code run is always this module's)."""
    try:
        st = _record.stat()
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        data = json.loads(_record.read_text())
        python, path, argv = data["python"], data["path"], data["argv"]
        if not isinstance(python, str) or not isinstance(path, list) or not all(
                isinstance(x, str) for x in path):
            return None
        trusted = [cache_dirs.gen_tools().resolve(), cache_dirs.venvs().resolve()]
        if python != sys.executable and not (  # a venv's bin/python: a link, out of it
                Path(python).parent.name == "bin"
                and Path(python).parent.resolve().is_relative_to(trusted[1])):
            return None
        if not all(any(Path(x).resolve().is_relative_to(t) for t in trusted) for x in path):
            return None
        return argv if argv in _argvs(python, path) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _adopt(pool: _Pool) -> None:
    """In a forked runner: take a spare started for this pool's interpreter and tools."""
    for argv in pool.argvs:
        spare = _spares.pop(tuple(argv), None)
        if spare is not None:
            pool.argvs = [argv]
            pool.idle.append(spare)
            return


class Spares:
    """The daemon's side (:func:`proctor.daemon.serve`'s ``spares``): at most one
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
        argv = _recorded()
        if argv is None:
            return
        try:
            _spares[tuple(argv)] = _Server(argv, detached=True)
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
        for spare in _spares.values():
            spare.close()
        _spares.clear()

    def __len__(self) -> int:
        return len(_spares)


def close_all() -> None:
    """Stop every idle generator process of this process (tests, shutdown)."""
    with _pools_lock:
        pools = list(_pools.values())
    for p in pools:
        p.close()
