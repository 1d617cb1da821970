"""The Docker sandbox holds its promises: limits, no network, timeouts, output cap, cleanup."""

import subprocess

import pytest

from proctor.sandbox.base import Limits
from proctor.sandbox.docker_backend import DockerSandbox
from proctor.sandbox.engine import docker_client
from proctor.sandbox.image import resolve_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def image():
    try:
        return resolve_image(docker_client())[0]
    except Exception as exc:  # noqa: BLE001 - skip reason shows the harness message
        pytest.skip(f"no Docker sandbox: {exc}")


def _labelled_containers() -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=org.proctor"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_runs_as_non_root_without_capabilities_or_network(image):
    with DockerSandbox(image) as sb:
        assert sb.run(["id", "-u"], timeout=10).output.strip() == "1000"
        caps = sb.run(["grep", "CapEff", "/proc/self/status"], timeout=10).output
        assert caps.split()[-1] == "0000000000000000"
        net = sb.run(["python3", "-c", "import socket; s=socket.socket(); s.settimeout(2); "
                      "s.connect(('127.0.0.1', 9))"], timeout=10)
        assert net.exit_code != 0
        ifaces = sb.run(["cat", "/proc/net/dev"], timeout=10).output
        assert "eth0" not in ifaces


def test_timeout_kills_the_whole_tree_including_term_ignoring_children(image):
    with DockerSandbox(image) as sb:
        res = sb.run(["sh", "-c", "trap '' TERM; (trap '' TERM; sleep 300) & sleep 300"],
                     timeout=1)
        assert res.timed_out and res.exit_code in (124, 137)
        assert res.duration_s < 10
        left = sb.run(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout=10)
        # only the container's own `sleep infinity` (PID 1) may remain
        assert "sleep 300" not in left.output and "sleep infinity" in left.output


def test_output_is_capped_with_a_marker(image):
    with DockerSandbox(image, limits=Limits(output_cap=1000)) as sb:
        res = sb.run(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"], timeout=10)
        assert res.truncated and res.output.startswith("x" * 1000)
        assert "99000 more bytes dropped" in res.output


def test_memory_and_pids_limits_hold(image):
    with DockerSandbox(image, limits=Limits(memory_bytes=256 * 1024**2, pids=64)) as sb:
        mem = sb.run(["python3", "-c", "b = bytearray(1024**3)"], timeout=30)
        assert mem.exit_code != 0
        fork = sb.run(["sh", "-c", "for i in $(seq 200); do sleep 5 & done; wait"], timeout=20)
        assert "fork" in fork.output.lower() or "resource" in fork.output.lower()
        assert sb.run(["true"], timeout=10).ok  # the sandbox survives


def test_nothing_leaks_to_the_next_sandbox_and_close_removes_the_container(image):
    before = set(_labelled_containers())
    with DockerSandbox(image) as sb:
        assert sb.run(["sh", "-c", "echo secret > /tmp/leak && echo x > ~/leak"], timeout=10).ok
        assert sb.container_id in _labelled_containers()
    with DockerSandbox(image) as sb2:
        assert sb2.run(["sh", "-c", "cat /tmp/leak ~/leak"], timeout=10).exit_code != 0
    assert set(_labelled_containers()) == before
