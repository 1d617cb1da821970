"""Docker sandbox backend (docker-py): one fresh, locked-down container per patch.

The container runs ``sleep infinity`` as user 1000 with ``network_mode=none``, memory
(swap off), CPU and pids limits, ``no-new-privileges`` and all capabilities dropped, and
labels naming Proctor and the run. Commands run through ``docker exec`` under an in-container
``timeout -k`` plus a host watchdog that kills the container if even that fails.
``close`` force-removes the container; the executor calls it on every path out.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
import uuid

from docker.errors import APIError, DockerException, NotFound
from requests.exceptions import RequestException

from proctor.errors import InfraError
from proctor.sandbox.base import (
    TIMEOUT_EXIT_CODES,
    ExecResult,
    Limits,
    Sandbox,
    register,
)
from proctor.sandbox.engine import docker_client

LABEL = "org.proctor"
#: Seconds between the in-container TERM and KILL, and extra host watchdog slack.
KILL_AFTER_S = 3
WATCHDOG_SLACK_S = 10
SANDBOX_ENV = {
    "HOME": "/home/agent",
    "PATH": "/opt/proctor/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}


@register("docker")
class DockerSandbox(Sandbox):
    """A container from ``image`` (tag or id).

    Raises (from the constructor):
        EngineUnavailable: no engine answers.
        InfraError: the container could not be created or started.
    """

    def __init__(self, image: str, *, limits: Limits = Limits(), run_id: str | None = None,
                 client=None) -> None:
        self.limits = limits
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self._client = client or docker_client()
        self._container = None
        try:
            self._container = self._client.containers.create(
                image,
                command=["sleep", "infinity"],
                user="1000:1000",
                working_dir="/work",
                environment=SANDBOX_ENV,
                network_mode="none",
                mem_limit=limits.memory_bytes,
                memswap_limit=limits.memory_bytes,
                nano_cpus=int(limits.cpus * 1e9),
                pids_limit=limits.pids,
                security_opt=["no-new-privileges"],
                cap_drop=["ALL"],
                labels={
                    LABEL: "1",
                    f"{LABEL}.run": self.run_id,
                    f"{LABEL}.owner_pid": str(os.getpid()),
                },
                detach=True,
            )
            self._container.start()
            self.image_id = self._container.image.id
        except (DockerException, RequestException) as exc:
            self.close()
            raise InfraError(f"cannot start sandbox container from {image}: {exc}") from None

    @property
    def container_id(self) -> str | None:
        return self._container.id if self._container is not None else None

    def run(self, argv, *, timeout, env=None, cwd=None, user=None) -> ExecResult:
        full = ["timeout", "-k", str(KILL_AFTER_S), f"{max(timeout, 0.1):.1f}", *argv]
        api = self._client.api
        start = time.monotonic()
        killed = threading.Event()

        def watchdog() -> None:
            killed.set()
            try:
                self._container.kill()
            except DockerException:
                pass

        timer = threading.Timer(timeout + KILL_AFTER_S + WATCHDOG_SLACK_S, watchdog)
        try:
            exec_id = api.exec_create(
                self._container.id, full, environment=env or {}, workdir=cwd,
                user=user or "", stdout=True, stderr=True,
            )["Id"]
            timer.start()
            chunks, kept, dropped = [], 0, 0
            for chunk in api.exec_start(exec_id, stream=True, demux=False):
                room = self.limits.output_cap - kept
                if room > 0:
                    chunks.append(chunk[:room])
                    kept += min(len(chunk), room)
                dropped += max(0, len(chunk) - max(room, 0))
            exit_code = api.exec_inspect(exec_id)["ExitCode"]
        except (DockerException, RequestException) as exc:
            raise InfraError(f"sandbox command failed to run ({argv[0]}): {exc}") from None
        finally:
            timer.cancel()
        duration = time.monotonic() - start
        if killed.is_set():
            raise InfraError(f"sandbox watchdog killed the container after {duration:.0f}s")
        if exit_code is None:
            raise InfraError(f"sandbox command {argv[0]} ended without an exit code")
        output = b"".join(chunks).decode("utf-8", errors="replace")
        if dropped:
            output += f"\n[proctor: output truncated, {dropped} more bytes dropped]\n"
        timed_out = exit_code in TIMEOUT_EXIT_CODES and duration >= timeout - 0.5
        return ExecResult(tuple(argv), exit_code, output, duration, timed_out, bool(dropped))

    def put_archive(self, dest_dir: str, tar_bytes: bytes, *, as_root: bool = False) -> None:
        try:
            try:
                self._container.put_archive(dest_dir, tar_bytes)
                return
            except NotFound:  # make the directory (as the right user), then retry
                pass
            mkdir = self.run(["mkdir", "-p", dest_dir], timeout=10,
                             user="0:0" if as_root else None)
            if not mkdir.ok or not self._container.put_archive(dest_dir, tar_bytes):
                raise InfraError(f"cannot copy files to {dest_dir}: {mkdir.output[-500:]}")
        except (DockerException, RequestException) as exc:
            raise InfraError(f"cannot copy files into the sandbox: {exc}") from None

    def get_file(self, path: str, max_bytes: int = 64 * 1024**2) -> bytes | None:
        """Contents of one file, or None when it does not exist or is over ``max_bytes``
        (a file the code under test can write is its own business, never a harness error)."""
        size = self.run(["stat", "-c", "%s", path], timeout=10)
        if not size.ok or not size.output.strip().isdigit():
            return None
        if int(size.output.strip()) > max_bytes:
            return None
        try:
            stream, _ = self._container.get_archive(path)
            data = b"".join(stream)
        except NotFound:
            return None
        except (DockerException, RequestException) as exc:
            raise InfraError(f"cannot read {path} from the sandbox: {exc}") from None
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                return None
            return tar.extractfile(member).read()

    def close(self) -> None:
        container, self._container = self._container, None
        if container is None:
            return
        try:
            container.remove(force=True, v=True)
        except NotFound:
            pass
        except (APIError, RequestException) as exc:
            raise InfraError(
                f"cannot remove sandbox container {container.id[:12]}: {exc}") from None
