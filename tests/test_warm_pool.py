"""Warm sandboxes (:mod:`proctor.sandbox.warm_pool`): made ahead, handed out once, bounded,
expired, paused after a failure, drained. The pool's logic with a recording opener (fast);
real sandboxes from a pool score exactly as fresh ones in ``tests/test_batch_e2e.py``."""

from __future__ import annotations

import threading
import time

import pytest

from proctor.sandbox import (
    Limits,
    WarmConfigError,
    WarmKey,
    configure_warm,
    drain_warm,
    take_warm,
    warm_counts,
    warm_pool_size,
    warm_sandboxes,
    warm_waiting,
)
from proctor.sandbox import warm_pool as wp

KEY = WarmKey.of("docker", "proctor-sandbox:test", Limits(), 600.0, {"/h": "/host/h"})


class FakeSandbox:
    def __init__(self, args: tuple) -> None:
        self.args = args
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Opener:
    """Records what it made; ``fail`` makes it raise; ``gate`` holds it until set."""

    def __init__(self, fail: bool = False) -> None:
        self.made: list[FakeSandbox] = []
        self.calls = 0
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()

    def __call__(self, *args) -> FakeSandbox:
        self.gate.wait(10)
        with self.lock:
            self.calls += 1
            if self.fail:
                raise RuntimeError("engine refused")
            sb = FakeSandbox(args)
            self.made.append(sb)
            return sb


def _until(cond, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "the pool did not get there in time"
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _no_pools(monkeypatch):
    monkeypatch.delenv(wp.ENV, raising=False)
    monkeypatch.setattr(wp, "_size", None)
    monkeypatch.setattr(wp, "_holds", [])
    monkeypatch.setattr(wp, "_pools", {})
    yield
    drain_warm()


def test_a_pool_fills_in_the_background_and_hands_each_sandbox_out_once():
    opener = Opener()
    pool = wp.WarmPool(KEY, 2, opener)
    assert pool.take() is None  # nothing ready: the rollout makes its own, at once
    _until(lambda: pool.waiting() == 2)
    backend, env, limits, run_id, ttl_s, mounts = opener.made[0].args
    assert (backend, env, limits, mounts) == ("docker", "proctor-sandbox:test", Limits(),
                                              {"/h": wp.Path("/host/h")})
    assert run_id.startswith("warm-") and ttl_s == 600.0 + wp.MAX_IDLE_S
    got = [pool.take() for _ in range(6)]
    _until(lambda: pool.waiting() == 2)
    handed = [g for g in got if g is not None]
    assert len({id(g) for g in handed}) == len(handed) >= 2  # never the same one twice
    assert len(opener.made) == len(handed) + 2  # bounded: the rest wait, no more
    assert pool.counts["taken"] == len(handed) and pool.counts["missed"] == 7 - len(handed)
    assert not any(g.closed for g in handed)  # the taker closes it


def test_a_sandbox_that_waited_too_long_is_closed_not_handed_out(monkeypatch):
    opener = Opener()
    pool = wp.WarmPool(KEY, 1, opener)
    pool.fill()
    _until(lambda: pool.waiting() == 1)
    [old] = opener.made
    monkeypatch.setattr(wp, "MAX_IDLE_S", 0.0)
    assert pool.take() is None
    assert old.closed and pool.counts["expired"] == 1


def test_a_failure_pauses_the_pool_instead_of_retrying_at_once():
    opener = Opener(fail=True)
    pool = wp.WarmPool(KEY, 2, opener)
    assert pool.take() is None
    _until(lambda: pool.counts["failed"] == 2)
    for _ in range(5):
        assert pool.take() is None
    time.sleep(0.1)
    assert opener.calls == 2  # paused for FAIL_PAUSE_S


def test_closing_a_pool_closes_what_waits_and_what_is_being_made():
    opener = Opener()
    pool = wp.WarmPool(KEY, 2, opener)
    pool.fill()
    _until(lambda: pool.waiting() == 2)
    opener.gate.clear()
    taken = pool.take()
    assert taken is not None  # one more is being made, held at the gate
    threading.Timer(0.2, opener.gate.set).start()
    assert pool.close() == 1  # returns once the one being made is made, and closed
    assert len(opener.made) == 3 and opener.made[2].closed
    assert [s.closed for s in opener.made if s is not taken] == [True, True]
    pool.fill()
    assert pool.take() is None and opener.calls == 3  # closed: makes no more


def test_a_batchs_block_keeps_sandboxes_waiting_and_closes_them_at_its_end():
    opener = Opener()
    assert take_warm(KEY, opener) is None and opener.calls == 0  # off by default
    with warm_sandboxes(2):
        with warm_sandboxes(1):
            assert warm_pool_size() == 2
        assert take_warm(KEY, opener) is None
        _until(lambda: warm_waiting() == 2)
        assert take_warm(KEY, opener) is not None
        _until(lambda: warm_waiting() == 2)
    assert warm_pool_size() == 0 and warm_waiting() == 0
    _until(lambda: sum(s.closed for s in opener.made) == 2)  # the two that still waited


def test_the_process_wide_size_outlives_a_batch_block(monkeypatch):
    opener = Opener()
    configure_warm(1)
    with warm_sandboxes(3):
        assert warm_pool_size() == 3
    assert warm_pool_size() == 1
    take_warm(KEY, opener)
    _until(lambda: warm_waiting() == 1)
    configure_warm(0)
    assert warm_waiting() == 0 and opener.made[0].closed


def test_a_kind_no_rollout_asks_for_any_more_expires_on_another_kinds_take(monkeypatch):
    opener = Opener()
    configure_warm(1)
    take_warm(KEY, opener)
    _until(lambda: warm_waiting() == 1)
    monkeypatch.setattr(wp, "MAX_IDLE_S", 0.0)
    other = WarmKey.of("local", "venv", Limits(), 600.0, None)
    take_warm(other, opener)
    assert opener.made[0].closed


@pytest.mark.parametrize("value", ["-1", "two", "1.5"])
def test_a_bad_size_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv(wp.ENV, value)
    with pytest.raises(WarmConfigError, match=r"PROCTOR_WARM_SANDBOXES must be a whole number"):
        warm_pool_size()
    with pytest.raises(WarmConfigError, match="whole number >= 0"):
        configure_warm(value)


def test_a_batch_makes_sandboxes_ahead_only_where_the_cores_have_room(monkeypatch):
    from proctor.harness.batch import BatchOptions

    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert BatchOptions(workers=2).n_warm(100) == 4  # two a worker
    assert BatchOptions(workers=2).n_warm(3) == 2  # one rollout after the first two
    assert BatchOptions(workers=2).n_warm(2) == 0  # no rollout left to use one
    assert BatchOptions(workers=4).n_warm(100) == 0  # a worker per core: none
    assert BatchOptions(workers=4, warm=3).n_warm(100) == 3
    assert BatchOptions(workers=1, warm=0).n_warm(100) == 0


# --------------------------------------------------------------------------- real sandboxes

#: What a record says about the patch (everything but ids, timings and the environment).
SAME = ("status", "reward", "reason", "components", "component_notes", "weights", "penalties",
        "diff_cost", "progress", "integrity", "flags", "tests", "apply_strategy", "verdict",
        "error")


@pytest.mark.docker
def test_warm_sandboxes_score_exactly_as_fresh_ones_and_a_batch_leaves_none(toolz_task,
                                                                           toolz_patches):
    from proctor import score

    names = ["reference", "partial", "comment_mentions_hidden", "empty"]
    fresh = {n: score(toolz_task, toolz_patches[n], rollout_id=n) for n in names}
    assert warm_waiting() == 0  # off outside a batch
    with warm_sandboxes(2):
        score(toolz_task, toolz_patches["reference"], rollout_id="first")  # misses, fills
        warm = {}
        for n in names:
            _until(lambda: warm_waiting() == 2, 120)
            warm[n] = score(toolz_task, toolz_patches[n], rollout_id=n)
        counts = warm_counts()
    assert counts["taken"] >= 2 * 3 and counts["failed"] == 0, counts
    assert warm_waiting() == 0  # closed at the block's end (the leak check sees none)
    for n in names:
        a, b = fresh[n], warm[n]
        assert {k: getattr(a, k) for k in SAME} == {k: getattr(b, k) for k in SAME}, n
        mutation_a, mutation_b = (r.evidence.get("mutation") for r in (a, b))
        if mutation_a is not None:
            assert mutation_a.details["verdicts"] == mutation_b.details["verdicts"], n
            assert mutation_a.details["survivors"] == mutation_b.details["survivors"], n
