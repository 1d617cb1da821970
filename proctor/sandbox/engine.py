"""Connection to the Docker engine, with messages that say how to fix a missing one."""

from __future__ import annotations

import docker
from docker.errors import DockerException

from proctor.errors import EngineUnavailable

START_HINT = (
    "start one with `bash scripts/provision-docker.sh` (as root: installs docker.io and runs "
    "`dockerd --bridge=none --iptables=false`), or set DOCKER_HOST"
)


def docker_client(timeout: float = 120) -> docker.DockerClient:
    """A docker-py client whose engine answered a ping.

    Raises:
        EngineUnavailable: no engine answers (retryable); the message says how to start one.
    """
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except DockerException as exc:
        raise EngineUnavailable(f"Docker engine unreachable ({exc}); {START_HINT}") from None
    return client
