"""Docker sandbox backend (docker-py): one fresh, locked-down container per patch.

PID 1 is a small Python init (``incontainer/docker_init.py``; the image's python3) running
as user 1000: it reaps zombies, on SIGUSR1 from the engine kills every other process of the
user, and runs the user's commands over its attach stream (the command channel). Every
command runs as user 1000 unless the harness asks for root (which, without capabilities,
only owns files: it can neither bypass permissions nor signal the user's processes). The
container has:

- a read-only root file system; the writable places are sized tmpfs mounts (``WRITABLE``):
  ``/work`` (root's, mode 1777; the repo, ``Limits.disk_bytes``), ``/tmp``
  (``Limits.tmp_bytes``), ``HOME``, ``/proctor`` (root-owned: harness files, hidden
  tests), ``/proctor/out`` and ``/proctor/in``. tmpfs pages also count against the memory limit;
- ``network_mode=none``, memory (swap off), CPU and pids limits, RLIMIT_FSIZE, RLIMIT_CPU
  on every command (not on PID 1), ``no-new-privileges``, all capabilities dropped; no log
  (PID 1's output is the channel);
- labels naming Proctor, the run, the owner (host, pid, pid start time) and an expiry time
  (unix seconds), so :mod:`proctor.sandbox.cleanup` can remove what a crashed harness left.

A command of the sandbox user goes over the channel when no other command holds it: a few
bytes each way, where a ``docker exec`` costs the engine a process setup (~45-65 ms of
machine CPU and of latency on 2 cores: ``bench/sandbox_ops.py``). Root's commands, and a
second command while one runs, are ``docker exec`` runs; both give the same results
(tests/test_sandbox_docker_init.py). Either way a command runs under an in-container
``timeout -k`` plus a host watchdog that kills the container if even that fails. Files go in
through ``tar`` (the user's over the channel) and out through root's ``cat`` (a ``docker
exec``: no process of the user can stop it or reach its output) inside the container
(``docker cp`` cannot see tmpfs mounts). ``close`` force-removes the container; the executor
calls it on every path out.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from docker.errors import APIError, DockerException, NotFound
from docker.types import LogConfig, Mount, Ulimit
from docker.utils.socket import frames_iter
from requests.exceptions import RequestException

from proctor import cache_dirs
from proctor.errors import InfraError
from proctor.sandbox import ownership
from proctor.sandbox.base import (
    TIMEOUT_EXIT_CODES,
    ExecResult,
    Limits,
    Sandbox,
    register,
    stdin_chunks,
)
from proctor.sandbox.engine import docker_client
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

LABEL = ownership.LABEL
SANDBOX_ENV = {
    "HOME": HOME,
    "PATH": "/opt/proctor/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPYCACHEPREFIX": PYCACHE_PREFIX,  # no .pyc is read either (layout)
    "PYTHONHASHSEED": "0",
}
MiB = 1024**2
#: PID 1 of every container (``python3 -I -S -c INIT_SOURCE``, as the sandbox user): the
#: reaper, the SIGUSR1 kill of the user's processes and the command channel
#: (``incontainer/docker_init.py``).
INIT_SOURCE = (files("proctor.sandbox") / "incontainer" / "docker_init.py").read_text()
#: Seconds a file copy or read may take before the sandbox counts as gone.
IO_TIMEOUT_S = 120
#: A channel frame's head: kind byte, request number, payload length (docker_init.py).
FRAME_HEAD = struct.Struct(">cII")


def _exec_env(env: dict[str, str] | None, user: str | None) -> dict[str, str]:
    """A ``docker exec``'s environment over the container's: ``env``, and for root
    :data:`~proctor.sandbox.layout.ROOT_ENV` over it (no configuration from the user's
    HOME)."""
    return {**(env or {}), **(ROOT_ENV if is_root(user) else {})}


def writable_mounts(limits: Limits) -> dict[str, str]:
    """tmpfs mount point -> mount options (sizes in bytes) for ``limits``."""
    user = f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755"
    return {
        # root's and sticky: the user makes the repo there, and cannot rename what root
        # makes (the hidden tests' directories:
        # proctor.harness.pipeline.workspace.place_hidden_tests)
        "/work": f"size={limits.disk_bytes},uid=0,gid=0,mode=1777",
        "/tmp": f"size={limits.tmp_bytes},mode=1777",
        HOME: f"size={64 * MiB},{user}",
        "/proctor": f"size={64 * MiB},mode=0755",
        "/proctor/out": f"size={64 * MiB},{user}",
        "/proctor/in": f"size={16 * MiB},{user}",
    }


#: Images (by id) whose ``/work`` tmpfs is mode 1777 as made: this process's observation,
#: and every process's, kept as ``<image id>.work-1777`` in :func:`cache_dirs.image_facts`
#: (an image id names its content: what one sandbox of it showed, every one shows).
_STICKY_WORK_IMAGES: set[str] = set()


def _sticky_mark(image_id: str) -> Path:
    return cache_dirs.image_facts() / f"{image_id.replace(':', '-')}.work-1777"


def docker_can_bind(client=None) -> bool:
    """Whether the engine (``client``'s, default :func:`docker_client`'s, asked once per
    ``$DOCKER_HOST``) runs on this host, on a local socket, and so can bind-mount this
    host's directories into a sandbox.

    Raises:
        EngineUnavailable: no engine answers (without ``client``).
    """
    if client is None:
        where = os.environ.get("DOCKER_HOST", "")
        if where not in _CAN_BIND:
            _CAN_BIND[where] = docker_can_bind(docker_client())
        return _CAN_BIND[where]
    return str(getattr(client.api, "base_url", "")).startswith("http+docker://local")


#: ``$DOCKER_HOST`` -> :func:`docker_can_bind`'s answer for it.
_CAN_BIND: dict[str, bool] = {}


@register("docker")
class DockerSandbox(Sandbox):
    """A container from ``image`` (tag or id); ``ttl_s`` sets the expiry label (seconds from
    now) after which ``proctor cleanup`` may remove it even if its owner still runs.

    Raises (from the constructor):
        EngineUnavailable: no engine answers.
        InfraError: the container could not be created or started.
    """

    def __init__(self, image: str, *, limits: Limits = Limits(), run_id: str | None = None,
                 ttl_s: float = 3600.0, client=None, mounts: dict[str, Path] | None = None
                 ) -> None:
        self.limits = limits
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self._client = client or docker_client()
        self._container = None
        self._channel: _Channel | None = None  # None: every command is a docker exec
        ownership.track(self)
        try:
            binds = dict(mounts or {}) if self._can_bind() else {}
            try:
                self._container = self._create(image, ttl_s, binds)
            except APIError as exc:  # a local socket to an engine elsewhere (docker-in-docker)
                if not binds or "bind" not in str(exc):
                    raise
                self._remove_quietly()
                binds = {}
                self._container = self._create(image, ttl_s, binds)
            self.image_id = self._container.attrs.get("Image")  # no extra image lookup
            self._make_work_sticky()
            try:
                self._channel = _Channel(self._client.api, self._container.id)
            except (DockerException, RequestException, OSError):
                pass  # an engine that cannot attach: docker exec it is
            for inside, host in (mounts or {}).items():
                if inside not in binds:  # the engine cannot see our files: copy them
                    self.put_tree(inside, Path(host), read_only=True)
        except (DockerException, RequestException) as exc:
            self.close()
            raise InfraError(f"cannot start sandbox container from {image}: {exc}") from None
        except BaseException:
            self.close()
            raise

    def _make_work_sticky(self) -> None:
        """``/work`` mode 1777. The engine gives a tmpfs over an image directory that
        directory's mode, whatever the mount's ``mode=`` says: the sandbox image has it
        (Dockerfile.sandbox), another image may not. Checked in the first sandbox of each
        image (and changed there when needed); an image whose ``/work`` was 1777 already
        needs no command in its later sandboxes, in this process or any later one of the
        same cache (:data:`_STICKY_WORK_IMAGES`): a ``proctor score`` process saves one
        root ``docker exec`` per sandbox.

        Raises:
            InfraError: the command failed.
        """
        if self.image_id and (self.image_id in _STICKY_WORK_IMAGES
                              or _sticky_mark(self.image_id).is_file()):
            _STICKY_WORK_IMAGES.add(self.image_id)
            return
        code, out, err = self._exec_io(["sh", "-c", 'stat -c %a /work; chmod 1777 /work'],
                                       None, "0:0", 64)
        if code != 0:
            raise InfraError(f"cannot make /work sticky: {err.decode(errors='replace')}")
        if out.strip() == b"1777" and self.image_id:
            _STICKY_WORK_IMAGES.add(self.image_id)
            try:
                _sticky_mark(self.image_id).parent.mkdir(parents=True, exist_ok=True)
                _sticky_mark(self.image_id).touch()
            except OSError:
                pass  # the next process looks again

    def _can_bind(self) -> bool:
        """The engine runs on this host (a local socket): it sees our directories."""
        return docker_can_bind(self._client)

    def _create(self, image: str, ttl_s: float, binds: dict[str, Path]):
        lim = self.limits
        # RLIMIT_CPU is the commands' (PID 1 sets it for its own, ``_exec`` for the engine's),
        # not the container's: PID 1's own CPU must not end the sandbox
        # (explicitly unlimited: the engine's default-ulimits may name one)
        ulimits = [Ulimit(name="fsize", soft=lim.file_size_bytes, hard=lim.file_size_bytes),
                   Ulimit(name="cpu", soft=-1, hard=-1)]
        kwargs = dict(
            user=SANDBOX_USER, working_dir="/work", environment=SANDBOX_ENV,
            network_mode="none", read_only=True, tmpfs=writable_mounts(lim),
            mem_limit=lim.memory_bytes, memswap_limit=lim.memory_bytes,
            nano_cpus=int(lim.cpus * 1e9), pids_limit=lim.pids, ulimits=ulimits,
            security_opt=["no-new-privileges"], cap_drop=["ALL"],
            labels=ownership.labels(self.run_id, ttl_s), detach=True,
            mounts=[Mount(target=inside, source=str(host), type="bind", read_only=True)
                    for inside, host in binds.items()],
        )
        container = self._client.containers.create(
            image, command=["python3", "-I", "-S", "-c", INIT_SOURCE, *map(str, self._cpu())],
            stdin_open=True,
            log_config=LogConfig(type=LogConfig.types.NONE), **kwargs)
        self._container = container
        container.start()
        return container

    def _cpu(self) -> tuple[int, int]:
        """The commands' RLIMIT_CPU (soft, hard) in seconds; (0, 0) for none."""
        soft = self.limits.cpu_seconds
        return (soft, soft + 5) if soft else (0, 0)

    def _remove_quietly(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except (DockerException, RequestException):
                pass

    @property
    def container_id(self) -> str | None:
        """The container's full id, or None once the sandbox is closed."""
        return self._container.id if self._container is not None else None

    def _alive(self):
        if self._container is None:
            raise InfraError("sandbox is closed")
        return self._container

    def run(self, argv, *, timeout, env=None, cwd=None, user=None, stdin=None,  # noqa: C901, PLR0913
            own_deadline=False) -> ExecResult:
        """See :meth:`Sandbox.run`; here a command of PID 1's channel (the sandbox user's,
        when no other command holds it) or a ``docker exec`` (root's, or the channel is
        busy or unavailable), under ``timeout -k``, whose watchdog kills the whole container
        (then :class:`InfraError`). With ``own_deadline`` the deadline is PID 1's SIGUSR1
        (:meth:`kill_user_processes`), and after any timeout the user's processes are
        killed too: children that left ``timeout``'s process group would outlive it. An
        engine error raises :class:`InfraError`."""
        container = self._alive()
        full = list(argv) if own_deadline else [
            "timeout", "-k", str(KILL_AFTER_S), f"{max(timeout, 0.1):.1f}", *argv]
        start = time.monotonic()
        killed, expired = threading.Event(), threading.Event()

        def watchdog() -> None:
            killed.set()
            try:
                container.kill()
            except DockerException:
                pass

        def deadline() -> None:  # own_deadline: the command overran its own deadline
            expired.set()
            try:
                self.kill_user_processes(settle_s=0)
            except InfraError:
                pass  # the watchdog is still behind

        timer = threading.Timer(timeout + KILL_AFTER_S + WATCHDOG_SLACK_S, watchdog)
        ender = threading.Timer(max(timeout, 0.1), deadline) if own_deadline else None
        chunks, kept, dropped = [], 0, 0

        def keep(chunk: bytes) -> None:
            nonlocal kept, dropped
            room = self.limits.output_cap - kept
            if room > 0:
                chunks.append(chunk[:room])
                kept += min(len(chunk), room)
            dropped += max(0, len(chunk) - max(room, 0))

        channel = self._channel_for(user)
        try:
            if channel is not None:
                timer.start()
                if ender is not None:
                    ender.start()
                exit_code, dropped_inside = channel.command(
                    full, env or {}, cwd, stdin, self.limits.output_cap, keep)
                dropped += dropped_inside
            else:
                exit_code = self._exec(container, full, env, cwd, user, stdin, keep,
                                       (timer, ender))
        except (DockerException, RequestException, OSError) as exc:
            if killed.is_set():
                exit_code = None
            else:
                raise InfraError(f"sandbox command failed to run ({argv[0]}): {exc}") from None
        finally:
            timer.cancel()
            if ender is not None:
                ender.cancel()
            if channel is not None:
                channel.lock.release()
        duration = time.monotonic() - start
        if killed.is_set():
            raise InfraError(f"sandbox watchdog killed the container after {duration:.0f}s")
        if exit_code is None:
            raise InfraError(f"sandbox command {argv[0]} ended without an exit code")
        output = b"".join(chunks).decode("utf-8", errors="replace")
        if dropped:
            output += f"\n[proctor: output truncated, {dropped} more bytes dropped]\n"
        timed_out = expired.is_set() or (
            exit_code in TIMEOUT_EXIT_CODES and duration >= timeout - 0.5)
        if timed_out:  # children that left timeout's process group die too
            self.kill_user_processes()
        return ExecResult(tuple(argv), exit_code, output, duration, timed_out, bool(dropped))

    def _exec(self, container, full, env, cwd, user, stdin, keep,  # noqa: PLR0913
              timers) -> int | None:
        """Run ``full`` as a ``docker exec``, passing its output chunks to ``keep``; start
        ``timers`` once it exists. Returns its exit code."""
        api = self._client.api
        if self.limits.cpu_seconds:
            full = ["prlimit", "--cpu={}:{}".format(*self._cpu()), "--", *full]
        exec_id = api.exec_create(
            container.id, full, environment=_exec_env(env, user), workdir=cwd,
            user=user or SANDBOX_USER, stdin=stdin is not None, stdout=True, stderr=True,
        )["Id"]
        for timer in timers:
            if timer is not None:
                timer.start()
        head = b""  # the output's first bytes
        for chunk in self._output(exec_id, stdin):
            if len(head) < 64:
                head += chunk[:64]
            keep(chunk)
        code = api.exec_inspect(exec_id)["ExitCode"]
        if (code == 127 and self.limits.cpu_seconds
                and head.startswith(b"prlimit: failed to execute")):
            return 126  # a program that cannot start, as the channel and runc report it
        return code

    def _channel_for(self, user: str | None) -> _Channel | None:
        """PID 1's command channel, locked for one command, when it may run this one: the
        sandbox user's, and no other command holds it. None: use ``docker exec``."""
        channel = self._channel
        if (user not in (None, SANDBOX_USER) or channel is None or channel.broken
                or not channel.lock.acquire(blocking=False)):
            return None
        if not channel.ready():  # PID 1 could not make itself non-dumpable: no channel
            self._channel = None
            channel.close()
            channel.lock.release()
            return None
        return channel

    def _output(self, exec_id: str, stdin):
        """Start the exec and yield its merged stdout+stderr chunks; with ``stdin``, feed it
        from a thread (the command may write before it reads) and close it after."""
        api = self._client.api
        if stdin is None:
            yield from api.exec_start(exec_id, stream=True, demux=False)
            return
        sock = api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        raw.settimeout(None)  # a long quiet command is the watchdog's business
        feeder = threading.Thread(target=_feed_socket, args=(raw, stdin), daemon=True)
        try:
            feeder.start()
            for _stream, data in frames_iter(raw, tty=False):
                yield data
        finally:
            sock.close()

    def kill_user_processes(self, settle_s: float = 10.0) -> None:
        """SIGKILL every process of the sandbox user but PID 1, through PID 1 (no command
        has to start, so a fork bomb holding the pids limit cannot prevent it); then wait up
        to ``settle_s`` seconds until a command can start again."""
        try:
            self._alive().kill(signal="SIGUSR1")
        except (DockerException, RequestException) as exc:
            raise InfraError(f"cannot signal the sandbox init: {exc}") from None
        end = time.monotonic() + settle_s
        while True:
            try:
                done = self._channel_io(["true"], None, 0, watchdog_s=max(settle_s, 5.0))
                if done is None:  # no channel free: the engine starts it
                    done = (self._alive().exec_run(["true"], user=SANDBOX_USER).exit_code, b"")
                if done[0] == 0:
                    return
            except (DockerException, RequestException, OSError):
                pass
            if time.monotonic() > end:
                return
            time.sleep(0.2)

    def _channel_io(self, argv: list[str], stdin: bytes | None, max_out: int,
                    watchdog_s: float = IO_TIMEOUT_S) -> tuple[int, bytes] | None:
        """Run ``argv`` as the sandbox user over PID 1's channel, with no deadline of its
        own (the caller's commands end by themselves; past ``watchdog_s`` seconds the
        container is killed); (exit code, stdout and stderr up to ``max_out`` bytes + 1),
        or None when the channel is busy or unavailable."""
        channel = self._channel_for(None)
        if channel is None:
            return None
        out = bytearray()
        fired = threading.Event()

        def watchdog() -> None:  # what a socket timeout is to _exec_io: the sandbox is gone
            fired.set()
            _kill_quietly(container)

        timer = threading.Timer(watchdog_s, watchdog)
        try:
            container = self._alive()
            timer.start()
            code, _ = channel.command(argv, {}, None, stdin, max_out + 1, out.extend)
        except OSError:
            if fired.is_set():
                raise InfraError(f"the sandbox did not answer within {watchdog_s:.0f}s; "
                                 "killed") from None
            raise
        finally:
            timer.cancel()
            channel.lock.release()
        return code, bytes(out)

    def _exec_io(self, argv: list[str], stdin: bytes | None, user: str,
                 max_out: int) -> tuple[int | None, bytes, bytes]:
        """Run ``argv`` with ``stdin`` fed and closed; (exit code, stdout up to ``max_out``
        bytes + 1, stderr tail)."""
        api = self._client.api
        exec_id = api.exec_create(self._alive().id, argv, stdin=stdin is not None, user=user,
                                  environment=_exec_env(None, user), stdout=True,
                                  stderr=True)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        out, err = bytearray(), bytearray()
        try:
            raw.settimeout(IO_TIMEOUT_S)
            if stdin is not None:
                try:
                    raw.sendall(stdin)
                    raw.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the command ended early; its exit code says why
            for stream, data in frames_iter(raw, tty=False):
                if stream == 1 and len(out) <= max_out:
                    out += data[: max_out + 1 - len(out)]
                elif stream == 2:
                    err = (err + data)[-4000:]
        finally:
            sock.close()
        return api.exec_inspect(exec_id)["ExitCode"], bytes(out), bytes(err)

    def put_archive(self, dest_dir: str, tar_bytes: bytes, *, as_root: bool = False) -> None:
        """See :meth:`Sandbox.put_archive`; here ``tar`` inside the container fed over the
        exec's socket (``docker cp`` cannot see tmpfs mounts); an engine error is an
        :class:`InfraError` too."""
        d = shlex.quote(dest_dir)
        script = f"mkdir -p {d} && tar -x --no-same-permissions -C {d} -f -"
        if as_root:  # root owns what it extracts; then nobody may write (0444 / 0555)
            script = (f"umask 022 && mkdir -p {d} && tar -x --no-same-permissions "
                      f"--no-overwrite-dir -C {d} -f - && chmod -R a-w {d}")
        try:
            got = None if as_root else self._channel_io(["sh", "-c", script], tar_bytes,
                                                         64 * 1024)
            if got is not None:
                code, err = got[0], got[1][-4000:]
            else:
                code, _, err = self._exec_io(["sh", "-c", script], tar_bytes,
                                             "0:0" if as_root else SANDBOX_USER, 0)
        except (DockerException, RequestException, OSError) as exc:
            raise InfraError(f"cannot copy files into the sandbox: {exc}") from None
        if code != 0:
            raise InfraError(f"cannot copy files to {dest_dir}: "
                             f"{err.decode(errors='replace')[-500:]}")

    def get_file(self, path: str, max_bytes: int = 64 * 1024**2) -> bytes | None:
        """Contents of one file, or None when it does not exist or is over ``max_bytes``
        (a file the code under test can write is its own business, never a harness error)."""
        # root's ``cat`` (a docker exec): no process of the user can stop it or reach its
        # output through /proc, as it could a command of the user's
        try:
            code, data, _ = self._exec_io(
                ["sh", "-c", 'test -f "$1" && exec cat -- "$1"', "sh", path], None, "0:0",
                max_bytes)
        except (DockerException, RequestException, OSError) as exc:
            raise InfraError(f"cannot read {path} from the sandbox: {exc}") from None
        if code != 0 or len(data) > max_bytes:
            return None
        return data

    def leftovers(self) -> list[str]:
        """See :meth:`Sandbox.leftovers`; here the ids of the engine's containers, running or
        not, labelled with this sandbox's run id."""
        found = self._client.containers.list(
            all=True, filters={"label": f"{LABEL}.run={self.run_id}"}, ignore_removed=True)
        return [c.id for c in found]

    def close(self) -> None:
        """See :meth:`Sandbox.close`; here the container is force-removed with its anonymous
        volumes (a container already gone is fine). Raises :class:`InfraError` when the
        engine refuses the removal."""
        container, self._container = self._container, None
        ownership.untrack(self)
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if container is None:
            return
        try:
            container.remove(force=True, v=True)
        except NotFound:
            pass
        except (APIError, RequestException) as exc:
            raise InfraError(
                f"cannot remove sandbox container {container.id[:12]}: {exc}") from None


def _kill_quietly(container) -> None:
    """Kill a container; one already gone is fine."""
    try:
        container.kill()
    except (DockerException, RequestException):
        pass


def _feed_socket(raw, stdin) -> None:
    """Send ``stdin``'s chunks on an exec's hijacked socket, then close its write side (the
    command's end of input). A command that ended early, or a closed socket, stops it."""
    try:
        for chunk in stdin_chunks(stdin):
            raw.sendall(chunk)
    except OSError:
        pass  # the command ended early; its exit code says why
    finally:
        try:
            raw.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class _Channel:
    """The command channel of a container's PID 1 (``incontainer/docker_init.py``) over its
    attach stream: one command at a time (:attr:`lock`, held by the caller of
    :meth:`command`). Engine and socket errors propagate (``DockerException``,
    ``OSError``); a channel that failed once is :attr:`broken` for good."""

    def __init__(self, api, container_id: str) -> None:
        self._sock = api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._raw = getattr(self._sock, "_sock", self._sock)
        self._raw.settimeout(None)  # a long quiet command is the watchdog's business
        self._frames = frames_iter(self._raw, tty=False)
        self._inbox = bytearray()
        self._send_lock = threading.Lock()
        self._number = 0
        self.lock = threading.Lock()
        self.broken = False
        self._secure: bool | None = None  # PID 1's answer to the hello, read on first use
        self._send(b"H", 0, b"")

    def ready(self) -> bool:
        """Whether PID 1 serves the channel (it made itself non-dumpable); reads its answer
        to the hello the first time. A channel that fails here is not ready."""
        if self._secure is None:
            try:
                self._raw.settimeout(IO_TIMEOUT_S)  # no watchdog runs yet
                kind, _, payload = self._frame()
                self._raw.settimeout(None)
                self._secure = kind == b"H" and json.loads(payload)["secure"] is True
            except (OSError, ValueError, KeyError, TypeError):
                self._secure = False
        return self._secure and not self.broken

    def command(self, argv: list[str], env: dict[str, str], cwd: str | None, stdin,
                cap: int, keep: Callable[[bytes], None]) -> tuple[int, int]:
        """Run ``argv``, passing its output chunks to ``keep`` (at most ``cap`` bytes in
        all); returns (exit code, output bytes dropped past ``cap``)."""
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd,
                              "stdin": stdin is not None, "cap": cap}).encode()
        self._number = number = (self._number + 1) % 2**32
        ended = threading.Event()
        try:
            self._send(b"R", number, request)
            if stdin is not None:
                threading.Thread(target=self._feed, args=(number, stdin, ended),
                                 daemon=True).start()
            while True:
                kind, got, payload = self._frame()
                if got != number:
                    raise OSError(f"command channel out of step ({got} != {number})")
                if kind == b"O":
                    keep(payload)
                elif kind == b"X":
                    try:
                        report = json.loads(payload)
                        return int(report["exit"]), int(report["dropped"])
                    except (ValueError, KeyError, TypeError) as exc:
                        raise OSError(f"bad exit frame from the sandbox init: {exc}") from None
        except BaseException:
            self.close()
            raise
        finally:
            ended.set()

    def _feed(self, number: int, stdin, ended: threading.Event) -> None:
        """Send ``stdin``'s chunks as input frames, then the empty one that closes it; stop
        once the command has ended (the init drops frames of a command that is over)."""
        try:
            for chunk in stdin_chunks(stdin):
                for at in range(0, len(chunk), 1 << 16):
                    if ended.is_set():
                        return
                    self._send(b"I", number, chunk[at:at + (1 << 16)])
        except OSError:
            return  # the channel failed: the command's reader says so
        finally:  # the input ends however its iterable did
            if not ended.is_set():
                try:
                    self._send(b"I", number, b"")
                except OSError:
                    pass

    def _send(self, kind: bytes, number: int, payload: bytes) -> None:
        with self._send_lock:
            self._raw.sendall(FRAME_HEAD.pack(kind, number, len(payload)) + payload)

    def _frame(self) -> tuple[bytes, int, bytes]:
        inbox = self._inbox
        while True:
            if len(inbox) >= FRAME_HEAD.size:
                kind, number, size = FRAME_HEAD.unpack_from(inbox)
                if len(inbox) >= FRAME_HEAD.size + size:
                    payload = bytes(inbox[FRAME_HEAD.size:FRAME_HEAD.size + size])
                    del inbox[:FRAME_HEAD.size + size]
                    return kind, number, payload
            try:
                stream, data = next(self._frames)
            except StopIteration:
                raise OSError("the sandbox init closed its command channel") from None
            if stream == 1:
                inbox += data

    def close(self) -> None:
        """Close the socket (the init goes on reaping until the container is removed). The
        raw socket itself: the wrapper docker-py returns keeps it open while its response
        lives."""
        self.broken = True
        for end in (lambda: self._raw.shutdown(socket.SHUT_RDWR), self._raw.close,
                    self._sock.close):
            try:
                end()
            except OSError:
                pass
