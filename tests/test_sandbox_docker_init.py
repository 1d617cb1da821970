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
