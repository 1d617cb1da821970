"""Connection to the Docker engine, with messages that say how to fix a missing one."""

from __future__ import annotations

import os
import threading

import docker
from docker.errors import DockerException
from requests.exceptions import RequestException

from proctor.errors import EngineUnavailable

START_HINT = (
    "start one with `bash scripts/provision-docker.sh` (as root: installs docker.io and runs "
    "`dockerd --bridge=none --iptables=false`), or set DOCKER_HOST"
)


#: ``$DOCKER_HOST`` -> the API version this process's first client of that engine
#: negotiated (docker-py's ``version="auto"``: a ``GET /version``). Later clients use it and
#: skip that round trip: ~6 ms each, and a rollout makes four (the backend's choice, the
#: image's, one per sandbox). The ping stays: it is what says the engine answers.
_API_VERSIONS: dict[str, str] = {}
_API_VERSIONS_LOCK = threading.Lock()


def docker_client(timeout: float = 120) -> docker.DockerClient:
    """A docker-py client whose engine answered a ping.

    Raises:
        EngineUnavailable: no engine answers (retryable); the message says how to start one.
    """
    host = os.environ.get("DOCKER_HOST", "")
    with _API_VERSIONS_LOCK:
        known = _API_VERSIONS.get(host)
    # a known version that fails (an engine replaced by an older one) is asked again
    for version in ([known, "auto"] if known else ["auto"]):
        try:
            client = docker.from_env(timeout=int(timeout), version=version)
            client.ping()
            break
        except (DockerException, RequestException) as exc:  # a known version: ping says it
            error = exc
    else:
        raise EngineUnavailable(f"Docker engine unreachable ({error}); {START_HINT}") from None
    with _API_VERSIONS_LOCK:
        _API_VERSIONS[host] = client.api.api_version
    return client
