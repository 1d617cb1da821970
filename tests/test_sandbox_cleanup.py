"""Nothing outlives its owner: stale-sandbox rules (pure), kill -9 of a harness mid-run and a
restart leave zero sandboxes of the dead owner, SIGTERM removes the run's sandboxes.

Only sandboxes owned by the subprocesses these tests start are looked at: other processes'
containers on the shared engine are never judged.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proctor.sandbox.ownership import LABEL, is_stale, labels, pid_start_ticks

REPO_ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ pure rules


def test_labels_name_the_owner_and_an_expiry():
    lbl = labels("run1", ttl_s=60)
    assert lbl[f"{LABEL}.owner_pid"] == str(os.getpid())
    assert lbl[f"{LABEL}.owner_start"] == pid_start_ticks(os.getpid())
    assert lbl[f"{LABEL}.owner_host"] == socket.gethostname()
    assert 55 <= int(lbl[f"{LABEL}.expires"]) - time.time() <= 61


def test_a_live_owner_before_expiry_is_never_stale():
    assert not is_stale(labels("r", 60))


def test_expired_is_stale_unless_only_dead_owners_are_asked_for():
    lbl = labels("r", 60)
    assert is_stale(lbl, now=time.time() + 120)
    assert not is_stale(lbl, now=time.time() + 120, expired=False)


def test_a_dead_or_reused_owner_pid_is_stale():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    lbl = {**labels("r", 60), f"{LABEL}.owner_pid": str(child.pid),
           f"{LABEL}.owner_start": "1"}
    assert is_stale(lbl, expired=False)
    reused = {**labels("r", 60), f"{LABEL}.owner_start": "1"}  # our pid, another start time
    assert is_stale(reused, expired=False)


def test_another_hosts_owner_is_never_judged_by_pid():
    lbl = {**labels("r", 60), f"{LABEL}.owner_host": "elsewhere", f"{LABEL}.owner_pid": "1",
           f"{LABEL}.owner_start": "1"}
    assert not is_stale(lbl, expired=False)


def test_a_host_dir_is_owned_tracked_and_gone_on_every_way_out(tmp_path, monkeypatch):
    import json
    import tempfile

    from proctor.sandbox import cleanup, ownership

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ownership.host_dir("repo") as d:
        assert d.parent == tmp_path and d.name.startswith("proctor-host-repo-")
        assert json.loads((d / ".owner").read_text())[f"{LABEL}.owner_pid"] == str(os.getpid())
        assert ownership.live_host_dirs() == [str(d)]
        cleanup.close_all()  # what SIGINT / SIGTERM run
        assert not d.exists()
    assert ownership.live_host_dirs() == []
    with pytest.raises(RuntimeError), ownership.host_dir("integrity") as d:
        raise RuntimeError("boom")
    assert not d.exists()


def test_the_host_dir_of_a_killed_owner_is_swept_and_a_live_ones_kept(tmp_path, monkeypatch):
    import json
    import tempfile

    from proctor.sandbox import bwrap_backend, cleanup

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(bwrap_backend, "remove_stale_dirs", lambda expired: [])
    dead, live = tmp_path / "proctor-host-repo-dead", tmp_path / "proctor-host-repo-live"
    for d, pid in ((dead, 999_999_999), (live, os.getpid())):
        (d / "repo").mkdir(parents=True)
        lbl = labels("host-repo", 3600)
        lbl.update({f"{LABEL}.owner_pid": str(pid), f"{LABEL}.owner_start": ""})
        (d / ".owner").write_text(json.dumps(lbl))

    class NoEngine:
        class containers:  # noqa: N801 - the docker client's attribute name
            @staticmethod
            def list(**kw):
                return []

    report = cleanup.remove_stale(expired=False, client=NoEngine())
    assert report.dirs == [str(dead)] and not dead.exists() and live.exists()


def test_a_container_removed_while_listed_does_not_stop_the_sweep(monkeypatch):
    # docker-py's list() inspects each container it found; one another process removed
    # meanwhile raised NotFound, which ended the whole sweep with nothing removed.
    import docker

    from proctor.sandbox import bwrap_backend, cleanup

    removed = []

    class Stale:
        id = "c-stale"
        labels = {LABEL: "1", f"{LABEL}.expires": "1"}

        def remove(self, force, v):
            removed.append(self.id)

    class Containers:
        def list(self, all=False, filters=None, ignore_removed=False):
            if not ignore_removed:
                raise docker.errors.NotFound("No such container: c-gone")
            return [Stale()]

    class Client:
        containers = Containers()

    monkeypatch.setattr(bwrap_backend, "remove_stale_dirs", lambda expired: [])
    report = cleanup.remove_stale(client=Client())
    assert report.containers == ["c-stale"] and removed == ["c-stale"]


# ------------------------------------------------------------------ end to end


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _proctor(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "proctor", *args], cwd=REPO_ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _docker_owned_by(client, pid: int) -> list[str]:
    # A container removed between the list and its inspection (the run closes its
    # sandboxes as it goes) is gone, not an error.
    found = client.containers.list(all=True, filters={"label": f"{LABEL}.owner_pid={pid}"},
                                   ignore_removed=True)
    return [c.id for c in found]


def _local_owned_by(pid: int) -> list[str]:
    from proctor.sandbox.bwrap_backend import sandbox_base

    out = []
    for d in sandbox_base().glob("proctor-bwrap-*"):
        owner = (d / ".owner").read_text() if (d / ".owner").exists() else ""
        if f'"{LABEL}.owner_pid": "{pid}"' in owner:
            out.append(str(d))
    return out


def _wait_for(check, timeout: float = 60.0) -> list[str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    return []


BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]


# serial: any other Proctor process starting meanwhile would sweep the dead owner's sandbox
# before the test sees it left behind (local sandboxes are in the session's own dir).
@pytest.mark.parametrize("backend", [
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.serial]),
    pytest.param("local", marks=pytest.mark.local)])
def test_kill_9_mid_run_then_restart_leaves_zero_sandboxes_of_the_dead_owner(
        backend, toolz_task, toolz_build, docker_engine):
    owned = ((lambda pid: _docker_owned_by(docker_engine, pid)) if backend == "docker"
             else _local_owned_by)
    patch = toolz_build / "patches" / "reference.patch"
    harness = _proctor("score", str(toolz_task), str(patch), "--sandbox", backend)
    try:
        assert _wait_for(lambda: owned(harness.pid)), "the run never opened a sandbox"
    finally:
        harness.kill()  # SIGKILL: no handler, no finally, nothing of ours runs
        harness.wait()
    time.sleep(0.5)
    assert owned(harness.pid), "expected the killed run to leave its sandbox behind"
    again = _proctor("score", str(toolz_task), str(toolz_build / "patches" / "empty.patch"),
                     "--sandbox", backend)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out.decode(errors="replace")[-2000:]
    assert owned(harness.pid) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_removes_the_runs_sandboxes_before_exit(backend, toolz_task, toolz_build,
                                                        docker_engine):
    owned = ((lambda pid: _docker_owned_by(docker_engine, pid)) if backend == "docker"
             else _local_owned_by)
    patch = toolz_build / "patches" / "reference.patch"
    harness = _proctor("score", str(toolz_task), str(patch), "--sandbox", backend)
    try:
        assert _wait_for(lambda: owned(harness.pid)), "the run never opened a sandbox"
        harness.send_signal(signal.SIGTERM)
        harness.wait(timeout=60)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    assert harness.returncode != 0
    assert owned(harness.pid) == []


@pytest.mark.docker
def test_cleanup_command_spares_live_owners(docker_ready, docker_engine):
    from proctor.sandbox import DockerSandbox

    with DockerSandbox(docker_ready, ttl_s=600) as sb:
        res = subprocess.run([sys.executable, "-m", "proctor", "cleanup"], cwd=REPO_ROOT,
                             env=_env(), capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert sb.leftovers() == [sb.container_id]


# Three threads (the main one included) open and close local sandboxes without pause while
# SIGTERM arrives: whichever step each is at (its directory being made, its tmpfs areas being
# mounted, its close), nothing of it may outlive the process.
CHURN = """
import os, signal, sys, threading
from proctor.sandbox import cleanup
from proctor.sandbox.bwrap_backend import LocalSandbox

cleanup.install_signal_handlers()

def churn():
    while True:
        try:
            with LocalSandbox(sys.argv[1]):
                pass
        except Exception:
            pass  # refused once the process is ending

for _ in range(2):
    threading.Thread(target=churn, daemon=True).start()
threading.Timer(float(sys.argv[2]), lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
churn()
"""


@pytest.mark.local
@pytest.mark.parametrize("delay_s", [0.7, 1.1, 1.6])
def test_sigterm_while_threads_open_local_sandboxes_leaves_no_dir_or_mount(delay_s, tmp_path,
                                                                           local_ready):
    base = tmp_path / "sandboxes"
    base.mkdir()
    res = subprocess.run([sys.executable, "-c", CHURN, local_ready, str(delay_s)],
                         env={**_env(), "PROCTOR_SANDBOX_DIR": str(base)},
                         capture_output=True, text=True, timeout=120)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(str(base))]
    for point in sorted(mounts, reverse=True):  # never leave a mount to later tests
        subprocess.run(["umount", "-l", point], capture_output=True)
    assert res.returncode == -signal.SIGTERM, res.stderr[-2000:]
    assert sorted(p.name for p in base.iterdir()) == []
    assert mounts == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_mount_that_lands_during_the_removal_is_unmounted_and_the_dir_removed(tmp_path,
                                                                               monkeypatch):
    # a signal handler removes a local sandbox's dir while the thread it interrupted has a
    # `mount` of one of its tmpfs areas in flight: the mount lands after the first pass
    import shutil

    from proctor.sandbox import bwrap_backend

    root = tmp_path / "proctor-bwrap-x"
    (root / "work").mkdir(parents=True)
    real, passes = shutil.rmtree, []

    def rmtree(path, ignore_errors=False):
        if not passes:
            subprocess.run(["mount", "-t", "tmpfs", "proctor", str(root / "work")], check=True)
        passes.append(path)
        real(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(bwrap_backend.shutil, "rmtree", rmtree)
    try:
        bwrap_backend.remove_dir(root)
        mounted = bwrap_backend._mounts_under(root)
    finally:
        subprocess.run(["umount", "-l", str(root / "work")], capture_output=True)
    assert not root.exists() and mounted == [] and len(passes) == 2


def test_a_failing_cleanup_still_ends_the_process_on_sigterm(tmp_path):
    # an error while removing the sandboxes must not swallow the signal (the process would
    # go on with every new sandbox refused)
    script = (
        "import os, signal, time\n"
        "from proctor.sandbox import cleanup\n"
        "def broken(**kw):\n"
        "    raise OSError('cleanup failed')\n"
        "cleanup.close_all = broken\n"
        "cleanup.install_signal_handlers()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "except Exception:\n"
        "    pass\n"
        "print('still running')\n")
    res = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == -signal.SIGTERM and "still running" not in res.stdout


def test_after_stop_new_no_directory_or_sandbox_is_opened(tmp_path, monkeypatch):
    from proctor.sandbox import ownership

    monkeypatch.setattr(ownership, "_STOPPED", True)
    with pytest.raises(ownership.ShuttingDown):
        ownership.claim_dir("proctor-x-", tmp_path)
    with pytest.raises(ownership.ShuttingDown):
        ownership.track(object.__new__(type("DockerSandbox", (), {})))
    assert list(tmp_path.iterdir()) == []
    assert ownership.live_host_dirs() == []
