"""Docker backend: the Python init (PID 1) reaps zombies, cannot be killed from inside, and
kills the user's processes on the engine's SIGUSR1 even when the pids limit is exhausted."""

from __future__ import annotations

import time

import pytest

from proctor.sandbox import DockerSandbox, Limits

pytestmark = pytest.mark.docker


def test_python_init_is_pid_1_and_survives_the_user(docker_ready):
    with DockerSandbox(docker_ready) as sb:
        pid1 = sb.run(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"], timeout=10).output
        assert pid1.startswith("python3 -I -S -c import os, signal, time")
        sb.run(["sh", "-c", "kill -9 1; kill -TERM 1; kill -USR1 1; true"], timeout=10)
        sb.run(["sh", "-c", "kill -9 -1"], timeout=10)  # kills the command's own tree only
        assert sb.run(["true"], timeout=10).ok  # the user cannot take the sandbox down


def test_user_processes_die_even_when_they_hold_the_whole_pids_limit(docker_ready):
    with DockerSandbox(docker_ready, limits=Limits(pids=48)) as sb:
        # a detached filler forks sleepers until no pid is left: no command can start
        filler = ("import os, time\nif os.fork():\n    os._exit(0)\nos.setsid()\n"
                  "while True:\n    try:\n        if os.fork() == 0:\n"
                  "            time.sleep(300)\n            os._exit(0)\n"
                  "    except OSError:\n        break\ntime.sleep(300)\n")
        sb.run(["python3", "-c", filler], timeout=20)
        time.sleep(2)
        blocked = sb.run(["true"], timeout=10)
        assert not blocked.ok
        start = time.monotonic()
        sb.kill_user_processes()
        assert sb.run(["true"], timeout=10).ok
        assert time.monotonic() - start < 12
        comms = sb.run(["sh", "-c", "cat /proc/[0-9]*/comm"], timeout=10).output.split()
        assert "sleep" not in comms and comms.count("python3") == 1  # only the init


def _sticky_checks(monkeypatch) -> list[list[str]]:
    """The ``/work`` mode commands the sandboxes made from now on run (the per-image memory
    emptied first)."""
    from proctor.sandbox import docker_backend

    monkeypatch.setattr(docker_backend, "_STICKY_WORK_IMAGES", set())
    calls: list[list[str]] = []
    real = docker_backend.DockerSandbox._exec_io

    def counting(self, argv, *args, **kwargs):
        if "chmod 1777 /work" in " ".join(argv):
            calls.append(argv)
        return real(self, argv, *args, **kwargs)

    monkeypatch.setattr(docker_backend.DockerSandbox, "_exec_io", counting)
    return calls


def _work_mode(image: str) -> str:
    with DockerSandbox(image) as sb:
        return sb.run(["stat", "-c", "%a %u:%g", "/work"], timeout=10).output.strip()


def test_work_is_sticky_and_root_owned_checked_once_per_image(docker_ready, monkeypatch):
    """The sandbox image's /work is 1777, so is the tmpfs over it: the first sandbox checks,
    the next ones run no command for it. An image whose /work is 755 (a task image made
    another way) gets the chmod in every sandbox, and the same mode."""
    import io

    from proctor.sandbox import docker_client

    calls = _sticky_checks(monkeypatch)
    assert [_work_mode(docker_ready) for _ in range(3)] == ["1777 0:0"] * 3
    assert len(calls) == 1
    client = docker_client()
    other = f"proctor-test-work-755:{int(time.time() * 1000)}"
    dockerfile = f"FROM {docker_ready}\nUSER root\nRUN chmod 755 /work\nUSER 1000:1000\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=other, rm=True,
                        network_mode="none")
    try:
        calls.clear()
        assert [_work_mode(other) for _ in range(2)] == ["1777 0:0"] * 2
        assert len(calls) == 2
    finally:
        client.images.remove(other, force=True)
