"""Every sandbox backend keeps the same promises (design.md section 7): timeouts kill the whole
process tree, no network, limits hold, output is capped, nothing leaks, nothing is left
behind. Parametrised over the registered backends; each test runs on each backend.

Where a backend cannot enforce a limit, the test skips with the reason naming the limit.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from proctor.sandbox import BACKENDS, Limits, Sandbox

MiB = 1024**2
PY = "/opt/proctor/venv/bin/python"

BACKEND_PARAMS = [
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("local", marks=pytest.mark.local),
]


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def open_sb(backend, request, no_leaks):
    """``open_sb(limits)`` -> a new sandbox of the backend under test, closed after."""
    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    opened: list[Sandbox] = []

    def make(limits: Limits = Limits()) -> Sandbox:
        sb = BACKENDS[backend](env, limits=limits)
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


def _unenforced(sb: Sandbox, limit: str) -> None:
    reason = getattr(sb, "unenforced", {}).get(limit)
    if reason:
        pytest.skip(f"{sb.name}: limit '{limit}' not enforced: {reason}")


def _recovers(sb: Sandbox, within_s: float = 15.0) -> bool:
    """The sandbox runs a command again within ``within_s`` (dying processes of a fork bomb
    may hold the pids limit for a moment on a loaded machine)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if sb.run(["true"], timeout=10).ok:
            return True
        time.sleep(0.5)
    return False


def _procs(sb: Sandbox) -> str:
    return sb.run(["sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; "
                   "done 2>/dev/null"], timeout=10).output


# ------------------------------------------------------------------ identity, file system


def test_runs_as_the_sandbox_user_without_capabilities(open_sb):
    sb = open_sb()
    assert sb.run(["id", "-u"], timeout=10).output.strip() == "1000"
    caps = sb.run(["grep", "CapEff", "/proc/self/status"], timeout=10).output
    assert caps.split()[-1] == "0000000000000000"


def test_root_is_read_only_and_the_writable_places_are_private(open_sb):
    sb = open_sb()
    for path in ("/usr/proctor-x", "/etc/proctor-x", "/proctor-x", "/opt/proctor/venv/x"):
        assert sb.run(["touch", path], timeout=10).exit_code != 0, path
    for path in ("/work/x", "/tmp/x", "$HOME/x", "/proctor/out/x", "/proctor/in/x"):
        assert sb.run(["sh", "-c", f"touch {path}"], timeout=10).ok, path


def test_files_roundtrip_and_read_only_files_cannot_be_changed(open_sb):
    sb = open_sb()
    sb.put_files("/work/repo", {"pkg/a.py": b"x = 1\n"})
    sb.put_files("/proctor/harness", {"h.py": b"y = 2\n"}, read_only=True)
    assert sb.get_file("/work/repo/pkg/a.py") == b"x = 1\n"
    assert sb.get_file("/proctor/harness/h.py") == b"y = 2\n"
    assert sb.get_file("/work/repo/missing.py") is None
    assert sb.get_file("/proctor/harness/h.py", max_bytes=3) is None
    tamper = sb.run(["sh", "-c", "echo z > /proctor/harness/h.py; rm -f /proctor/harness/h.py;"
                     " mv /proctor/harness /proctor/x"], timeout=10)
    assert tamper.exit_code != 0
    assert sb.get_file("/proctor/harness/h.py") == b"y = 2\n"


def test_several_read_only_dirs_in_one_operation_are_like_read_only_put_files(open_sb):
    sb = open_sb()
    sb.put_read_only_dirs({"/proctor/h-1": {"t/test_a.py": b"a\n", "c.py": b"c\n"},
                           "/proctor/t-2": {"x.json": b"[]"}, "/proctor/e-3": {}})
    assert sb.get_file("/proctor/h-1/t/test_a.py") == b"a\n"
    assert sb.get_file("/proctor/t-2/x.json") == b"[]"
    sb.put_files("/proctor/r-0", {"t/test_a.py": b"a\n"}, read_only=True)  # the reference
    modes = sb.run(["sh", "-c", "cd /proctor && stat -c '%n %u %a' r-0 r-0/t r-0/t/test_a.py "
                    "h-1 h-1/t h-1/t/test_a.py h-1/c.py t-2 t-2/x.json e-3"], timeout=10).output
    owner = modes.split()[1]  # root's uid as the user sees it (1000 in a user namespace)
    assert modes.split("\n")[:10] == [
        f"r-0 {owner} 555", f"r-0/t {owner} 555", f"r-0/t/test_a.py {owner} 444",
        f"h-1 {owner} 555", f"h-1/t {owner} 555", f"h-1/t/test_a.py {owner} 444",
        f"h-1/c.py {owner} 444", f"t-2 {owner} 555", f"t-2/x.json {owner} 444",
        f"e-3 {owner} 555"]
    tamper = sb.run(["sh", "-c", "echo z > /proctor/h-1/c.py; rm -f /proctor/t-2/x.json; "
                     "touch /proctor/h-1/t/new.py; mv /proctor/h-1 /proctor/y"], timeout=10)
    assert tamper.exit_code != 0 and sb.get_file("/proctor/h-1/c.py") == b"c\n"
    assert sb.run(["ls", "/proctor/t-2", "/proctor/h-1/t"], timeout=10).output.split() == [
        "/proctor/h-1/t:", "test_a.py", "/proctor/t-2:", "x.json"]
    from proctor.errors import InfraError

    with pytest.raises(InfraError):  # fresh directories only
        sb.put_read_only_dirs({"/proctor/t-2": {"y": b""}})
    assert sb.get_file("/proctor/t-2/y") is None
    with pytest.raises(ValueError):
        sb.put_read_only_dirs({"/proctor/a": {}, "/tmp/b": {}})


# ------------------------------------------------------------------ timeouts


def test_timeout_kills_the_whole_tree_including_term_and_alrm_ignoring_children(open_sb):
    sb = open_sb()
    tag = secrets.token_hex(4)
    stubborn = (f"import signal, time; [signal.signal(s, signal.SIG_IGN) for s in "
                f"(signal.SIGTERM, signal.SIGALRM, signal.SIGHUP, signal.SIGINT)]; "
                f"time.sleep(300)  # {tag}")
    script = (f"trap '' TERM ALRM; {PY} -c '{stubborn}' & "
              f"setsid {PY} -c '{stubborn}' & "
              f"( trap '' TERM; sleep 300 ) & {PY} -c '{stubborn}'")
    start = time.monotonic()
    res = sb.run(["sh", "-c", script], timeout=2)
    assert res.timed_out and res.exit_code in (124, 137)
    assert time.monotonic() - start < 2 + 3 + 5
    assert tag not in _procs(sb)
    assert sb.run(["true"], timeout=10).ok


@pytest.mark.parametrize("stopped", [False, True], ids=["running", "stopped"])
def test_own_deadline_runs_unwrapped_and_still_ends_at_the_timeout(open_sb, stopped):
    # own_deadline: no `timeout` process holds the command's output (only the command); at
    # the timeout the user's processes are killed from outside, even a SIGSTOPped command
    # (the red team's way to turn a run into a watchdog infra error), and it is timed_out.
    sb = open_sb()
    tag = secrets.token_hex(4)
    script = (f"cat /proc/$PPID/comm 2>/dev/null; {'kill -STOP $$;' if stopped else ''} "
              f"setsid {PY} -c 'import time; time.sleep(300)  # {tag}' & sleep 300")
    start = time.monotonic()
    res = sb.run(["sh", "-c", script], timeout=2, own_deadline=True)
    assert res.timed_out and res.exit_code == 137, res
    assert "timeout" not in res.output
    assert time.monotonic() - start < 2 + 5
    assert tag not in _procs(sb)
    assert sb.run(["true"], timeout=10).ok


def test_zombies_are_reaped(open_sb):
    sb = open_sb()
    sb.run(["sh", "-c", "for i in 1 2 3; do (sleep 0.1 &) ; done; sleep 1"], timeout=10)
    time.sleep(0.5)
    states = sb.run(["sh", "-c", "grep -h '^State' /proc/[0-9]*/status"], timeout=10).output
    assert "zombie" not in states


# ------------------------------------------------------------------ network


@pytest.mark.parametrize("address", ["127.0.0.1", "10.255.255.1"])
def test_no_network(open_sb, address):
    sb = open_sb()
    code = (f"import socket; s = socket.socket(); s.settimeout(3); s.connect(('{address}', 80));"
            f" print('CONNECTED')")
    res = sb.run([PY, "-c", code], timeout=15)
    assert res.exit_code != 0 and "CONNECTED" not in res.output
    assert res.duration_s < 5  # refused or unreachable at once: no route out of the sandbox
    ifaces = sb.run(["cat", "/proc/net/dev"], timeout=10).output
    assert [ln.split(":")[0].strip() for ln in ifaces.splitlines()[2:]] in ([], ["lo"])


# ------------------------------------------------------------------ limits


def test_memory_limit_stops_one_process_and_the_sandbox_survives(open_sb):
    sb = open_sb(Limits(memory_bytes=256 * MiB))
    res = sb.run([PY, "-c", "b = bytearray(512 * 1024**2); b[::4096] = b'x' * len(b[::4096]);"
                  " print('ALLOCATED')"], timeout=60)
    assert res.exit_code != 0 and "ALLOCATED" not in res.output
    assert sb.run(["true"], timeout=10).ok


def test_memory_limit_covers_the_whole_process_tree(open_sb):
    sb = open_sb(Limits(memory_bytes=256 * MiB))
    _unenforced(sb, "memory")
    hog = ("import time; b = bytearray(100 * 1024**2); b[::4096] = b'x' * len(b[::4096]); "
           "time.sleep(3); print('HELD')")
    res = sb.run(["sh", "-c", f"for i in 1 2 3 4; do {PY} -c \"{hog}\" & done; wait"],
                 timeout=30)
    assert res.output.count("HELD") < 4  # 4 x 100 MiB do not fit in 256 MiB together
    assert sb.run(["true"], timeout=10).ok


def test_pids_limit_stops_a_fork_bomb(open_sb):
    sb = open_sb(Limits(pids=64))
    _unenforced(sb, "pids")
    res = sb.run(["sh", "-c", "for i in $(seq 200); do sleep 5 & done; wait"], timeout=20)
    assert "fork" in res.output.lower() or "resource" in res.output.lower()
    sb.kill_user_processes()  # the sleeps it did start hold pids; the harness does this too
    bomb = ("import os, time\nwhile True:\n    try:\n        os.fork()\n"
            "    except OSError:\n        time.sleep(0.01)\n")
    start = time.monotonic()
    res = sb.run([PY, "-c", bomb], timeout=3)
    assert res.timed_out and time.monotonic() - start < 3 + 3 + 5
    assert _recovers(sb)


def test_file_size_limit_stops_one_big_file(open_sb):
    sb = open_sb(Limits(file_size_bytes=8 * MiB))
    _unenforced(sb, "file_size")
    res = sb.run(["sh", "-c", "head -c 20000000 /dev/zero > /tmp/big"], timeout=30)
    assert res.exit_code != 0
    size = sb.run(["stat", "-c", "%s", "/tmp/big"], timeout=10).output.strip()
    assert int(size) <= 8 * MiB


@pytest.mark.parametrize("where", ["/work", "/tmp"])
def test_bounded_writable_area_stops_a_disk_fill(open_sb, where):
    sb = open_sb(Limits(disk_bytes=48 * MiB, tmp_bytes=48 * MiB, file_size_bytes=8 * MiB))
    _unenforced(sb, "disk")
    res = sb.run(["sh", "-c", f"i=0; while [ $i -lt 40 ]; do head -c 4000000 /dev/zero > "
                  f"{where}/f$i || exit 7; i=$((i+1)); done"], timeout=60)
    assert res.exit_code == 7 and "space" in res.output.lower()
    used = sb.run(["sh", "-c", f"du -sk {where}"], timeout=10).output.split()[0]
    assert int(used) * 1024 <= 48 * MiB + MiB
    assert sb.run(["true"], timeout=10).ok


# ------------------------------------------------------------------ output


def test_output_is_capped_with_a_marker(open_sb):
    sb = open_sb(Limits(output_cap=1000))
    res = sb.run(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"], timeout=10)
    assert res.truncated and res.output.startswith("x" * 1000)
    assert "99000 more bytes dropped" in res.output


def test_huge_output_is_streamed_never_held_whole(open_sb):
    sb = open_sb(Limits(output_cap=64 * 1024))
    tracemalloc.start()
    try:
        res = sb.run(["sh", "-c", "head -c 300000000 /dev/zero"], timeout=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.truncated and f"{300000000 - 64 * 1024} more bytes dropped" in res.output
    assert peak < 32 * MiB


# ------------------------------------------------------------------ host directories


def test_mounted_host_dir_is_visible_and_read_only_to_the_user_and_root(backend, request,
                                                                        tmp_path, no_leaks):
    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "a.py").write_text("print('harness')\n")
    with BACKENDS[backend](env, mounts={"/proctor/harness": tmp_path / "h"}) as sb:
        assert sb.run([PY, "-I", "-B", "/proctor/harness/a.py"], timeout=30).output == "harness\n"
        for user in (None, "0:0"):
            res = sb.run(["sh", "-c", "{ echo x > /proctor/harness/a.py || "
                          "rm -f /proctor/harness/a.py || touch /proctor/harness/b; "
                          "chmod -R a+w /proctor/harness; } 2>/dev/null; "
                          "cat /proctor/harness/a.py; ls /proctor/harness"], timeout=30,
                         user=user)
            assert res.output == "print('harness')\na.py\n", res.output
        sb.put_files("/proctor/out", {"r.txt": b"1"})  # the other areas still work
    assert (tmp_path / "h" / "a.py").read_text() == "print('harness')\n"
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["a.py"]


# ------------------------------------------------------------------ standard input


def test_stdin_bytes_reach_the_command_and_output_written_before_reading_does_not_block(open_sb):
    sb = open_sb()
    data = secrets.token_bytes(3 * MiB)
    res = sb.run(["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; sha256sum"], timeout=30,
                 stdin=data)
    assert res.ok and res.output.endswith(f"{hashlib.sha256(data).hexdigest()}  -\n")


def test_stdin_a_command_that_does_not_read_it_ends_normally(open_sb):
    res = open_sb().run(["sh", "-c", "exit 3"], timeout=30, stdin=b"x" * (4 * MiB))
    assert res.exit_code == 3 and not res.timed_out


def test_stdin_chunks_arrive_as_they_are_yielded_and_the_input_closes_after(open_sb):
    sb = open_sb()
    go = threading.Event()

    def chunks():
        yield b"first\n"
        go.wait(10)  # the command is already running and blocks on its read meanwhile
        yield b"second\n"

    threading.Timer(0.5, go.set).start()
    res = sb.run(["sh", "-c", "read a; echo got $a; cat"], timeout=30, stdin=chunks())
    assert res.ok and res.output == "got first\nsecond\n"


def test_stdin_is_empty_without_input(open_sb):
    res = open_sb().run(["sh", "-c", "cat; echo end"], timeout=10)
    assert res.ok and res.output == "end\n"


# ------------------------------------------------------------------ isolation, cleanup


def test_nothing_written_inside_reaches_the_host_or_the_next_sandbox(open_sb):
    token = secrets.token_hex(8)
    sb = open_sb()
    write = sb.run(["sh", "-c", f"for d in /tmp /work $HOME /proctor/out; do "
                    f"echo {token} > $d/leak-{token}; done"], timeout=10)
    assert write.ok
    for d in ("/tmp", "/work", str(Path.home()), "/proctor/out"):
        assert not Path(d, f"leak-{token}").exists()
    sb2 = open_sb()
    res = sb2.run(["sh", "-c", f"cat /tmp/leak-{token} /work/leak-{token} "
                   f"$HOME/leak-{token} /proctor/out/leak-{token}"], timeout=10)
    assert res.exit_code != 0 and token not in res.output.replace(f"leak-{token}", "")


def test_close_leaves_nothing_running_or_on_disk(open_sb, backend, docker_engine):
    sb = open_sb()
    assert sb.run(["sh", "-c", "setsid sleep 300 & echo x > /work/x"], timeout=10).ok
    left = sb.leftovers()
    assert left  # the sandbox exists while open
    sb.close()
    sb.close()  # idempotent
    assert sb.leftovers() == []
