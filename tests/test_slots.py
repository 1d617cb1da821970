"""The cap on concurrent sandboxes (:mod:`proctor.harness.pipeline.slots`): in-process and across
processes of one cache dir, timeouts, cancellation, bad configuration; and, with real
Docker, ``proctor.score`` from many threads never has more live sandboxes than the cap, and
the wait for a slot is not charged to the per-patch deadline."""

from __future__ import annotations

import contextvars
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proctor.harness.pipeline import cancel, slots
from proctor.sandbox import ownership


@pytest.fixture(autouse=True)
def fresh_slots(monkeypatch):
    """Each test starts from the environment's default and leaves it so."""
    monkeypatch.setattr(slots, "_max", None)
    slots.reset_peak()
    yield
    slots._max = None


def hold(n_threads: int, seconds: float) -> tuple[list[threading.Thread], dict]:
    live = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def work():
        with slots.acquire():
            with lock:
                live["now"] += 1
                live["peak"] = max(live["peak"], live["now"])
            time.sleep(seconds)
            with lock:
                live["now"] -= 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    return threads, live


def test_default_is_the_cpu_affinity_and_env_overrides(monkeypatch):
    monkeypatch.delenv(slots.ENV, raising=False)
    assert slots.stats() == {"in_use": 0, "waiting": 0, "peak": 0,
                             "max": len(os.sched_getaffinity(0))}
    monkeypatch.setenv(slots.ENV, " 3 ")
    slots._max = None
    assert slots.stats()["max"] == 3
    slots.configure(5)
    assert slots.stats()["max"] == 5


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_env_value_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv(slots.ENV, value)
    with pytest.raises(slots.SlotConfigError, match=rf"\$PROCTOR_MAX_SANDBOXES must be a "
                                                    rf"whole number >= 1.*{value!r}"):
        slots.stats()
    with pytest.raises(slots.SlotConfigError), slots.acquire():
        pass


@pytest.mark.parametrize("value", [0, -1, True, "x"])
def test_configure_rejects_bad_values(value):
    with pytest.raises(slots.SlotConfigError, match="max_sandboxes must be a whole number"):
        slots.configure(value)


def test_threads_never_exceed_the_cap():
    slots.configure(2)
    threads, live = hold(6, 0.3)
    time.sleep(0.1)
    assert slots.stats()["waiting"] == 4 and slots.stats()["in_use"] == 2
    for t in threads:
        t.join()
    assert live["peak"] == 2 and slots.stats() == {"in_use": 0, "waiting": 0, "peak": 2,
                                                   "max": 2}


def test_timeout_zero_takes_only_a_free_slot():
    slots.configure(1)
    with slots.acquire(timeout=0):
        t0 = time.monotonic()
        with pytest.raises(slots.SlotTimeout, match="no sandbox slot free within 0.2 s"), \
                slots.acquire(timeout=0.2):
            pass
        assert 0.15 < time.monotonic() - t0 < 2
        with pytest.raises(slots.SlotTimeout), slots.acquire(timeout=0):
            pass
    with slots.acquire(timeout=0):  # freed: free at once again
        assert slots.stats()["in_use"] == 1


def test_cancel_ends_the_wait():
    slots.configure(1)
    seen = []

    def waiter():
        try:
            with slots.acquire():
                seen.append("got")
        except cancel.Cancelled:
            seen.append("cancelled")

    with slots.acquire(), cancel.scope() as scope:
        t = threading.Thread(target=contextvars.copy_context().run, args=(waiter,))
        t.start()
        time.sleep(0.3)
        scope.cancel()
        t.join(5)
    assert seen == ["cancelled"] and slots.stats()["waiting"] == 0


def test_cap_is_shared_by_processes_of_one_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path))
    slots.configure(1)
    code = ("import sys, time\nfrom proctor.harness.pipeline import slots\nslots.configure(1)\n"
            "with slots.acquire():\n    print('held', flush=True)\n    sys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(slots.SlotTimeout), slots.acquire(timeout=0.5):
            pass
        proc.stdin.write("\n")
        proc.stdin.flush()
        with slots.acquire(timeout=10):  # freed by the other process
            pass
    finally:
        proc.kill()
        proc.wait()
    assert (tmp_path / "slots" / "slot-0.lock").exists()


# --------------------------------------------------------------------------- real scoring


def _our_live_containers(client) -> int:
    return len(client.api.containers(all=True, filters={"label": [
        "org.proctor", f"org.proctor.owner_pid={os.getpid()}"]}))


@pytest.mark.docker
def test_concurrent_scores_never_exceed_the_cap(docker_engine, toolz_task, toolz_patches):
    from proctor.harness.pipeline.score import score

    slots.configure(2)
    score(toolz_task, toolz_patches["reference"])  # the task's preparation, once
    ownership.reset_live_peak()
    slots.reset_peak()
    peak_docker, stop = [0], threading.Event()

    def watch():
        while not stop.is_set():
            peak_docker[0] = max(peak_docker[0], _our_live_containers(docker_engine))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    records = [None] * 4

    def one(i):
        records[i] = score(toolz_task, toolz_patches["reference"], rollout_id=f"c{i}",
                           overlap=True)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        watcher.join()
    assert [r.status for r in records] == ["scored"] * 4
    assert all(r.reward == pytest.approx(0.998) for r in records)
    assert ownership.live_sandboxes()[1] <= 2 and peak_docker[0] <= 2
    assert slots.stats()["peak"] == 2
    assert max(r.timing["slot_wait_s"] for r in records) > 0.5  # some of them queued


@pytest.mark.waits
@pytest.mark.docker
def test_slot_wait_is_not_charged_to_the_deadline(tmp_path, toolz_task, toolz_patches):
    from proctor.harness.pipeline.score import score

    task = tmp_path / "task"
    shutil.copytree(toolz_task, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("per_patch = 600", "per_patch = 12"))
    score(task, toolz_patches["reference"])  # the baseline of the copy, outside the test
    slots.configure(1)
    out = {}
    with slots.acquire():
        t = threading.Thread(target=lambda: out.update(rec=score(task,
                                                                 toolz_patches["reference"])))
        t.start()
        time.sleep(15)  # longer than the whole per-patch deadline
    t.join()
    rec = out["rec"]
    assert rec.status == "scored" and rec.reward == pytest.approx(0.998), rec.error
    assert rec.timing["slot_wait_s"] >= 14
    assert not any("per-patch deadline" in n for n in rec.component_notes.values())


def test_bad_env_value_in_score_is_an_error_record(monkeypatch, toolz_task, toolz_patches):
    from proctor.harness.pipeline.score import score

    monkeypatch.setenv(slots.ENV, "lots")
    rec = score(toolz_task, toolz_patches["reference"])
    assert rec.status == "error" and rec.reward is None
    assert rec.error.kind == "slot_config" and "PROCTOR_MAX_SANDBOXES" in rec.error.message
