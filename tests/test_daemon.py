"""The CLI daemon (:mod:`proctor.daemon`): ``proctor score`` run in a process forked from a
warm one gives what the same command gives in a process of its own (record, exit status,
messages, signals), and leaves nothing behind; the daemon serves only its own code and
environment, and ends when told, when idle, or when its socket is gone.

End to end on the local backend (bubblewrap): a real daemon, real ``python -m proctor``
clients, the toolz example task.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proctor import daemon

#: Record fields that differ between two scores of the same patch however they run.
VOLATILE = {"rollout_id", "timing"}


def _proctor(*args: str, cwd: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proctor", *args], cwd=cwd,
                          env=env or dict(os.environ), capture_output=True, text=True,
                          timeout=300, **kw)


def _stable(record: dict) -> dict:
    """The record without what varies run to run (ids, timings, the evidence's commands,
    durations and outputs, which hold random directory names)."""
    out = {k: v for k, v in record.items() if k not in VOLATILE}
    out["evidence"] = sorted(record["evidence"])
    return out


@pytest.fixture
def workdir(tmp_path) -> Path:
    """The clients' and the daemon's working directory (``python -m`` puts it first on
    ``sys.path``, so both must share it to share a key)."""
    return tmp_path


@pytest.fixture
def running(workdir) -> subprocess.Popen:
    """A daemon in the foreground for this environment, stopped after the test."""
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run", "--idle", "300"],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert "serving on" in line, proc.stderr.read()
    yield proc
    if proc.poll() is None:
        proc.terminate()
    proc.wait(timeout=60)


def _served(workdir: Path) -> int:
    done = _proctor("daemon", "status", cwd=workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    return int(done.stdout.split(":")[1].split()[0])


@pytest.mark.local
def test_a_score_in_the_daemon_is_the_score_of_a_process_of_its_own(
        running, workdir, toolz_task, toolz_build):
    patch = toolz_build / "patches" / "partial.patch"
    args = ("score", str(toolz_task), str(patch), "--sandbox", "local", "--json")
    alone = _proctor(*args, cwd=workdir, env={**os.environ, "PROCTOR_DAEMON": "0"})
    assert alone.returncode == 0, alone.stderr
    assert _served(workdir) == 0
    served = _proctor(*args, cwd=workdir)
    assert served.returncode == 0, served.stderr
    assert _served(workdir) == 1
    assert _stable(json.loads(served.stdout)) == _stable(json.loads(alone.stdout))
    assert json.loads(served.stdout)["reward"] == pytest.approx(0.6573, abs=1e-4)
    # the patch on standard input, the client's own
    piped = _proctor("score", str(toolz_task), "-", "--sandbox", "local", "--json",
                     cwd=workdir, input=patch.read_text())
    assert piped.returncode == 0, piped.stderr
    assert _served(workdir) == 2
    assert json.loads(piped.stdout)["reward"] == json.loads(alone.stdout)["reward"]
    # bad input: the same exit status and message both ways
    missing = ("score", str(workdir / "no-such-task"), str(patch), "--sandbox", "local")
    bad_alone = _proctor(*missing, cwd=workdir, env={**os.environ, "PROCTOR_DAEMON": "0"})
    bad_served = _proctor(*missing, cwd=workdir)
    assert bad_alone.returncode == bad_served.returncode == 2
    assert bad_served.stderr == bad_alone.stderr and "no-such-task" in bad_served.stderr
    assert _served(workdir) == 3


def _hanging_patch(make_toolz_patch, toolz_task) -> bytes:
    path = "toolz/itertoolz.py"
    text = (toolz_task / "repo" / path).read_text()
    return make_toolz_patch({path: (text, text + "\nimport time\nwhile True:\n"
                                    "    time.sleep(1)\n")})


def _sandbox_dirs() -> list[Path]:
    return list(Path(os.environ["PROCTOR_SANDBOX_DIR"]).glob("proctor-*"))


def _start_and_signal(args, workdir, env, signum) -> subprocess.CompletedProcess:
    """Start ``proctor score``; once its first sandbox exists, send ``signum``."""
    proc = subprocess.Popen([sys.executable, "-m", "proctor", *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    while not _sandbox_dirs() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.local
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_client_ends_the_command_as_it_ends_a_process_of_its_own(
        running, workdir, toolz_task, make_toolz_patch, tmp_path, signum):
    patch_file = tmp_path / "hang.patch"
    patch_file.write_bytes(_hanging_patch(make_toolz_patch, toolz_task))
    args = ("score", str(toolz_task), str(patch_file), "--sandbox", "local")
    alone = _start_and_signal(args, workdir, {**os.environ, "PROCTOR_DAEMON": "0"}, signum)
    assert _sandbox_dirs() == []
    served = _start_and_signal(args, workdir, dict(os.environ), signum)
    assert _served(workdir) == 1
    assert served.returncode == alone.returncode != 0
    assert _sandbox_dirs() == []  # the runner closed its sandboxes before it ended


@pytest.mark.local
def test_a_client_killed_ends_its_command_and_its_sandboxes(
        running, workdir, toolz_task, make_toolz_patch, tmp_path):
    patch_file = tmp_path / "hang.patch"
    patch_file.write_bytes(_hanging_patch(make_toolz_patch, toolz_task))
    args = ("score", str(toolz_task), str(patch_file), "--sandbox", "local")
    done = _start_and_signal(args, workdir, dict(os.environ), signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    end = time.monotonic() + 60
    while _sandbox_dirs() and time.monotonic() < end:  # the runner was sent SIGTERM
        time.sleep(0.1)
    assert _sandbox_dirs() == []


def test_stop_idle_and_a_stale_socket(workdir):
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run", "--idle", "300"],
                            cwd=workdir, stdout=subprocess.PIPE, text=True)
    path = proc.stdout.readline().split("serving on ")[1].strip()
    assert "1 daemon(s) stopped" in _proctor("daemon", "stop", cwd=workdir).stdout
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path)
    assert _proctor("daemon", "status", cwd=workdir).returncode == 1
    # idle: ends on its own
    idle = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run", "--idle", "1"],
                            cwd=workdir, stdout=subprocess.PIPE, text=True)
    assert "serving on" in idle.stdout.readline()
    assert idle.wait(timeout=30) == 0
    assert not os.path.exists(path)
    # killed: its socket stays, and commands run on their own
    killed = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run"],
                              cwd=workdir, stdout=subprocess.PIPE, text=True)
    assert "serving on" in killed.stdout.readline()
    killed.kill()
    killed.wait(timeout=30)
    assert os.path.exists(path)
    done = _proctor("score", str(workdir / "no-such-task"), "x.patch", cwd=workdir)
    assert done.returncode == 2 and "not found: x.patch" in done.stderr
    os.unlink(path)


def test_start_runs_one_daemon_in_the_background(workdir):
    first = _proctor("daemon", "start", "--idle", "60", cwd=workdir)
    assert first.returncode == 0 and "daemon started" in first.stdout, first.stderr
    again = _proctor("daemon", "start", cwd=workdir)
    assert "already runs" in again.stdout
    assert _proctor("daemon", "status", cwd=workdir).returncode == 0
    assert "1 daemon(s) stopped" in _proctor("daemon", "stop", cwd=workdir).stdout


def test_the_key_follows_the_code_and_the_keyed_environment(tmp_path):
    package = tmp_path / "proctor"
    shutil.copytree(Path(daemon.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PROCTOR_CACHE_DIR": "/a", "PATH": "/bin", "TERM": "xterm"}
    key = daemon.daemon_key(env, str(package))
    assert daemon.daemon_key(env, str(package)) == key
    # unkeyed variables and the switch itself: the runner gets them, the key ignores them
    assert daemon.daemon_key({**env, "TERM": "dumb", "COLUMNS": "80", "PROCTOR_DAEMON": "1"},
                             str(package)) == key
    for changed in ({"PROCTOR_CACHE_DIR": "/b"}, {"PYTHONPATH": "/x"}, {"LC_ALL": "C"},
                    {"PROCTOR_MAX_SANDBOXES": "1"}, {"DOCKER_HOST": "unix:///x"}):
        assert daemon.daemon_key({**env, **changed}, str(package)) != key, changed
    # any file of the package: changed, added, removed
    module = package / "task.py"
    module.write_text(module.read_text() + "\n")
    changed_key = daemon.daemon_key(env, str(package))
    assert changed_key != key
    (package / "new.py").write_text("")
    assert daemon.daemon_key(env, str(package)) not in (key, changed_key)
    # the socket is named by the key, in a directory of this user alone
    assert daemon.socket_path(key).endswith(f"/{key}.sock")


def test_a_socket_directory_others_can_enter_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    where = Path(daemon.socket_dir())
    where.mkdir(mode=0o755)
    where.chmod(0o755)
    with pytest.raises(daemon.DaemonError, match="0700"):
        daemon.serve("k" * 24, 1.0)
    (where / f"{daemon.daemon_key()}.sock").touch()
    assert daemon.run_in_daemon(["proctor", "score", "--help"]) is None
