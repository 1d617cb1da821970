"""Docker backend: the Python init (PID 1) reaps zombies, cannot be killed from inside, and
kills the user's processes on the engine's SIGUSR1 even when the pids limit is exhausted.
Its command channel gives the sandbox user's commands the results ``docker exec`` gives,
and the code under test cannot reach it."""

from __future__ import annotations

import time

import pytest

from proctor.sandbox import DockerSandbox, Limits

pytestmark = pytest.mark.docker


def test_python_init_is_pid_1_and_survives_the_user(docker_ready):
    with DockerSandbox(docker_ready) as sb:
        pid1 = sb.run(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"], timeout=10).output
        assert pid1.startswith('python3 -I -S -c """PID 1 of every Docker sandbox')
        for sig in ("9", "TERM", "INT", "HUP", "QUIT", "CHLD", "PIPE", "USR2", "USR1"):
            sb.run(["sh", "-c", f"kill -{sig} 1; true"], timeout=10)
            assert sb.run(["true"], timeout=10).ok, sig
        sb.run(["sh", "-c", "kill -9 -1"], timeout=10)  # kills the command's own tree only
        assert sb.run(["true"], timeout=10).ok  # the user cannot take the sandbox down


def test_user_processes_die_even_when_they_hold_the_whole_pids_limit(docker_ready):
    with DockerSandbox(docker_ready, limits=Limits(pids=48)) as sb:
        # a detached filler forks sleepers until no pid is left, and takes every pid that
        # comes free again: no command can start
        filler = ("import os, time\nif os.fork():\n    os._exit(0)\nos.setsid()\n"
                  "while True:\n    try:\n        if os.fork() == 0:\n"
                  "            time.sleep(300)\n            os._exit(0)\n"
                  "    except OSError:\n        time.sleep(0.002)\n")
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


def test_the_code_under_test_cannot_reach_pid_1s_channel(docker_ready):
    """PID 1 is non-dumpable: the sandbox user (its own uid) can neither read nor write its
    file descriptors nor attach to it."""
    with DockerSandbox(docker_ready) as sb:
        probe = ("{ ls /proc/1/fd && echo LISTED; echo forged > /proc/1/fd/1 && echo WROTE; "
                 "cat /proc/1/fd/0 && echo READ; } >/dev/null 2>&1; "
                 "python3 -c 'import ctypes; print(ctypes.CDLL(None).ptrace(16, 1, 0, 0))'; "
                 "grep Uid /proc/1/status")
        res = sb.run(["sh", "-c", probe], timeout=10)
        assert res.ok, res.output
        assert res.output.split("\n")[:1] == ["-1"], res.output  # ptrace(ATTACH) refused
        assert "Uid:\t1000" in res.output  # the same user: only dumpability protects it


def _exec_only(sb) -> None:
    sb._channel.close()
    sb._channel = None


#: Commands whose results must not depend on the transport: (argv, run keyword arguments).
SAME_EITHER_WAY = [
    (["sh", "-c", "env | sort; pwd; ulimit -t; ulimit -f; trap"], {}),
    (["sh", "-c", "echo err >&2; exit 4"], {}),  # one stream: docker exec orders two racily
    (["sh", "-c", "echo $FOO; pwd"], {"env": {"FOO": "bar"}, "cwd": "/tmp"}),
    (["sh", "-c", "wc -c; exit 3"], {"stdin": [b"a" * 70000, b"", b"b" * 300000]}),
    (["head", "-c", "5"], {"stdin": (b"x" * 65536 for _ in range(64))}),
    (["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' y"], {}),
    (["sh", "-c", "kill -9 $$"], {}),
    (["sh", "-c", "(sleep 0.3; echo late) & echo early"], {}),
    (["no-such-program"], {"own_deadline": True}),
    (["sleep", "5"], {"timeout": 1}),
    (["sleep", "5"], {"timeout": 1, "own_deadline": True}),
]


def _outcome(res):
    """What a command's result says, but the container's name and the transport's own
    words for a program it cannot start."""
    output = "".join(line for line in res.output.splitlines(keepends=True)
                     if not line.startswith("HOSTNAME="))
    if output.startswith(("OCI runtime exec failed", "proctor init: cannot run")):
        output = "cannot start"
    return res.exit_code, output, res.timed_out, res.truncated


def test_the_channel_gives_what_docker_exec_gives(docker_ready):
    with DockerSandbox(docker_ready, limits=Limits(output_cap=100000)) as channel, \
            DockerSandbox(docker_ready, limits=Limits(output_cap=100000)) as exec_:
        _exec_only(exec_)
        for argv, kwargs in SAME_EITHER_WAY:
            kwargs = {"timeout": 10, **kwargs}
            stdin = kwargs.get("stdin")
            if stdin is not None and not isinstance(stdin, list):
                kwargs["stdin"] = list(stdin)  # each sandbox gets its own copy
            got = [_outcome(sb.run(argv, **kwargs)) for sb in (channel, exec_)]
            assert got[0] == got[1], argv
        assert channel._channel is not None and not channel._channel.broken
        assert exec_._channel is None


def test_root_commands_and_a_busy_channel_use_docker_exec(docker_ready, monkeypatch):
    """Root's commands (the init runs as the user) and a second command while the channel
    runs one go through ``docker exec``; both answer correctly, and a command's input that
    is still being produced after it ended reaches no later command."""
    import threading

    with DockerSandbox(docker_ready) as sb:
        execs = []
        real = sb._client.api.exec_create
        monkeypatch.setattr(sb._client.api, "exec_create",
                            lambda cid, cmd, **kw: execs.append(cmd) or real(cid, cmd, **kw))
        assert sb.run(["id", "-u"], timeout=10).output == "1000\n"
        assert sb.run(["id", "-u"], timeout=10, user="0:0").output == "0\n"
        assert [c[-2:] for c in execs] == [["id", "-u"]]

        def slow_input():
            yield b"first"
            time.sleep(1.5)  # the command is over by now: this chunk goes nowhere
            yield b"stale"

        results = {}
        long = threading.Thread(target=lambda: results.setdefault(
            "long", sb.run(["sh", "-c", "sleep 1; echo long"], timeout=10)))
        long.start()
        time.sleep(0.3)
        results["busy"] = sb.run(["echo", "busy"], timeout=10)  # the channel is taken
        long.join()
        assert results["long"].output == "long\n" and results["busy"].output == "busy\n"
        assert sb.run(["head", "-c", "5"], timeout=10, stdin=slow_input()).output == "first"
        assert sb.run(["cat"], timeout=10, stdin=b"next").output == "next"
        time.sleep(1.5)
        assert sb.run(["cat"], timeout=10, stdin=b"again").output == "again"
        assert [c[-2:] for c in execs] == [["id", "-u"], ["echo", "busy"]]


def test_file_reads_and_copies_use_the_channel_and_root_reads_what_only_root_may(
        docker_ready, monkeypatch):
    with DockerSandbox(docker_ready) as sb:
        execs = []
        real = sb._client.api.exec_create
        monkeypatch.setattr(sb._client.api, "exec_create",
                            lambda cid, cmd, **kw: execs.append(kw.get("user")) or real(
                                cid, cmd, **kw))
        sb.put_files("/work/repo", {"a/b.txt": b"\x00\xffdata" * 1000})
        assert sb.get_file("/work/repo/a/b.txt") == b"\x00\xffdata" * 1000
        assert sb.get_file("/work/repo/a/b.txt", max_bytes=10) is None
        assert sb.get_file("/work/repo/missing") is None
        assert sb.get_file("/work/repo/a") is None  # a directory
        assert execs == []  # all over the channel
        assert sb.run(["sh", "-c", "echo secret > /proctor/only-root; chmod 400 "
                       "/proctor/only-root"], timeout=10, user="0:0").ok
        assert sb.get_file("/proctor/only-root") == b"secret\n"
        assert execs == ["0:0", "0:0"]  # the chmod, and root's read after the user's failed
