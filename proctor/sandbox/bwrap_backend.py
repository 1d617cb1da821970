"""Local sandbox backend (bubblewrap): the same commands as the Docker backend, without an
engine, registered as ``local``.

Each :meth:`LocalSandbox.run` is one ``bwrap`` process with new user, pid, network, ipc and
uts namespaces (no network at all: only a loopback that is down), ``--die-with-parent``, no
capabilities, and this view of the file system:

- read-only: ``/usr`` (and the ``/bin``, ``/lib``... links), a few files of ``/etc`` (no
  secrets), the tools venv at ``/opt/proctor/venv`` (and at its host path, for the scripts'
  shebangs);
- private and writable, from a host dir ``proctor-bwrap-*`` (in :func:`sandbox_base`)
  removed on close: ``/work``,
  ``/tmp``, ``HOME``, ``/proctor/out``, ``/proctor/in``; ``/proctor`` is read-only to the
  sandbox user and writable only to commands the harness runs as root (``user="0:0"``).

Inside, ``prlimit`` sets RLIMIT_AS (``Limits.memory_bytes``, per process), RLIMIT_NPROC
(``pids``, counted in the sandbox's own user namespace), RLIMIT_FSIZE and RLIMIT_CPU, then the
same ``timeout -k`` as Docker runs the command; a host watchdog kills the whole ``bwrap``
process group if even that fails. The pid namespace ends with the command: nothing a command
started (a double-forked daemon included) survives into the next one.

When Proctor runs as root, ``bwrap`` runs as the unprivileged host uid ``HOST_UID`` (root is
exempt from RLIMIT_NPROC, and must not own what the code under test writes), and the writable
areas are sized tmpfs mounts. Without root the areas are plain directories: the ``disk``
limit is then not enforced (:meth:`LocalSandbox.unenforced_here`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path

from proctor import cache_dirs
from proctor.errors import InfraError, TaskConfigError
from proctor.sandbox import ownership
from proctor.sandbox.base import (
    TIMEOUT_EXIT_CODES,
    ExecResult,
    Limits,
    Sandbox,
    register,
    stdin_chunks,
)
from proctor.sandbox.layout import (
    HOME,
    KILL_AFTER_S,
    PYCACHE_PREFIX,
    ROOT_ENV,
    SANDBOX_UID,
    SANDBOX_USER,
    WATCHDOG_SLACK_S,
    is_root,
)
from proctor.sandbox.toolchain import SANDBOX_PYTHON, requirements_txt

#: Host uid the sandbox runs as when Proctor runs as root.
HOST_UID = 61000
VENV_IN_SANDBOX = "/opt/proctor/venv"
DIR_PREFIX = "proctor-bwrap-"
SANDBOX_ENV = {
    "HOME": HOME,
    "PATH": f"{VENV_IN_SANDBOX}/bin:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPYCACHEPREFIX": PYCACHE_PREFIX,  # no .pyc is read either (layout)
    "PYTHONHASHSEED": "0",
    "PIP_NO_INDEX": "1",
}
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives",
             "nsswitch.conf", "host.conf", "mime.types", "ssl", "ca-certificates")
MiB = 1024**2
#: Writable areas: name in the host dir -> (path inside, tmpfs size or None: from Limits).
AREAS = {
    "work": "/work", "tmp": "/tmp", "home": HOME, "proctor": "/proctor",
    "proctor/out": "/proctor/out", "proctor/in": "/proctor/in",
}
#: Areas only root (``user="0:0"``) may write.
ROOT_AREAS = ("proctor",)


def _is_root() -> bool:
    return os.geteuid() == 0


def unavailable() -> str | None:
    """Why the local backend cannot run here, or None."""
    for tool in ("bwrap", "prlimit", "timeout"):
        if shutil.which(tool) is None:
            hint = " (apt-get install bubblewrap)" if tool == "bwrap" else ""
            return f"`{tool}` not found{hint}"
    if _python() is None:
        return f"no python{SANDBOX_PYTHON} under /usr"
    return None


def _python() -> str | None:
    """The interpreter of the tools venv: a system Python under /usr (visible inside)."""
    for cand in (f"/usr/bin/python{SANDBOX_PYTHON}", "/usr/bin/python3"):
        if os.path.exists(cand):
            return cand
    return None


def env_id(requirements: list[str] | tuple[str, ...] = ()) -> str:
    """Content id of the venv (pins + the task's requirements + interpreter): part of the
    baseline cache key."""
    py = _python() or "?"
    reqs = "\0".join(sorted(requirements))
    digest = hashlib.sha256(f"{requirements_txt()}\0{os.path.realpath(py)}\0{reqs}".encode())
    return f"local-venv:{digest.hexdigest()[:16]}"


#: Run by the venv's own Python (argv: the venv on the host, where the sandbox sees it):
#: the bytecode of the standard library and of the venv's packages, written in the venv's
#: ``pycache`` tree where the runners' ``pycache_prefix`` (``layout.PYCACHE_PREFIX``) looks
#: for it inside the sandbox, each file named and compiled as the sandbox sees its source.
_COMPILE_BYTECODE = r"""
import importlib.util, os, py_compile, re, sys, sysconfig
venv, inside = sys.argv[1:3]
sys.pycache_prefix = os.path.join(venv, "pycache")
skip = re.compile(r"/(test|tests|idlelib|tkinter|turtledemo|lib2to3)/")
for root, alias in ((sysconfig.get_paths()["stdlib"], None), (os.path.join(venv, "lib"), inside)):
    for d, _, files in os.walk(root):
        if skip.search(d + "/"):
            continue
        for f in files:
            if f.endswith(".py"):
                src = os.path.join(d, f)
                seen = src if alias is None else os.path.join(alias, os.path.relpath(src, venv))
                try:
                    py_compile.compile(src, cfile=importlib.util.cache_from_source(seen),
                                       dfile=seen, doraise=True)
                except Exception:
                    pass
"""


def _compile_bytecode(target: Path) -> None:
    """Fill the venv's ``pycache`` tree (:data:`_COMPILE_BYTECODE`); a failure leaves the
    runners compiling from source, slower and as safe."""
    subprocess.run([str(target / "bin" / "python"), "-c", _COMPILE_BYTECODE, str(target),
                    VENV_IN_SANDBOX], capture_output=True)
    (target / "pycache").mkdir(exist_ok=True)


def ensure_env(requirements: list[str] | tuple[str, ...] = ()) -> str:
    """Build (once, cached) the venv with the pinned tools and the task's ``requirements``
    (installed with the pins as constraints); returns its directory.

    Raises:
        InfraError: no suitable Python, or pip could not install the pins.
        TaskConfigError: pip could not install the task's requirements.
    """
    problem = unavailable()
    if problem:
        raise InfraError(f"local sandbox unavailable: {problem}")
    root = cache_dirs.venvs()
    root.mkdir(parents=True, exist_ok=True)
    target = root / env_id(requirements).split(":")[1]
    done = target / ".proctor-complete"
    if done.exists() and (target / "pycache").is_dir():
        return str(target)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            if not (target / "pycache").is_dir():  # a venv built before the bytecode tree
                _compile_bytecode(target)
            return str(target)
        shutil.rmtree(target, ignore_errors=True)
        print(f"[proctor] building the local tools venv in {target} (once)", file=sys.stderr)
        req = root / f"{target.name}.requirements.txt"
        req.write_text(requirements_txt())
        task_req = root / f"{target.name}.task-requirements.txt"
        task_req.write_text("".join(f"{r}\n" for r in sorted(requirements)))
        pip = [str(target / "bin" / "python"), "-m", "pip", "install", "-q",
               "--disable-pip-version-check"]
        try:
            subprocess.run([_python(), "-m", "venv", str(target)], check=True,
                           capture_output=True)
            subprocess.run([*pip, "-r", str(req)], check=True, capture_output=True)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(target, ignore_errors=True)
            err = (exc.stderr or b"").decode(errors="replace")[-2000:]
            raise InfraError(f"cannot build the local tools venv: {err}") from None
        if requirements:
            res = subprocess.run([*pip, "-r", str(task_req), "-c", str(req)],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                shutil.rmtree(target, ignore_errors=True)
                raise TaskConfigError(f"task requirements cannot be installed: "
                                      f"{res.stderr[-1500:]}")
        _compile_bytecode(target)
        os.chmod(root, 0o755)
        done.write_text(requirements_txt())
    return str(target)


def sandbox_base() -> Path:
    """Directory holding the sandboxes' host dirs: ``$PROCTOR_SANDBOX_DIR``, else the temp dir
    when ``HOST_UID`` can reach it, else ``/var/tmp/proctor-sandboxes``."""
    if os.environ.get("PROCTOR_SANDBOX_DIR"):
        return Path(os.environ["PROCTOR_SANDBOX_DIR"])
    tmp = Path(tempfile.gettempdir()).resolve()
    if not _is_root() or all(os.stat(p).st_mode & 0o001 for p in [tmp, *tmp.parents]):
        return tmp
    base = Path("/var/tmp/proctor-sandboxes")
    base.mkdir(mode=0o711, parents=True, exist_ok=True)
    return base


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    with open("/proc/self/mounts") as fh:
        points = [line.split()[1].encode().decode("unicode_escape") for line in fh]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


#: How long :func:`remove_dir` keeps trying while ``path`` is still there (seconds).
REMOVE_SETTLE_S = 2.0


def remove_dir(path: Path, settle_s: float = REMOVE_SETTLE_S) -> None:
    """Remove ``path`` and everything below it, lazily unmounting the mounts under it first
    (a local sandbox's tmpfs areas); a missing ``path`` is fine, errors are ignored. Tried
    again for up to ``settle_s`` seconds while ``path`` is still there: a ``mount`` started
    before the removal (by the thread a signal handler interrupted) may land on an area
    after the first pass and keep it busy."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            for point in _mounts_under(path):
                subprocess.run(["umount", "-l", point], capture_output=True)
        except OSError:
            pass
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path) or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def remove_stale_dirs(*, expired: bool = True) -> list[str]:
    """Remove ``proctor-bwrap-*`` dirs in :func:`sandbox_base` whose owner is gone (or, with
    ``expired``, whose expiry passed); returns their paths."""
    removed = []
    base = sandbox_base()
    for d in base.glob(DIR_PREFIX + "*") if base.is_dir() else []:
        try:
            owner = json.loads((d / ".owner").read_text())
        except (OSError, ValueError):
            continue
        if ownership.is_stale(owner, expired=expired):
            remove_dir(d)
            removed.append(str(d))
    return removed


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    args += ["--dir", "/etc"]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


@register("local")
class LocalSandbox(Sandbox):
    """A private set of host directories plus a fresh ``bwrap`` per command (see the
    module docstring). ``env``: the tools venv directory (:func:`ensure_env`).

    Raises (from the constructor):
        InfraError: bubblewrap is missing or the directories could not be prepared.
    """

    def __init__(self, env: str, *, limits: Limits = Limits(), run_id: str | None = None,
                 ttl_s: float = 3600.0, mounts: dict[str, Path] | None = None) -> None:
        problem = unavailable()
        if problem:
            raise InfraError(f"local sandbox unavailable: {problem}")
        self.limits = limits
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.image_id = env_id()  # the tools' id; resolve_env gives the task env's
        self._venv = str(Path(env).resolve())
        self._fds: dict[str, int] = {}
        self._procs: weakref.WeakSet = weakref.WeakSet()
        # a run starting in one thread while another closes the sandbox: either the run
        # starts first (and close kills it) or it sees the sandbox closed. Re-entrant: a
        # signal handler may close the sandbox in the thread that is starting a run.
        self._lock = threading.RLock()
        self._uid = HOST_UID if _is_root() else os.getuid()
        self._mounts = dict(mounts or {})
        try:
            self._root: Path | None = ownership.claim_dir(DIR_PREFIX, sandbox_base(),
                                                          owner=self)
        except (OSError, ownership.ShuttingDown) as exc:
            raise InfraError(f"cannot make the local sandbox's directory: {exc}") from exc
        try:
            # under the lock: a close from another thread (a signal's) waits until the
            # mounts are made, so it never removes the dir while a tmpfs is being mounted
            with self._lock:
                self._prepare(ttl_s)
        except BaseException:
            self.close()
            raise

    #: Whether a chown to root inside makes a file in ``/work`` the sandbox user's no more:
    #: not here (``--uid 0`` and ``--uid 1000`` map to one host uid), so tasks with
    #: ``hidden_at_upstream_path`` are refused (``backends.check_required``).
    ROOT_OWNED_FILES = False

    @classmethod
    def unenforced_here(cls) -> dict[str, str]:
        """See :meth:`Sandbox.unenforced_here`; here memory is bounded per process and CPU
        share not at all (no cgroups), and ``disk`` too unless we are root (sized tmpfs
        mounts need root)."""
        out = {
            "memory": "per process only (RLIMIT_AS): the sum over a process tree is not "
                      "bounded without cgroups",
            "cpus": "no CPU share without cgroups (RLIMIT_CPU bounds each process's time)",
        }
        if not _is_root():
            out["disk"] = "the writable areas are plain host directories (sized tmpfs " \
                          "mounts need root)"
        return out

    def _prepare(self, ttl_s: float) -> None:
        root = self._root
        os.chmod(root, 0o755)
        lbl = ownership.labels(self.run_id, ttl_s)
        (root / ".owner").write_text(json.dumps(lbl))
        sizes = {"work": self.limits.disk_bytes, "tmp": self.limits.tmp_bytes,
                 "home": 64 * MiB, "proctor": 64 * MiB, "proctor/out": 64 * MiB,
                 "proctor/in": 16 * MiB}
        for name in AREAS:  # parents first: proctor before proctor/out
            path = root / name
            path.mkdir(exist_ok=True)
            if _is_root():
                opts = f"size={sizes[name]},uid={self._uid},gid={self._uid},mode=0755"
                res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "proctor", str(path)],
                                     capture_output=True, text=True)
                if res.returncode != 0:
                    raise InfraError(f"cannot mount a tmpfs for the sandbox: {res.stderr}")
        etc = root / "etc"
        etc.mkdir()
        (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                    f"agent:x:{SANDBOX_UID}:{SANDBOX_UID}:agent:{HOME}:/bin/sh\n"
                                    "nobody:x:65534:65534:nobody:/:/bin/false\n")
        (etc / "group").write_text(f"root:x:0:\nagent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        (etc / "hostname").write_text("proctor\n")
        for name in [*AREAS, "etc/passwd", "etc/group", "etc/hostname"]:
            self._fds[name] = os.open(root / name, os.O_PATH)
        self._fds["venv"] = os.open(self._venv, os.O_PATH | os.O_DIRECTORY)
        for i, (inside, host) in enumerate(self._mounts.items()):
            area = next((n for n, p in sorted(AREAS.items(), key=lambda kv: -len(kv[1]))
                         if inside.startswith(p.rstrip("/") + "/")), None)
            if area is None:
                raise InfraError(f"local sandbox: {inside} is not under a writable area")
            (root / area / inside[len(AREAS[area]) + 1:]).mkdir(parents=True, exist_ok=True)
            # A private copy, bound read-only: bwrap runs as HOST_UID when we are root and
            # could not reach the original under root's home; the copy is inside our dir.
            copy = root / "mounts" / str(i)
            shutil.copytree(host, copy, symlinks=True)
            for path in [copy, *copy.rglob("*")]:  # ours to remove on close (the bind is ro)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o200)
            self._fds[f"mount:{inside}"] = os.open(copy, os.O_PATH | os.O_DIRECTORY)

    def _argv(self, argv: list[str], *, user: str | None, cwd: str | None,
              timeout: float | None) -> list[str]:
        root_user = is_root(user)
        uid = "0" if root_user else str(SANDBOX_UID)
        f = self._fds
        args = [
            "bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "proctor",
            "--uid", uid, "--gid", uid, "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", *_system_binds(),
            "--ro-bind-fd", str(f["etc/passwd"]), "/etc/passwd",
            "--ro-bind-fd", str(f["etc/group"]), "/etc/group",
            "--ro-bind-fd", str(f["etc/hostname"]), "/etc/hostname",
            "--proc", "/proc", "--dev", "/dev",
            "--ro-bind-fd", str(f["venv"]), VENV_IN_SANDBOX,
            "--ro-bind", self._venv, self._venv,
        ]
        for name, inside in AREAS.items():
            ro = name in ROOT_AREAS and not root_user
            args += ["--ro-bind-fd" if ro else "--bind-fd", str(f[name]), inside]
        for inside in self._mounts:  # over their areas: read-only even to root
            args += ["--ro-bind-fd", str(f[f"mount:{inside}"]), inside]
        args += ["--remount-ro", "/", "--chdir", cwd or "/work", "--"]
        lim = self.limits
        limits = [f"--as={lim.memory_bytes}", f"--nproc={lim.pids}",
                  f"--fsize={lim.file_size_bytes}", "--core=0"]
        if lim.cpu_seconds:
            limits.append(f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 5}")
        args += ["/usr/bin/prlimit", *limits, "--"]
        if timeout is not None:
            args += ["/usr/bin/timeout", "-k", str(KILL_AFTER_S), f"{max(timeout, 0.1):.1f}"]
        return args + list(argv)

    def _popen(self, argv: list[str], *, user, cwd, timeout, env=None, stdin=False,  # noqa: PLR0913
               stderr=subprocess.STDOUT) -> subprocess.Popen:
        kwargs = {}
        if _is_root():
            kwargs = dict(user=self._uid, group=self._uid, extra_groups=[])
        with self._lock:
            if self._root is None:
                raise InfraError("sandbox is closed")
            try:
                proc = subprocess.Popen(
                    self._argv(argv, user=user, cwd=cwd, timeout=timeout),
                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=stderr,
                    env={**SANDBOX_ENV, **(env or {}), **(ROOT_ENV if is_root(user) else {})},
                    pass_fds=tuple(self._fds.values()),
                    start_new_session=True, cwd="/", **kwargs)
            except OSError as exc:
                raise InfraError(f"cannot start bwrap: {exc}") from None
            self._procs.add(proc)
        return proc

    def run(self, argv, *, timeout, env=None, cwd=None, user=None, stdin=None,  # noqa: C901, PLR0913
            own_deadline=False) -> ExecResult:
        """See :meth:`Sandbox.run`; here each command gets a fresh ``bwrap`` (own user, pid,
        net and IPC namespaces) under ``prlimit`` for the limits cgroups would set. With
        ``own_deadline`` there is no ``timeout`` wrapper: at ``timeout`` seconds the host
        kills bwrap's process group, and with it the run's pid namespace. The watchdog
        (``timeout`` plus the kill grace plus slack) raises :class:`InfraError`."""
        start = time.monotonic()
        proc = self._popen(list(argv), user=user, cwd=cwd,
                           timeout=None if own_deadline else timeout, env=env,
                           stdin=stdin is not None)
        if stdin is not None:  # from a thread: the command may write before it reads
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        killed, expired = threading.Event(), threading.Event()

        def watchdog() -> None:
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        def deadline() -> None:  # own_deadline: bwrap's process group (its pid namespace)
            expired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout + KILL_AFTER_S + WATCHDOG_SLACK_S, watchdog)
        timer.start()
        ender = threading.Timer(max(timeout, 0.1), deadline) if own_deadline else None
        if ender is not None:
            ender.start()
        chunks, kept, dropped = [], 0, 0
        try:
            while chunk := proc.stdout.read1(65536):
                room = self.limits.output_cap - kept
                if room > 0:
                    chunks.append(chunk[:room])
                    kept += min(len(chunk), room)
                dropped += max(0, len(chunk) - max(room, 0))
            exit_code = proc.wait()
        finally:
            timer.cancel()
            if ender is not None:
                ender.cancel()
            proc.stdout.close()
        duration = time.monotonic() - start
        if killed.is_set():
            raise InfraError(f"sandbox watchdog killed bwrap after {duration:.0f}s")
        if exit_code < 0:
            exit_code = 128 - exit_code
        output = b"".join(chunks).decode("utf-8", errors="replace")
        if dropped:
            output += f"\n[proctor: output truncated, {dropped} more bytes dropped]\n"
        timed_out = expired.is_set() or (
            exit_code in TIMEOUT_EXIT_CODES and duration >= timeout - 0.5)
        return ExecResult(tuple(argv), exit_code, output, duration, timed_out, bool(dropped))

    def _io(self, argv: list[str], stdin: bytes | None, user: str,
            max_out: int) -> tuple[int, bytes, bytes]:
        proc = self._popen(argv, user=user, cwd="/", timeout=120, stdin=stdin is not None,
                           stderr=subprocess.PIPE)
        out, err = bytearray(), bytearray()
        try:
            if stdin is not None:
                threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
            drain = threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True)
            drain.start()  # stderr read apart from stdout: neither pipe can fill and block
            while len(out) <= max_out and (chunk := proc.stdout.read1(65536)):
                out += chunk
            if len(out) > max_out:
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait(timeout=150)
            drain.join(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise InfraError("sandbox file copy did not finish") from None
        finally:
            proc.stdout.close()
            proc.stderr.close()
        return code, bytes(out[: max_out + 1]), bytes(err)

    def put_archive(self, dest_dir: str, tar_bytes: bytes, *, as_root: bool = False) -> None:
        """See :meth:`Sandbox.put_archive`; here ``as_root`` makes the files root's only
        inside the user namespace: on the host they have the same owner as the sandbox
        user's files (:attr:`ROOT_OWNED_FILES`), so the removed write bits are what protect
        them."""
        script = 'mkdir -p "$1" && tar -x --no-same-owner --no-same-permissions -C "$1" -f -'
        if as_root:
            script += ' && chmod -R a-w "$1"'
        code, _, err = self._io(["sh", "-c", script, "sh", dest_dir], tar_bytes,
                                "0:0" if as_root else SANDBOX_USER, 0)
        if code != 0:
            raise InfraError(f"cannot copy files to {dest_dir}: "
                             f"{err.decode(errors='replace')[-500:]}")

    def get_file(self, path: str, max_bytes: int = 64 * 1024**2) -> bytes | None:
        """See :meth:`Sandbox.get_file`; here a ``cat`` as root in a fresh bwrap, and None
        too for a file over ``max_bytes`` (the read stops just past it)."""
        code, data, _ = self._io(["sh", "-c", 'test -f "$1" && exec cat -- "$1"', "sh", path],
                                 None, "0:0", max_bytes)
        if code != 0 or len(data) > max_bytes:
            return None
        return data

    def kill_user_processes(self) -> None:
        """Nothing to do: each run has its own pid namespace, which ends with the run."""

    def leftovers(self) -> list[str]:
        """The host dir while it exists, plus the pids of bwrap runs still alive."""
        left = [str(self._root)] if self._root is not None and self._root.exists() else []
        return left + [str(p.pid) for p in list(self._procs) if p.poll() is None]

    def close(self) -> None:
        """See :meth:`Sandbox.close`; here it kills the process group of every bwrap run still
        going (another thread's), closes the directory descriptors and unmounts and removes
        the host directory."""
        with self._lock:
            root, self._root = self._root, None
        ownership.untrack(self)
        for proc in list(self._procs):  # a run still going (another thread's, a signal's)
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = {}
        if root is not None:
            remove_dir(root)
            ownership.release_dir(root)


def _drain(pipe, keep: bytearray, limit: int = 4000) -> None:
    """Read ``pipe`` to its end, keeping its last ``limit`` bytes in ``keep``."""
    try:
        while chunk := pipe.read1(65536):
            keep += chunk
            del keep[:-limit]
    except (OSError, ValueError):
        pass


def _feed(pipe, data) -> None:
    """Write ``data`` (see :data:`~proctor.sandbox.base.Stdin`) to ``pipe``, then close it."""
    try:
        for chunk in stdin_chunks(data):
            pipe.write(chunk)
            pipe.flush()
    except (OSError, ValueError):
        pass  # the command ended early; its exit code says why
    finally:
        try:
            pipe.close()
        except OSError:
            pass

