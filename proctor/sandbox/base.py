"""The Sandbox interface every backend implements, and the backend registry.

A sandbox is one throw-away environment for one patch: run commands (argv, env, cwd,
timeout), put and get files, close. ``close`` removes everything, on every path out.
Backends register by name (``docker``, ``local`` = bubblewrap) and pass the same conformance
checks (:mod:`proctor.sandbox.conformance`, ``proctor sandbox check``).

Every backend shows the same file-system layout to the commands it runs: the tools'
interpreter at ``/opt/proctor/venv/bin/python``, the repo under ``/work``, harness files
under ``/proctor`` (root-owned where the harness asks), ``/proctor/out`` and ``/proctor/in``
writable by the sandbox user, a private ``/tmp`` and ``HOME``. Everything else is read-only.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from proctor.errors import InfraError
from proctor.sandbox.layout import SANDBOX_UID

#: Output kept per command, in bytes; the rest is dropped with a marker.
DEFAULT_OUTPUT_CAP = 256 * 1024
#: Exit codes of coreutils `timeout`: 124 after TERM, 137 after the -k KILL.
TIMEOUT_EXIT_CODES = (124, 137)


#: What :meth:`Sandbox.run` may feed a command on its standard input.
Stdin = bytes | Iterable[bytes] | None


def stdin_chunks(stdin: Stdin) -> Iterable[bytes]:
    """``stdin`` as an iterable of non-empty byte chunks (bytes -> one chunk)."""
    if stdin is None:
        return ()
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        return (bytes(stdin),) if len(stdin) else ()
    return (bytes(c) for c in stdin if len(c))


@dataclass(frozen=True)
class ExecResult:
    """Result of one command. ``output``: merged stdout+stderr, at most the cap (bytes),
    decoded with replacement; ``duration_s`` in seconds."""

    argv: tuple[str, ...]
    exit_code: int
    output: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """The command exited 0 within its timeout."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def command(self) -> str:
        """``argv`` joined with spaces, for messages (not quoted: not for a shell)."""
        return " ".join(self.argv)


MiB = 1024**2


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox (the defaults are safe: docs/sandboxes.md).

    - ``memory_bytes``: memory of everything in the sandbox, swap off (Docker: cgroup; local:
      per-process address space, see the bubblewrap backend).
    - ``cpus``: CPU share (Docker only).
    - ``pids``: processes + threads (Docker: pids cgroup; local: RLIMIT_NPROC in its own user
      namespace).
    - ``output_cap``: bytes of output kept per command; the rest is dropped with a marker.
    - ``disk_bytes``: size of the writable work area ``/work`` (holds the repo).
    - ``tmp_bytes``: size of ``/tmp``; ``HOME`` and ``/proctor`` get fixed small areas.
    - ``file_size_bytes``: largest file any process may write (RLIMIT_FSIZE).
    - ``cpu_seconds``: CPU time of one process (RLIMIT_CPU); 0 means no limit.
    """

    memory_bytes: int = 2048 * MiB
    cpus: float = 1.0
    pids: int = 512
    output_cap: int = DEFAULT_OUTPUT_CAP
    disk_bytes: int = 1024 * MiB
    tmp_bytes: int = 512 * MiB
    file_size_bytes: int = 256 * MiB
    cpu_seconds: int = 0


class Sandbox(ABC):
    """One throw-away environment. Use as a context manager; ``close`` is idempotent."""

    name: str = "abstract"
    image_id: str | None = None

    @abstractmethod
    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None,  # noqa: PLR0913
            cwd: str | None = None, user: str | None = None,
            stdin: Stdin = None, own_deadline: bool = False) -> ExecResult:
        """Run ``argv`` under an in-sandbox ``timeout -k`` of ``timeout`` seconds plus a host
        watchdog. Never raises for the command's own failure (that is an ExecResult).

        ``stdin``: None (the command reads an empty input), bytes, or an iterable of bytes
        chunks fed as the iterable yields them (a chunk may come long after the start: the
        command blocks on its read meanwhile); the input is closed after the last chunk.
        A command that ends without reading it all is not an error. Passing a path list or
        a script this way instead of a file put first saves one command per step, and has
        no ``exec`` argument-size limit.

        ``own_deadline``: the command keeps its own deadline and runs with no wrapper, so no
        process of the sandbox user but the command holds its output (a ``timeout`` process
        would be one: dumpable, its ``/proc/PID/fd/1`` open to code of the same user). At
        ``timeout`` seconds every process of the sandbox user is killed from outside (the
        result is then ``timed_out``, exit 137); the watchdog stays behind that.

        ``user``: None for the sandbox user, ``"0:0"`` for root (no capabilities: it owns
        files, nothing more). Root's commands get :data:`~proctor.sandbox.layout.ROOT_ENV`
        over ``env``: no configuration is read from the sandbox user's HOME.

        Raises:
            InfraError: the sandbox itself failed (container died, engine gone).
        """

    @abstractmethod
    def put_archive(self, dest_dir: str, tar_bytes: bytes, *, as_root: bool = False) -> None:
        """Extract an uncompressed tar into ``dest_dir``; a missing ``dest_dir`` is created by
        the sandbox user, or by root when ``as_root``: then root owns everything extracted,
        every write bit is removed (files 0444, directories 0555), and the user cannot
        rename or replace what is inside.

        Raises:
            InfraError: the extraction failed.
        """

    @abstractmethod
    def get_file(self, path: str, max_bytes: int = 64 * 1024**2) -> bytes | None:
        """Contents of one file, or None when it does not exist."""

    @abstractmethod
    def close(self) -> None:
        """Stop and remove everything the sandbox holds."""

    def kill_user_processes(self) -> None:
        """SIGKILL every process of the sandbox user (what one step started must not reach
        the next). Default: ``kill -9 -1`` as the user, which spares the caller and PID 1."""
        self.run(["sh", "-c", "kill -9 -1 2>/dev/null; true"], timeout=10)

    @abstractmethod
    def leftovers(self) -> list[str]:
        """What of this sandbox still exists on the host (container ids, directories,
        process ids); ``[]`` after ``close``. For tests and the soak benchmark."""

    @property
    def unenforced(self) -> dict[str, str]:
        """limit name (``memory``, ``pids``, ``disk``, ``file_size``) -> why this sandbox
        cannot enforce it. Empty when every limit holds."""
        return self.unenforced_here()

    @classmethod
    def unenforced_here(cls) -> dict[str, str]:
        """Like :attr:`unenforced`, for any sandbox of this backend on this host."""
        return {}

    def put_files(self, dest_dir: str, files: dict[str, bytes], *,
                  read_only: bool = False) -> None:
        """Write ``files`` (relative path -> bytes) under ``dest_dir``. ``read_only``: owned
        by root, files 0444 and directories 0555, so the sandbox user can read, not change."""
        self.put_archive(dest_dir, tar_of_files(files, read_only), as_root=read_only)

    def put_tree(self, dest_dir: str, root: Path, only: list[str] | None = None, *,
                 read_only: bool = False) -> None:
        """Copy a host directory (or only the given relative paths of it) to ``dest_dir``."""
        self.put_archive(dest_dir, tar_of_tree(root, only, read_only), as_root=read_only)

    def put_read_only_dirs(self, dirs: dict[str, dict[str, bytes]], *,
                           timeout: float = 60) -> None:
        """Create several fresh directories at once, each holding its files (``dirs``: absolute
        directory -> relative path -> bytes) as ``put_files(dir, files, read_only=True)``
        leaves them: root-owned, files 0444, directories 0555. One sandbox command for all
        of them, where each ``put_files`` is one. The directories must share one existing
        parent (e.g. ``/proctor``) and none may exist yet.

        Raises:
            ValueError: ``dirs`` is empty, a directory is not absolute, or they do not share
                one parent.
            InfraError: the command failed (a directory already existed, say).
        """
        parents = {posixpath.dirname(d.rstrip("/")) for d in dirs}
        names = [posixpath.basename(d.rstrip("/")) for d in dirs]
        if (not dirs or len(parents) != 1 or not all(d.startswith("/") for d in dirs)
                or any(n in ("", ".", "..") for n in names)):
            raise ValueError(f"fresh absolute directories under one parent expected: "
                             f"{sorted(dirs)}")
        tar = tar_of_files({f"{name}/{rel}": data
                            for name, files in zip(names, dirs.values(), strict=True)
                            for rel, data in files.items()}, read_only=True)
        # mkdir (not -p): each directory is new; root owns what it extracts (--no-same-owner:
        # whoever root is in this backend), then nobody may write.
        script = ('umask 022 && cd "$1" && shift && mkdir -- "$@" && tar -x --no-same-owner '
                  '--no-same-permissions --no-overwrite-dir -f - && chmod -R a-w -- "$@"')
        res = self.run(["sh", "-c", script, "sh", parents.pop(), *names], timeout=timeout,
                       user="0:0", stdin=tar)
        if not res.ok:
            raise InfraError(f"cannot copy files to {', '.join(sorted(dirs))}: "
                             f"{res.output[-500:]}")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _owner(info: tarfile.TarInfo, read_only: bool) -> tarfile.TarInfo:
    info.uid = info.gid = 0 if read_only else SANDBOX_UID
    info.uname = info.gname = ""
    info.mtime = 0
    if read_only:  # writable while extracting; the backend then removes every write bit
        info.mode = 0o755 if info.isdir() else 0o644
    return info


def tar_of_files(files: dict[str, bytes], read_only: bool = False) -> bytes:
    """An uncompressed tar of ``files`` with their parent directories (see ``put_files``)."""
    buf = io.BytesIO()
    dirs = sorted({str(parent) for rel in files for parent in Path(rel).parents} - {"."})
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in dirs:
            info = tarfile.TarInfo(rel)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(_owner(info, read_only))
        for rel, data in sorted(files.items()):
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            tar.addfile(_owner(info, read_only), io.BytesIO(data))
    return buf.getvalue()


def tar_of_tree(root: Path, only: list[str] | None = None, read_only: bool = False) -> bytes:
    """An uncompressed tar of a host tree, without ``__pycache__`` and compiled files."""

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name.split("/") or info.name.endswith((".pyc", ".pyo")):
            return None
        return _owner(info, read_only)

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in only if only is not None else ["."]:
            tar.add(root / rel, arcname=rel, filter=keep)
    return buf.getvalue()


#: name -> backend class. Each class is built as ``cls(env, limits=..., run_id=...,
#: ttl_s=..., mounts=...)`` where ``env`` is what :func:`proctor.sandbox.backends.resolve_env`
#: returns for that backend (Docker: an image tag; local: the tools' venv directory) and
#: ``mounts`` maps a directory inside (under ``/proctor``) to a host directory the sandbox
#: shows read-only from its creation on, to root and the user alike (a bind mount; a
#: root-owned read-only copy where the backend cannot bind, e.g. a remote engine): files
#: the harness needs in every sandbox, at no command's cost.
BACKENDS: dict[str, Callable[..., Sandbox]] = {}


def register(name: str):
    """Class decorator: make a backend available to ``open_sandbox(name, ...)``."""

    def deco(cls):
        cls.name = name
        BACKENDS[name] = cls
        return cls

    return deco
