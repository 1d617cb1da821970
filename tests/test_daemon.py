"""The CLI daemon (:mod:`proctor.daemon`): ``proctor score`` run in a process forked from a
warm one gives what the same command gives in a process of its own (record, exit status,
messages, signals), runs once whatever the timing, and leaves nothing behind; the daemon
serves only its own code, environment and kind of process, keeps no descriptor of a
request, and ends when told, when idle, or when its socket is gone.

End to end on the local backend (bubblewrap): a real daemon, real ``python -m proctor``
clients, the toolz example task. Each test has its own socket directory and sandbox
directory (both in the environment the daemon and its clients share).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from proctor import daemon

#: Record fields that differ between two scores of the same patch however they run.
VOLATILE = {"rollout_id", "timing"}


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment of the daemon and its clients: a socket directory and a local
    sandbox directory of this test's own (short paths under /tmp: a unix socket's path has
    a 108-byte limit; the sandbox dir must be reachable by the sandbox's uid)."""
    run = tempfile.mkdtemp(prefix="pdt-", dir="/tmp")
    boxes = tempfile.mkdtemp(prefix="pdb-", dir="/tmp")
    os.chmod(boxes, 0o755)
    yield {**os.environ, "XDG_RUNTIME_DIR": run, "PROCTOR_SANDBOX_DIR": boxes}
    shutil.rmtree(run, ignore_errors=True)
    left = os.listdir(boxes)
    from proctor.sandbox.bwrap_backend import remove_dir

    for name in left:  # unmounts a leaked local sandbox's tmpfs areas first
        remove_dir(Path(boxes) / name)
    shutil.rmtree(boxes, ignore_errors=True)
    assert left == [], f"sandbox dirs left behind: {left}"


def _proctor(*args: str, cwd: Path, env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proctor", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, **kw)


def _alone(env: dict) -> dict:
    return {**env, "PROCTOR_DAEMON": "0"}


def _start(cwd: Path, env: dict, *args: str) -> tuple[subprocess.Popen, str]:
    """``proctor daemon run ARGS`` in the foreground, its output to a file: (process, its
    socket path) once it serves."""
    log = open(cwd / f"daemon-{time.monotonic_ns()}.log", "w+")  # noqa: SIM115 - the process's
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run", *args], cwd=cwd,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        text = Path(log.name).read_text()
        if "serving on " in text:
            return proc, text.split("serving on ")[1].split()[0]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the daemon did not start: {Path(log.name).read_text()}")


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


@pytest.fixture
def running(tmp_path, env):
    """A daemon for ``env``, run from ``tmp_path`` (``python -m`` puts the working directory
    first on ``sys.path``: the clients share it, hence the key); ended after the test, its
    socket gone."""
    proc, path = _start(tmp_path, env, "--idle", "300")
    proc.socket_path = path
    yield proc
    _end(proc)
    assert not os.path.exists(path)


def _served(cwd: Path, env: dict) -> int:
    done = _proctor("daemon", "status", cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return int(done.stdout.split(":")[1].split()[0])


def _stable(record: dict) -> dict:
    """The record without what varies run to run (ids, timings, the evidence's commands,
    durations and outputs, which hold random directory names)."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["evidence"] = sorted(record["evidence"])
    return out


@pytest.mark.local
def test_a_score_in_the_daemon_is_the_score_of_a_process_of_its_own(
        running, tmp_path, env, toolz_task, toolz_build):
    patch = toolz_build / "patches" / "partial.patch"
    args = ("score", str(toolz_task), str(patch), "--sandbox", "local", "--json")
    alone = _proctor(*args, cwd=tmp_path, env=_alone(env))
    assert alone.returncode == 0, alone.stderr
    assert _served(tmp_path, env) == 0
    served = _proctor(*args, cwd=tmp_path, env=env)
    assert served.returncode == 0, served.stderr
    assert _served(tmp_path, env) == 1
    assert _stable(json.loads(served.stdout)) == _stable(json.loads(alone.stdout))
    assert json.loads(served.stdout)["reward"] == pytest.approx(0.6573, abs=1e-4)
    # the patch on standard input, the client's own
    piped = _proctor("score", str(toolz_task), "-", "--sandbox", "local", "--json",
                     cwd=tmp_path, env=env, input=patch.read_text())
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["reward"] == json.loads(alone.stdout)["reward"]
    # bad input ends the runner at once: the same status and message both ways, once
    missing = ("score", str(tmp_path / "no-such-task"), str(patch), "--sandbox", "local")
    bad_alone = _proctor(*missing, cwd=tmp_path, env=_alone(env))
    # (rich wraps a long path on the console's width: compare the message unwrapped)
    assert bad_alone.returncode == 2 and "no-such-task" in bad_alone.stderr.replace("\n", "")
    for _ in range(5):
        bad = _proctor(*missing, cwd=tmp_path, env=env)
        assert (bad.returncode, bad.stdout, bad.stderr) == (2, "", bad_alone.stderr)
    assert _served(tmp_path, env) == 7
    # standard input closed: the patch cannot be read from it, a usage error both ways
    # (the daemon is not asked: the closed stream is the command's to see)
    closed = [_proctor("score", str(toolz_task), "-", "--sandbox", "local", cwd=tmp_path,
                       env=e, stdin=None, preexec_fn=lambda: os.close(0))
              for e in (_alone(env), env)]
    assert [(c.returncode, c.stdout) for c in closed] == [(2, ""), (2, "")]
    assert closed[0].stderr == closed[1].stderr
    assert "standard input is closed" in closed[0].stderr.replace("\n", " ")
    assert _served(tmp_path, env) == 7
    # the patch through a descriptor of the client's (``<(cat patch)``): scored there
    r, w = os.pipe()
    os.write(w, patch.read_bytes())
    os.close(w)
    try:
        own_fd = _proctor("score", str(toolz_task), f"/dev/fd/{r}", "--sandbox", "local",
                          "--json", cwd=tmp_path, env=env, pass_fds=(r,))
    finally:
        os.close(r)
    assert own_fd.returncode == 0, own_fd.stderr
    assert json.loads(own_fd.stdout)["reward"] == json.loads(alone.stdout)["reward"]
    assert _served(tmp_path, env) == 7


def _hanging_patch(make_toolz_patch, toolz_task) -> bytes:
    path = "toolz/itertoolz.py"
    text = (toolz_task / "repo" / path).read_text()
    return make_toolz_patch({path: (text, text + "\nimport time\nwhile True:\n"
                                    "    time.sleep(1)\n")})


def _boxes(env: dict) -> list[str]:
    return os.listdir(env["PROCTOR_SANDBOX_DIR"])


def _start_and_signal(args, cwd, env, signum, ignored=False) -> subprocess.CompletedProcess:
    """Start ``proctor score`` (``ignored``: with ``signum`` ignored, as a shell starts a
    background job); once its first sandbox exists, send ``signum``."""
    proc = subprocess.Popen([sys.executable, "-m", "proctor", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: signal.signal(signum, signal.SIG_IGN))
                            if ignored else None)
    end = time.monotonic() + 120
    while not _boxes(env) and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    assert _boxes(env) and proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.local
@pytest.mark.parametrize(("signum", "ignored"), [(signal.SIGINT, False),
                                               (signal.SIGTERM, False),
                                               (signal.SIGINT, True)],
                         ids=["SIGINT", "SIGTERM", "SIGINT-inherited-ignored"])
def test_a_signal_to_the_client_ends_the_command_as_it_ends_a_process_of_its_own(
        running, tmp_path, env, toolz_task, make_toolz_patch, signum, ignored):
    patch_file = tmp_path / "hang.patch"
    patch_file.write_bytes(_hanging_patch(make_toolz_patch, toolz_task))
    args = ("score", str(toolz_task), str(patch_file), "--sandbox", "local")
    alone = _start_and_signal(args, tmp_path, _alone(env), signum, ignored)
    assert _boxes(env) == []
    served = _start_and_signal(args, tmp_path, env, signum, ignored)
    assert _served(tmp_path, env) == 1
    assert served.returncode == alone.returncode != 0
    # SIGINT ends proctor score with 130 (KeyboardInterrupt), SIGTERM by the signal
    assert alone.returncode == (130 if signum == signal.SIGINT else -signum)
    assert _boxes(env) == []  # the runner closed its sandboxes before it ended


def _spares(proc: subprocess.Popen) -> list[int]:
    """Pids of the mutant generators the daemon started ahead (named by its pidfds)."""
    pids = []
    for fd in os.listdir(f"/proc/{proc.pid}/fdinfo"):
        try:
            info = Path(f"/proc/{proc.pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        pids += [int(line.split()[1]) for line in info.splitlines() if line.startswith("Pid:")]
    return pids


def _tree(pid: int) -> set[int]:
    """``pid`` and its descendants."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        found.add(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return found


def _gone(pids: set[int], timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.local
def test_the_daemon_starts_the_next_scores_mutant_generator_ahead_and_leaves_none(
        running, tmp_path, env, toolz_task, toolz_build):
    """A runner would start its generator during its score, taking CPU from its sandboxes;
    the daemon starts the one its last runner used while idle, the next runner takes it,
    and the record is the same."""
    patch = toolz_build / "patches" / "partial.patch"
    args = ("score", str(toolz_task), str(patch), "--sandbox", "local", "--json")
    assert _spares(running) == []  # no runner of this daemon's key has started one yet
    first = _proctor(*args, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    end = time.monotonic() + 60
    while not _spares(running) and time.monotonic() < end:
        time.sleep(0.1)
    [spare] = _spares(running)
    tree = _tree(spare)
    assert any("mutmut_adapter" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
               for p in tree)
    status = _proctor("daemon", "status", cwd=tmp_path, env=env)
    assert "started ahead for the next score: 1" in status.stdout
    second = _proctor(*args, cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    assert _stable(json.loads(second.stdout)) == _stable(json.loads(first.stdout))
    assert json.loads(second.stdout)["reward"] == pytest.approx(0.6573, abs=1e-4)
    assert _gone(tree)  # taken by the second runner, ended with it
    end = time.monotonic() + 60
    while not _spares(running) and time.monotonic() < end:
        time.sleep(0.1)
    [again] = _spares(running)
    assert again != spare
    tree = _tree(again)
    _end(running)
    assert _gone(tree)  # the daemon ends the spare it did not hand over


def _watchers(proc: subprocess.Popen) -> list[str]:
    return Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()


@pytest.mark.local
def test_a_client_killed_ends_its_command_and_its_sandboxes(
        running, tmp_path, env, toolz_task, make_toolz_patch):
    patch_file = tmp_path / "hang.patch"
    patch_file.write_bytes(_hanging_patch(make_toolz_patch, toolz_task))
    args = ("score", str(toolz_task), str(patch_file), "--sandbox", "local")
    done = _start_and_signal(args, tmp_path, env, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    end = time.monotonic() + 60
    while (_boxes(env) or _watchers(running)) and time.monotonic() < end:
        time.sleep(0.1)  # the runner was sent SIGTERM, ends, and its watcher with it
    assert _boxes(env) == [] and _watchers(running) == []


@pytest.mark.local
def test_a_command_the_client_stopped_waiting_for_runs_once(tmp_path, env, toolz_task,
                                                            toolz_build):
    """A daemon too slow to answer (stopped here): the client runs the command itself;
    when the daemon goes on while the client still runs, the command it was handed is
    killed before it did anything: one record, written once."""
    proc, _ = _start(tmp_path, env, "--idle", "300")
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        with open(tmp_path / "out.txt", "w") as out:
            client = subprocess.Popen(
                [sys.executable, "-m", "proctor", "score", str(toolz_task),
                 str(toolz_build / "patches" / "partial.patch"), "--sandbox", "local",
                 "--json"], cwd=tmp_path, stdout=out, stderr=subprocess.PIPE, text=True,
                env={**env, "PROCTOR_DAEMON_WAIT_S": "1"})
            end = time.monotonic() + 120
            while not _boxes(env) and client.poll() is None and time.monotonic() < end:
                time.sleep(0.01)  # the client gave up on the daemon and scores by itself
            os.kill(proc.pid, signal.SIGCONT)
            _, err = client.communicate(timeout=300)
        assert client.returncode == 0, err
        assert _proctor("daemon", "status", cwd=tmp_path, env=env).returncode == 0
        end = time.monotonic() + 30
        while _watchers(proc) and time.monotonic() < end:
            time.sleep(0.1)
        assert _watchers(proc) == []
        lines = (tmp_path / "out.txt").read_text().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["reward"] == pytest.approx(
            0.6573, abs=1e-4)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        _end(proc)


def _fds(proc: subprocess.Popen) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


def test_bad_requests_and_other_kinds_of_process_are_declined_and_cost_nothing(
        running, tmp_path, env):
    path = running.socket_path
    before = _fds(running)
    for payload in (b"", b"\x00\x00\x00\x05{bad", b"\xff\xff\xff\xff", b"\x00\x00\x00\x02[]"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            socket.send_fds(conn, [payload or b"x"], [0, 1, 2])
            conn.shutdown(socket.SHUT_WR)
            assert conn.recv(100) == b""  # closed without an answer
    assert _fds(running) == before
    # a client whose limits differ from the daemon's runs the command itself, alike
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    done = subprocess.run(
        [sys.executable, "-m", "proctor", "score", str(tmp_path / "no-such-task"), "x.patch"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, nofile[1])))
    assert done.returncode == 2 and "not found" in done.stderr.replace("\n", "")
    status = subprocess.run(
        [sys.executable, "-m", "proctor", "daemon", "status"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, nofile[1])))
    assert "but not this process" in status.stdout
    # a wait that is no number of seconds: the client runs the command itself
    for wait in ("nan", "-1", "soon"):
        done = _proctor("score", str(tmp_path / "no-such-task"), "x.patch", cwd=tmp_path,
                        env={**env, "PROCTOR_DAEMON_WAIT_S": wait})
        assert done.returncode == 2 and "not found" in done.stderr.replace("\n", "")
    assert _served(tmp_path, env) == 0
    assert _fds(running) == before


@pytest.mark.parametrize("signum,status", [(signal.SIGKILL, -signal.SIGKILL),
                                           (signal.SIGTERM, -signal.SIGTERM),
                                           (signal.SIGSEGV, 128 + signal.SIGSEGV)])
def test_a_runner_ended_by_a_signal_ends_its_client_alike_but_for_a_crash(signum, status):
    code = ("import sys; from proctor import daemon; "
            f"sys.exit(daemon._ended('signal {int(signum)}'))")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == status


def test_stop_idle_and_a_stale_socket(tmp_path, env):
    proc, path = _start(tmp_path, env, "--idle", "300")
    assert "1 daemon(s) stopped" in _proctor("daemon", "stop", cwd=tmp_path, env=env).stdout
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path)
    assert _proctor("daemon", "status", cwd=tmp_path, env=env).returncode == 1
    # idle: ends on its own; asking for its status does not keep it up
    idle, path = _start(tmp_path, env, "--idle", "2")
    assert _proctor("daemon", "status", cwd=tmp_path, env=env).returncode == 0
    assert idle.wait(timeout=30) == 0
    assert not os.path.exists(path)
    # killed: its socket stays, and commands run on their own
    killed, path = _start(tmp_path, env)
    killed.kill()
    killed.wait(timeout=30)
    assert os.path.exists(path)
    done = _proctor("score", str(tmp_path / "no-such-task"), "x.patch", cwd=tmp_path, env=env)
    assert done.returncode == 2 and "not found: x.patch" in done.stderr.replace("\n", "")
    # a new daemon takes the stale socket over
    again, path2 = _start(tmp_path, env)
    assert path2 == path and _proctor("daemon", "status", cwd=tmp_path, env=env).returncode == 0
    _end(again)


def test_start_runs_one_daemon_in_the_background(tmp_path, env):
    starts = [subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "start", "--idle",
                                "60"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(3)]
    said = [p.communicate(timeout=120) for p in starts]
    try:
        assert [p.returncode for p in starts] == [0, 0, 0], said
        # started at once: one starts it, the others find it; all name the same process
        assert sum("daemon started" in o for o, _ in said) == 1, said
        pids = {o.split("pid ")[1].split(";")[0].split(")")[0] for o, _ in said}
        assert len(pids) == 1, said
        again = _proctor("daemon", "start", cwd=tmp_path, env=env)
        assert "already runs" in again.stdout and f"pid {pids.pop()})" in again.stdout
        assert _proctor("daemon", "status", cwd=tmp_path, env=env).returncode == 0
        # another environment: none of its own, and what differs from the one that runs
        other = _proctor("daemon", "status", cwd=tmp_path, env={**env, "TZ": "UTC0"})
        said = " ".join(other.stdout.split())  # as rich wrapped it: unwrapped
        assert other.returncode == 1, other.stderr
        assert "`python" in said and " -m proctor daemon start` starts one" in said
        assert "differs in: $TZ" in said
    finally:
        stopped = _proctor("daemon", "stop", "--all", cwd=tmp_path, env=env).stdout
    assert "1 daemon(s) stopped" in stopped


def test_score_heeds_sigint_and_sigterm_from_its_start_even_inherited_ignored():
    """A shell's background job starts with SIGINT ignored: ``proctor score`` takes the
    default actions back before anything else, so a signal ends it the same way at any
    moment, daemon or not (its sandboxes' cleanup installs its handlers later)."""
    from proctor import launcher

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for signum in saved:
            signal.signal(signum, signal.SIG_IGN)
        launcher._heed_stop_signals()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        handler = signal.getsignal(signal.SIGINT)
        launcher._heed_stop_signals()  # a handler of its own is left alone
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def test_the_key_follows_the_code_and_the_keyed_environment(tmp_path):
    package = tmp_path / "proctor"
    shutil.copytree(Path(daemon.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PROCTOR_CACHE_DIR": "/a", "PATH": "/bin", "TERM": "xterm"}
    key = daemon.daemon_key(env, str(package))
    assert daemon.daemon_key(env, str(package)) == key
    # unkeyed variables and the switches themselves: the runner gets them, the key not
    assert daemon.daemon_key({**env, "TERM": "dumb", "COLUMNS": "80", "PROCTOR_DAEMON": "1",
                              "PROCTOR_DAEMON_WAIT_S": "3"}, str(package)) == key
    for changed in ({"PROCTOR_CACHE_DIR": "/b"}, {"PYTHONPATH": "/x"}, {"LC_ALL": "C"},
                    {"PROCTOR_MAX_SANDBOXES": "1"}, {"DOCKER_HOST": "unix:///x"}):
        assert daemon.daemon_key({**env, **changed}, str(package)) != key, changed
    # any file of the package: changed, added, removed; a dangling link is no error
    parts = daemon.key_parts(env, str(package))
    assert daemon.differing_parts(parts, daemon.key_parts(
        {**env, "PROCTOR_CACHE_DIR": "/b", "LC_ALL": "C"}, str(package))) == [
            "$LC_ALL", "$PROCTOR_CACHE_DIR"]
    module = package / "task.py"
    module.write_text(module.read_text() + "\n")
    changed_key = daemon.daemon_key(env, str(package))
    assert changed_key != key
    assert daemon.differing_parts(parts, daemon.key_parts(env, str(package))) == [
        "package files"]
    (package / ".#cli.py").symlink_to("root@host.123:456")  # an editor's lock file
    linked = daemon.daemon_key(env, str(package))
    assert linked not in (key, changed_key)
    (package / "new.py").write_text("")
    assert daemon.daemon_key(env, str(package)) not in (key, changed_key, linked)
    assert daemon.socket_path(key).endswith(f"/{key}.sock")


def test_a_socket_directory_others_can_enter_is_refused(tmp_path, monkeypatch):
    run = tempfile.mkdtemp(prefix="pdt-", dir="/tmp")
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", run)
        where = Path(daemon.socket_dir())
        where.mkdir()
        where.chmod(0o755)
        with pytest.raises(daemon.DaemonError, match="0700"):
            daemon.serve("k" * 24, 1.0)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(where / f"{daemon.daemon_key()}.sock"))
            listener.listen(1)
            listener.settimeout(0.5)
            assert daemon.run_in_daemon(["proctor", "score", "--help"]) is None
            with pytest.raises(TimeoutError):  # the client never connected
                listener.accept()
    finally:
        shutil.rmtree(run, ignore_errors=True)


def test_a_daemon_is_refused_under_an_entry_point_that_would_not_run_its_commands(tmp_path):
    """``daemon run`` under ``proctor.cli:app`` itself (an old console script, say): its
    runners would end without running anything, so it does not start."""
    code = "from proctor.cli import app; app(['daemon', 'run', '--idle', '1'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3 and "proctor.launcher" in done.stderr.replace("\n", " ")
