"""Docker backend: the Python init (PID 1) reaps zombies, cannot be killed from inside, and
kills the user's processes on the engine's SIGUSR1 even when the pids limit is exhausted.
Its command channel gives the sandbox user's commands the results ``docker exec`` gives,
and the code under test cannot reach it."""

from __future__ import annotations

import time
from pathlib import Path

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


def _sticky_checks(monkeypatch, cache: Path) -> list[list[str]]:
    """The ``/work`` mode commands the sandboxes made from now on run (the per-image memory
    emptied first, the cache of what other processes saw at ``cache``)."""
    from proctor.sandbox import docker_backend

    monkeypatch.setattr(docker_backend, "_STICKY_WORK_IMAGES", set())
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(cache))
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


def test_work_is_sticky_and_root_owned_checked_once_per_image(docker_ready, monkeypatch,
                                                              tmp_path):
    """The sandbox image's /work is 1777, so is the tmpfs over it: the first sandbox checks,
    the next ones run no command for it, nor do those of a later process (``proctor
    score``'s: the cache keeps what the first saw). An image whose /work is 755 (a task
    image made another way) gets the chmod in every sandbox, and the same mode."""
    import io

    from proctor.sandbox import docker_backend, docker_client

    calls = _sticky_checks(monkeypatch, tmp_path)
    assert [_work_mode(docker_ready) for _ in range(3)] == ["1777 0:0"] * 3
    assert len(calls) == 1
    monkeypatch.setattr(docker_backend, "_STICKY_WORK_IMAGES", set())  # a new process
    assert _work_mode(docker_ready) == "1777 0:0"
    assert len(calls) == 1
    assert [p.name.endswith(".work-1777") for p in (tmp_path / "image-facts").iterdir()] \
        == [True]
    client = docker_client()
    other = f"proctor-test-work-755:{int(time.time() * 1000)}"
    dockerfile = f"FROM {docker_ready}\nUSER root\nRUN chmod 755 /work\nUSER 1000:1000\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=other, rm=True,
                        network_mode="none")
    try:
        calls.clear()
        assert [_work_mode(other) for _ in range(2)] == ["1777 0:0"] * 2
        assert len(calls) == 2
        assert len(list((tmp_path / "image-facts").iterdir())) == 1  # the 755 image: none
    finally:
        client.images.remove(other, force=True)


def test_the_code_under_test_cannot_reach_pid_1s_channel(docker_ready):
    """PID 1 is non-dumpable: the sandbox user (its own uid) can neither read nor write its
    file descriptors nor attach to it."""
    with DockerSandbox(docker_ready) as sb:
        # each probe prints its name only when it got through; none may
        probe = ("ls /proc/1/fd >/dev/null 2>&1 && echo LISTED; "
                 "test -r /proc/1/fd/0 && echo READABLE; "
                 "(echo forged > /proc/1/fd/1) 2>/dev/null && echo WROTE; "
                 "python3 -c 'import ctypes; print(ctypes.CDLL(None).ptrace(16, 1, 0, 0))'; "
                 "grep Uid /proc/1/status")
        res = sb.run(["sh", "-c", probe], timeout=10)
        assert res.ok, res.output
        assert res.output.split("\n")[:1] == ["-1"], res.output  # ptrace(ATTACH) refused
        assert "Uid:\t1000" in res.output  # the same user: only dumpability protects it
        # the same probes against a dumpable process of the user do get through
        res = sb.run(["sh", "-c", "sleep 30 & p=$!; ls /proc/$p/fd >/dev/null && echo LISTED; "
                      "test -r /proc/$p/fd/0 && echo READABLE; kill $p"], timeout=10)
        assert res.output.split() == ["LISTED", "READABLE"], res.output


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
    (["python3", "-c", "import os; print(os.getsid(0) == os.getpid(), "
      "os.getpgrp() == os.getsid(0))"], {}),
    (["python3", "-c", "import os; print(os.getsid(0) == os.getpid() == os.getpgrp())"],
     {"own_deadline": True}),
    (["sleep", "5"], {"timeout": 1}),
    (["sleep", "5"], {"timeout": 1, "own_deadline": True}),
]


def _outcome(res):
    """What a command's result says, but the container's name and the transport's own
    words for a program it cannot start."""
    output = "".join(line for line in res.output.splitlines(keepends=True)
                     if not line.startswith("HOSTNAME="))
    if output.startswith(("OCI runtime exec failed", "proctor init: cannot run",
                          "prlimit: failed to execute")):
        output = "cannot start"
    return res.exit_code, output, res.timed_out, res.truncated


@pytest.mark.waits
@pytest.mark.parametrize("cpu_seconds", [0, 30])
def test_the_channel_gives_what_docker_exec_gives(docker_ready, cpu_seconds):
    limits = Limits(output_cap=100000, cpu_seconds=cpu_seconds)
    with DockerSandbox(docker_ready, limits=limits) as channel, \
            DockerSandbox(docker_ready, limits=limits) as exec_:
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


def test_copies_use_the_channel_and_file_reads_are_root_s(docker_ready, monkeypatch):
    """The sandbox user's copies go over the channel; reads are root's (a docker exec): no
    process of the user can stop root's ``cat`` or reach its output, as it could the
    user's."""
    with DockerSandbox(docker_ready) as sb:
        execs = []
        real = sb._client.api.exec_create
        monkeypatch.setattr(sb._client.api, "exec_create",
                            lambda cid, cmd, **kw: execs.append(kw.get("user")) or real(
                                cid, cmd, **kw))
        sb.put_files("/work/repo", {"a/b.txt": b"\x00\xffdata" * 1000})
        assert execs == []
        assert sb.get_file("/work/repo/a/b.txt") == b"\x00\xffdata" * 1000
        assert sb.get_file("/work/repo/a/b.txt", max_bytes=10) is None
        assert sb.get_file("/work/repo/missing") is None
        assert sb.get_file("/work/repo/a") is None  # a directory
        assert execs == ["0:0"] * 4


def test_a_process_that_steals_the_output_cannot_hang_pid_1(docker_ready):
    """A process the command left behind opens the command's output pipe through /proc and
    empties it: PID 1 never blocks on a read, and the command ends as it would under
    ``docker exec`` (its exit, then the output's grace), not at the watchdog."""
    thief = ("(exec 3<>/proc/self/fd/1; while :; do cat <&3 >/dev/null; done) & "
             "for i in $(seq 2000); do echo $i; done; exit 7")
    with DockerSandbox(docker_ready) as sb:
        start = time.monotonic()
        res = sb.run(["sh", "-c", thief], timeout=20)
        assert res.exit_code == 7 and not res.timed_out
        assert time.monotonic() - start < 10
        sb.kill_user_processes()
        assert sb.run(["echo", "ok"], timeout=10).output == "ok\n"


def test_the_cpu_limit_is_the_commands_not_pid_1s(docker_ready):
    """``cpu_seconds`` limits every command, over the channel and as a ``docker exec``;
    PID 1 has no limit of its own, so the CPU the code under test makes it spend cannot
    end the sandbox."""
    with DockerSandbox(docker_ready, limits=Limits(cpu_seconds=1)) as sb:
        burn = ["python3", "-c", "while True: pass"]
        over_channel = sb.run(burn, timeout=20)
        assert sb.run(["sh", "-c", "ulimit -t; ulimit -Ht"], timeout=10).output == "1\n6\n"
        assert "Max cpu time              unlimited" in sb.run(
            ["cat", "/proc/1/limits"], timeout=10).output
        _exec_only(sb)
        as_exec = sb.run(burn, timeout=20)
        assert sb.run(["sh", "-c", "ulimit -t; ulimit -Ht"], timeout=10).output == "1\n6\n"
        assert over_channel.exit_code == as_exec.exit_code == 128 + 24  # SIGXCPU
        assert over_channel.duration_s < 10 and as_exec.duration_s < 10


def test_a_pid_1_that_stays_dumpable_serves_no_channel(docker_ready, monkeypatch):
    """When PID 1 cannot make itself non-dumpable (another runtime's seccomp profile, say)
    it says so to the hello, and every command is a docker exec."""
    from proctor.sandbox import docker_backend

    source = docker_backend.INIT_SOURCE
    assert source.count("secure = (") == 1
    monkeypatch.setattr(docker_backend, "INIT_SOURCE",
                        source.replace("secure = (", "secure = False and ("))
    with DockerSandbox(docker_ready) as sb:
        assert sb.run(["echo", "by exec"], timeout=10).output == "by exec\n"
        assert sb._channel is None
