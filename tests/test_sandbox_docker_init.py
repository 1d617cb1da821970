"""Docker backend without the engine's ``--init``: the Python reaper is PID 1 and reaps."""

from __future__ import annotations

import time

import pytest

from proctor.sandbox import docker_backend
from proctor.sandbox.docker_backend import DockerSandbox
from proctor.sandbox.engine import docker_client

pytestmark = pytest.mark.docker


def test_python_reaper_is_pid_1_when_the_engine_has_no_init(docker_ready, monkeypatch):
    client = docker_client()
    monkeypatch.setattr(docker_backend, "_NO_INIT", {id(client)})
    with DockerSandbox(docker_ready, client=client) as sb:
        pid1 = sb.run(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"], timeout=10).output
        assert pid1.startswith("python3 -c import os, signal, time")
        sb.run(["sh", "-c", "for i in 1 2 3; do (sleep 0.1 &) ; done; sleep 1"], timeout=10)
        time.sleep(1.0)
        states = sb.run(["sh", "-c", "grep -h '^State' /proc/[0-9]*/status"], timeout=10)
        assert "zombie" not in states.output
        assert sb.run(["kill", "-9", "1"], timeout=10).exit_code != 0
        sb.run(["sh", "-c", "kill -9 -1"], timeout=10)  # kills the command's own tree only
        assert sb.run(["true"], timeout=10).ok  # the user cannot take the sandbox down
