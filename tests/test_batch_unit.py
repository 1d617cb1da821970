"""Batch orchestration without containers: JSONL parsing, cache keys, retry policy, the
per-rollout scorer with a fake scoring function, resume, summary, usage errors."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proctor.errors import EngineUnavailable, InfraError, TaskConfigError
from proctor.harness.batch import (
    BatchConfigError,
    BatchItem,
    BatchOptions,
    PreparedTask,
    ResultCache,
    RetryPolicy,
    Rollout,
    RolloutScorer,
    TaskPreparer,
    check_options,
    iter_batch,
    parse_jsonl,
    prepare_resume,
    result_key,
    summarize,
    with_retries,
)
from proctor.record import EnvInfo, ErrorInfo, RewardRecord
from proctor.task import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK_TOML = 'id = "tiny"\nsources = ["pkg"]\n[tests]\npublic = ["test_a.py"]\n'


@pytest.fixture
def tiny_task(tmp_path) -> Path:
    root = tmp_path / "tiny"
    (root / "repo" / "pkg").mkdir(parents=True)
    (root / "repo" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (root / "hidden").mkdir()
    (root / "hidden" / "test_h.py").write_text("def test_h():\n    assert True\n")
    (root / "task.toml").write_text(TASK_TOML)
    return root


def record(rollout_id="r", status="scored", reward=0.5, error=None, **kw) -> RewardRecord:
    return RewardRecord(task_id="tiny", rollout_id=rollout_id, status=status, reward=reward,
                        error=error, env=EnvInfo(proctor_version="t", patch_sha256=kw.pop(
                            "sha", None)), **kw)


def infra_error(rollout_id="r") -> RewardRecord:
    return record(rollout_id, "error", None, ErrorInfo(kind="infra", message="container died",
                                                        retryable=True))


class FakeScorer:
    """Stands in for proctor.score: reward = len(patch) / 100, counts calls per patch."""

    def __init__(self, delay: float = 0.0, fail_first: int = 0) -> None:
        self.calls: list[bytes] = []
        self.delay, self.fail_first = delay, fail_first
        self.lock = threading.Lock()

    def __call__(self, task, patch, *, rollout_id, group_id, sample_index, image, sandbox,
                 overlap=True):
        with self.lock:
            self.calls.append(patch)
            n = len(self.calls)
        if self.delay:
            time.sleep(random.uniform(0, self.delay))
        if n <= self.fail_first:
            return infra_error(rollout_id)
        return RewardRecord(task_id=task.id, rollout_id=rollout_id, group_id=group_id,
                            sample_index=sample_index, status="scored",
                            reward=len(patch) / 100,
                            env=EnvInfo(proctor_version="t", image=image),
                            timing={"total_s": 1.0})


def fake_preparer(calls: list | None = None) -> TaskPreparer:
    def prepare(path, *, image, sandbox):
        if calls is not None:
            calls.append(path)
            time.sleep(0.05)
        return PreparedTask(load_task(path), "img:tag", "sha256:img")

    return TaskPreparer(prepare)


def scorer_for(tmp_path, fake=None, **opts) -> tuple[RolloutScorer, FakeScorer]:
    fake = fake or FakeScorer()
    rs = RolloutScorer(BatchOptions(**opts), scorer=fake, preparer=fake_preparer(),
                       cache=ResultCache(tmp_path / "results"), sleep=lambda s: None)
    return rs, fake


# --------------------------------------------------------------------------- JSONL


def test_parse_jsonl_names_bad_lines_and_skips_blank_ones():
    lines = [
        json.dumps({"task": "t", "patch": "x", "rollout_id": 7, "group_id": 3,
                    "metadata": {"k": [1]}, "unknown_key": 1}),
        "",
        "{not json",
        "[1, 2]",
        json.dumps({"task": "t", "rollout_id": "r"}),
        json.dumps({"task": "t", "rollout_id": "r", "patch": "x", "patch_file": "f"}),
        json.dumps({"patch": "x", "rollout_id": "r"}),
    ]
    items = parse_jsonl(lines)
    assert [it.line for it in items] == [1, 3, 4, 5, 6, 7]
    assert items[0].rollout.rollout_id == "7" and items[0].rollout.group_id == "3"
    assert items[0].rollout.metadata == {"k": [1]}
    assert items[1].problem.startswith("not valid JSON")
    assert items[2].problem == "expected a JSON object, got list"
    assert "exactly one of 'patch'" in items[3].problem
    assert "exactly one of 'patch'" in items[4].problem
    assert items[5].problem.startswith("field 'task'")
    assert [it.index for it in items] == list(range(6))


def test_bad_input_record_names_the_line(tmp_path):
    rs, _ = scorer_for(tmp_path)
    rec = rs.score_item(parse_jsonl(["", "{oops"])[0])
    assert rec.status == "error" and rec.error.kind == "bad_input"
    assert rec.error.message.startswith("line 2: not valid JSON")
    assert rec.reward is None and rec.flags.exclude_from_advantage


def test_unreadable_patch_file_is_bad_input(tmp_path, tiny_task):
    rs, fake = scorer_for(tmp_path)
    item = BatchItem(0, Rollout(task=str(tiny_task), rollout_id="r",
                                patch_file=str(tmp_path / "missing.patch")), line=4)
    rec = rs.score_item(item)
    assert rec.error.kind == "bad_input" and "line 4: patch_file" in rec.error.message
    assert fake.calls == []


# --------------------------------------------------------------------------- cache keys


def test_result_key_changes_with_each_part():
    base = dict(patch_sha256="p", task_fingerprint="t", image_digest="i", version="v")
    key = result_key(**base)
    assert key == result_key(**base) and len(key) == 64
    for part in base:
        assert result_key(**{**base, part: "other"}) != key
    assert result_key(**base, sandbox="local") != key


# --------------------------------------------------------------------------- retry policy


def test_retry_recovers_from_transient_infra_errors():
    seq = [infra_error(), infra_error(), record()]
    sleeps = []
    rec = with_retries(lambda: seq.pop(0), RetryPolicy(retries=3, backoff_s=2),
                       sleeps.append)
    assert rec.status == "scored" and rec.timing["attempts"] == 3
    assert sleeps == [2, 4]


def test_retry_gives_up_as_blocked_after_three_retries():
    calls, sleeps = [], []
    rec = with_retries(lambda: calls.append(1) or infra_error(), RetryPolicy(retries=3),
                       sleeps.append)
    assert len(calls) == 4 and len(sleeps) == 3
    assert rec.status == "error" and rec.reward is None
    assert rec.error.kind == "blocked" and not rec.error.retryable
    assert "after 4 attempts" in rec.error.message and "container died" in rec.error.message


@pytest.mark.parametrize("final", [
    record(reward=0.0, reason="did_not_apply"),
    record(reward=-1.0, reason="integrity_violation"),
    record(status="error", reward=None, error=ErrorInfo(kind="task_config", message="bad")),
])
def test_honest_failures_and_config_errors_are_never_retried(final):
    calls = []
    rec = with_retries(lambda: calls.append(1) or final, RetryPolicy(), lambda s: None)
    assert len(calls) == 1 and rec is final and "attempts" not in rec.timing


def test_rollout_scorer_retries_infra_then_scores(tmp_path, tiny_task):
    rs, fake = scorer_for(tmp_path, FakeScorer(fail_first=2))
    rec = rs.score_rollout(Rollout(task=str(tiny_task), rollout_id="r", patch="abc"), b"abc")
    assert rec.status == "scored" and len(fake.calls) == 3


def test_prepare_infra_failure_is_retried_then_blocked(tmp_path, tiny_task):
    calls = []

    def prepare(path, **kw):
        calls.append(path)
        raise EngineUnavailable("no engine")

    rs = RolloutScorer(BatchOptions(), scorer=FakeScorer(), preparer=TaskPreparer(prepare),
                       cache=ResultCache(tmp_path), sleep=lambda s: None)
    rec = rs.score_rollout(Rollout(task=str(tiny_task), rollout_id="r", patch="x"), b"x")
    assert len(calls) == 4 and rec.error.kind == "blocked"
    assert "engine_unavailable: no engine" in rec.error.message


# --------------------------------------------------------------------------- preparation


def test_task_is_prepared_once_across_threads(tiny_task):
    calls = []
    preparer = fake_preparer(calls)
    threads = [threading.Thread(target=preparer.get, args=(str(tiny_task),)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1


def test_task_config_error_is_kept_infra_error_is_not(tiny_task):
    calls = []

    def prepare(path, **kw):
        calls.append(path)
        raise (TaskConfigError("no FAIL_TO_PASS") if "cfg" in path else InfraError("down"))

    preparer = TaskPreparer(prepare)
    for _ in range(2):
        with pytest.raises(TaskConfigError):
            preparer.get("cfg")
        with pytest.raises(InfraError):
            preparer.get("infra")
    assert calls.count("cfg") == 1 and calls.count("infra") == 2


# --------------------------------------------------------------------------- result cache


def test_identical_patches_are_scored_once_even_concurrently(tmp_path, tiny_task):
    rs, fake = scorer_for(tmp_path, FakeScorer(delay=0.05), workers=4)
    items = [BatchItem(i, Rollout(task=str(tiny_task), rollout_id=f"r{i}", group_id="g",
                                  sample_index=i, patch="same" if i % 2 else f"p{i}",
                                  metadata={"i": i}))
             for i in range(8)]
    out = dict(iter_batch(items, BatchOptions(workers=4), rollout_scorer=rs))
    assert sorted(fake.calls) == sorted([b"same", b"p0", b"p2", b"p4", b"p6"])
    hits = [out[i] for i in (1, 3, 5, 7) if out[i].timing.get("cache_hit")]
    assert len(hits) == 3
    for i, rec in out.items():
        assert rec.rollout_id == f"r{i}" and rec.sample_index == i and rec.metadata == {"i": i}
        assert rec.reward == len(b"same" if i % 2 else f"p{i}".encode()) / 100


def test_errors_are_not_cached(tmp_path, tiny_task):
    cache = ResultCache(tmp_path)
    cache.put("k", infra_error())
    assert cache.get("k") is None
    cache.put("k", record(reward=0.25))
    assert cache.get("k").reward == 0.25


def test_iter_batch_yields_every_index_once_and_bad_input_first(tmp_path, tiny_task):
    rs, _ = scorer_for(tmp_path, FakeScorer(delay=0.02))
    lines = [json.dumps({"task": str(tiny_task), "patch": f"p{i}", "rollout_id": f"r{i}"})
             for i in range(10)]
    lines.insert(3, "garbage")
    items = parse_jsonl(lines)
    got = list(iter_batch(items, BatchOptions(workers=3), rollout_scorer=rs))
    assert got[0][0] == 3 and got[0][1].error.message.startswith("line 4:")
    assert sorted(i for i, _ in got) == list(range(11))


# --------------------------------------------------------------------------- resume


def test_resume_keeps_final_records_and_drops_the_rest(tmp_path, tiny_task):
    import hashlib

    sha = lambda s: hashlib.sha256(s.encode()).hexdigest()  # noqa: E731
    items = parse_jsonl([json.dumps({"task": str(tiny_task), "patch": p, "rollout_id": r})
                         for r, p in (("a", "pa"), ("b", "pb"), ("c", "pc"), ("d", "pd"))])
    out = tmp_path / "out.jsonl"
    blocked = ErrorInfo(kind="blocked", message="x")
    lines = [
        record("a", sha=sha("pa")).to_json(),                       # kept, skipped
        record("b", sha=sha("changed")).to_json(),                       # patch changed
        record("c", "error", None, blocked, sha=sha("pc")).to_json(),    # infra: rerun
        record("zz", sha=sha("other")).to_json(),                        # not in the input
        '{"schema": "proctor.reward/1", "task_id": "t", "rollo',         # torn last line
    ]
    out.write_text("\n".join(lines))
    skip = prepare_resume(out, items)
    assert skip == {0}
    kept = [json.loads(line)["rollout_id"] for line in out.read_text().splitlines()]
    assert kept == ["a", "zz"]


# --------------------------------------------------------------------------- summary


def test_summary_counts_rates_and_slowest():
    recs = [record("a", reward=1.0, timing={"total_s": 3.0}),
            record("b", reward=-1.0, integrity={"violated": True}, timing={"total_s": 0.1}),
            record("c", reward=0.5, timing={"total_s": 0.01, "cache_hit": 1.0}),
            infra_error("d")]
    s = summarize(recs)
    assert (s.total, s.scored, s.errors, s.violations, s.cache_hits) == (4, 3, 1, 1, 1)
    assert s.tasks["tiny"].mean_reward == pytest.approx(0.5 / 3 * 1)
    assert s.error_rate == 0.25 and s.violation_rate == 0.25
    assert [rid for _, rid, _ in s.slowest] == ["a", "b", "d"]


# --------------------------------------------------------------------------- usage errors


def test_unknown_sandbox_and_unknown_executor_are_clear_errors():
    with pytest.raises(BatchConfigError, match="unknown sandbox backend 'lxc'; choose one of"):
        check_options(BatchOptions(sandbox="lxc"))
    check_options(BatchOptions(sandbox="local"))  # registered: fine
    with pytest.raises(BatchConfigError, match="unknown executor 'spark'"):
        check_options(BatchOptions(executor="spark"))


def test_cli_batch_usage_errors_exit_2(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "proctor", "batch", *a],  # noqa: E731
                                    cwd=ROOT, capture_output=True, text=True, timeout=120)
    res = run(str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert res.returncode == 2 and "cannot read" in res.stderr
    (tmp_path / "in.jsonl").write_text("")
    res = run(str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--sandbox", "lxc")
    assert res.returncode == 2 and "unknown sandbox backend 'lxc'" in res.stderr
    assert not (tmp_path / "o.jsonl").exists()
    # --report that would overwrite the input, or is a directory: refused before scoring.
    res = run(str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--report",
              str(tmp_path / "in.jsonl"))
    assert res.returncode == 2 and "would overwrite an input or the output" in res.stderr
    res = run(str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--report",
              str(tmp_path))
    assert res.returncode == 2 and "is a directory: name the HTML file" in res.stderr
    assert not (tmp_path / "o.jsonl").exists()


# --------------------------------------------------------------------------- public API


def test_score_batch_returns_input_order(monkeypatch, tmp_path, tiny_task):
    import proctor.harness.batch.rollout as rollout
    import proctor.harness.batch.run as batch

    fake = FakeScorer(delay=0.05)
    monkeypatch.setattr(rollout, "score", fake)
    monkeypatch.setattr(rollout, "prepare_task", lambda path, **kw: PreparedTask(
        load_task(path), "img", "sha256:img"))
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    rollouts = [{"task": str(tiny_task), "patch": "x" * i, "rollout_id": f"r{i}"}
                for i in range(1, 12)]
    rollouts.insert(5, {"task": str(tiny_task), "rollout_id": "incomplete"})
    got = batch.score_batch(rollouts, workers=3)
    assert [r.rollout_id for r in got] == [r["rollout_id"] for r in rollouts]
    assert got[5].error.kind == "bad_input" and got[5].error.message.startswith("rollout #5")
    assert [r.reward for r in got[:5]] == [0.01, 0.02, 0.03, 0.04, 0.05]


def test_ascore_runs_concurrently(monkeypatch):
    import asyncio

    import proctor.harness.batch.run as batch

    def slow_score(task, patch, **kw):
        time.sleep(0.3)
        return record(kw.get("rollout_id", "r"))

    monkeypatch.setattr(batch, "score", slow_score)

    async def main():
        return await asyncio.gather(*(batch.ascore("t", b"p", rollout_id=f"r{i}")
                                      for i in range(3)))

    start = time.monotonic()
    got = asyncio.run(main())
    assert [r.rollout_id for r in got] == ["r0", "r1", "r2"]
    assert time.monotonic() - start < 0.8


# --------------------------------------------------------------------------- baseline lock


def _fake_suites(calls):
    def run_suites(patch, runs):
        calls.append(patch)
        time.sleep(0.2)
        return {"public": [{"test_a.py::test_a": "failed"}] * runs,
                "hidden": [{"test_h.py::test_h": "passed"}] * runs}

    return run_suites


def _compute_in_child(task_dir: str, cache: str, out: str) -> None:
    import os

    os.environ["PROCTOR_CACHE_DIR"] = cache
    from proctor.suites import load_or_compute_baseline

    calls: list = []
    load_or_compute_baseline(load_task(task_dir), "sha256:img", _fake_suites(calls))
    Path(out).write_text(str(len(calls)))


def test_baseline_is_computed_once_across_threads(monkeypatch, tmp_path, tiny_task):
    from proctor.suites import load_or_compute_baseline

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    task, calls = load_task(tiny_task), []
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        load_or_compute_baseline(task, "sha256:img", _fake_suites(calls)))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [None] and len({r.key for r in results}) == 1
    assert results[0].suites["public"].fail_to_pass == ["test_a.py::test_a"]


def test_baseline_is_computed_once_across_processes(tmp_path, tiny_task):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_compute_in_child, args=(str(tiny_task), str(tmp_path / "c"),
                                                         str(tmp_path / f"n{i}")))
             for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    counts = sorted(int((tmp_path / f"n{i}").read_text()) for i in range(3))
    assert counts == [0, 0, 1]


def test_overlap_by_default_only_while_workers_leave_cores_idle(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert BatchOptions(workers=1).overlapped and BatchOptions(workers=3).overlapped
    assert not BatchOptions(workers=4).overlapped and not BatchOptions().overlapped
    assert not BatchOptions(workers=8).overlapped
    assert BatchOptions(workers=8, overlap=True).overlapped
    assert not BatchOptions(workers=1, overlap=False).overlapped


def test_default_scorer_passes_the_overlap_choice(monkeypatch):
    from proctor.harness.batch import rollout

    seen = []
    monkeypatch.setattr(rollout, "score", lambda *a, **kw: seen.append(kw["overlap"]))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    for overlap, want in ((None, True), (False, False), (True, True)):
        RolloutScorer(BatchOptions(workers=2, overlap=overlap)).scorer("task", b"patch")
        assert seen.pop() is want
