"""Batch throughput and scaling on the toolz example (issue 6).

    python bench/batch.py            # 200 rollouts with 1 worker, then with 2
    python bench/batch.py --n 12     # quick check

Rollouts cycle through the example's candidate patches (reference, partial,
comment_mentions_hidden, violation_hidden_tests), each made unique by a distinct comment
line at the top of ``getter``'s body (comment lines are free of diff cost and change no
test), so the result cache never hits: every rollout is really scored. Each worker count gets
its own set of variants. The task's baseline is computed (or loaded) before timing.

The scaling ratio compares the two worker counts in one configuration: ``--overlap off``
(default), each rollout's steps one after the other, so parallelism comes from the workers
alone and the ratio measures how they scale (on 2 cores, an overlapped rollout already
keeps both busy, so the ratio would compare two different things). ``--overlap auto`` is
what ``score_batch`` does by default (overlap while workers < cores); the last run, 1
worker with auto (``--auto-n``, 0 to skip), shows what a single worker gets with it.

Prints per run: rollouts/min, mean seconds per fully measured rollout, and its overhead over
a bare pytest run of the same tests in a warm container (bench/overhead.py's measure); then
the scaling ratio (2-worker over 1-worker throughput; target >= 1.7) and whether the
per-rollout overhead (1 worker) stays within the first issue's bound (1.5 s).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from overhead import TARGET_S, bare_runs

from proctor import load_task, score_batch
from proctor.harness.batch import prepare_task

CANDIDATES = ["reference", "partial", "comment_mentions_hidden", "violation_hidden_tests"]
#: Records whose reward differs from the usual one of their candidate (JSONL, appended).
ANOMALIES = ROOT / "bench" / "out" / "batch-anomalies.jsonl"
SCALING_TARGET = 1.7


def load_make_task():
    spec = importlib.util.spec_from_file_location("toolz_make_task",
                                                  ROOT / "examples/toolz/make_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Per invocation, so variants never repeat across runs either (the result cache persists).
RUN_TOKEN = uuid.uuid4().hex[:12]


def variant(mk, task_dir: Path, name: str, i: int) -> str:
    """The candidate ``name`` with ``# bench variant <run>-i`` as the first line of getter."""
    head = "def getter(index):\n"
    edits = {}
    for path, (old, new) in mk.PATCHES[name].items():
        if path == mk.BUGGY_FILE:
            assert new.startswith(head)
            new = new.replace(head, f"{head}    # bench variant {RUN_TOKEN}-{i}\n", 1)
        edits[path] = (old, new)
    return mk.make_patch(task_dir / "repo", edits).decode()


def rollouts(mk, task_dir: Path, n: int, offset: int) -> list[dict]:
    out = []
    for k in range(n):
        name = CANDIDATES[k % len(CANDIDATES)]
        out.append({"task": str(task_dir), "patch": variant(mk, task_dir, name, offset + k),
                    "rollout_id": f"{name}-{offset + k}", "group_id": f"g{k // 8}",
                    "sample_index": k % 8, "metadata": {"candidate": name}})
    return out


def run(batch: list[dict], workers: int, overlap: bool | None = None,
        warm: int | None = None) -> dict:
    start = time.monotonic()
    records = score_batch(batch, workers=workers, overlap=overlap, warm=warm)
    wall = time.monotonic() - start
    measured = [r.timing["total_s"] for r in records
                if r.status == "scored" and r.reason is None and not r.timing.get("cache_hit")]
    rewards, by_reward = {}, {}
    for r in records:
        key = round(r.reward, 6) if r.reward is not None else None
        rewards.setdefault(r.metadata["candidate"], set()).add(key)
        by_reward.setdefault((r.metadata["candidate"], key), []).append(r)
    odd = [r for (cand, _), rs in by_reward.items() for r in rs
           if len(rewards[cand]) > 1 and len(rs) < max(
               len(v) for (c, _), v in by_reward.items() if c == cand)]
    if odd:  # a reward that differs from its candidate's usual one: keep the evidence
        ANOMALIES.parent.mkdir(parents=True, exist_ok=True)
        with ANOMALIES.open("a", encoding="utf-8") as fh:
            fh.writelines(r.to_json() + "\n" for r in odd)
        print(f"  {len(odd)} record(s) with an unusual reward for their candidate appended "
              f"to {ANOMALIES}")
    return {"workers": workers, "n": len(records), "wall": wall,
            "rpm": len(records) / wall * 60,
            "errors": Counter(r.error.kind for r in records if r.status == "error"),
            "cache_hits": sum(bool(r.timing.get("cache_hit")) for r in records),
            "measured_mean": statistics.mean(measured) if measured else float("nan"),
            "rewards": rewards}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="rollouts per worker count")
    ap.add_argument("--bare-repeats", type=int, default=3)
    ap.add_argument("--overlap", choices=["auto", "on", "off"], default="off",
                    help="each rollout's two sandboxes side by side, in both measured runs "
                         "(auto: while workers < cores, score_batch's default)")
    ap.add_argument("--warm", type=int, default=None,
                    help="warm sandboxes kept waiting (default: score_batch's, two per worker; "
                         "0: none)")
    ap.add_argument("--auto-n", type=int, default=60,
                    help="rollouts of the reference run: 1 worker, overlap auto (0: skip)")
    args = ap.parse_args()
    overlap = {"auto": None, "on": True, "off": False}[args.overlap]
    task_dir = Path(subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                                   check=True, capture_output=True, text=True
                                   ).stdout.split("\n")[-2])
    mk = load_make_task()
    prepared = prepare_task(task_dir)  # baseline computed or loaded before timing
    bare = statistics.median(bare_runs(load_task(task_dir), prepared.image,
                                       args.bare_repeats))
    print(f"task {prepared.task.id}, image {prepared.image}, {args.n} rollouts per run, "
          f"candidates {', '.join(CANDIDATES)} (all distinct)")
    print(f"bare pytest (public + hidden, warm container): median {bare:.3f} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          "(figures are only meaningful on a quiet machine)")
    results = []
    runs = [(1, args.n, 0, overlap, args.overlap), (2, args.n, args.n, overlap, args.overlap)]
    if args.auto_n:
        runs.append((1, args.auto_n, 2 * args.n, None, "auto"))
    for workers, n, offset, mode, mode_name in runs:
        res = run(rollouts(mk, task_dir, n, offset), workers, mode, args.warm)
        results.append(res)
        print(f"workers {workers} (overlap {mode_name}): {res['n']} rollouts in "
              f"{res['wall']:.1f} s = "
              f"{res['rpm']:.1f} rollouts/min; fully measured rollout mean "
              f"{res['measured_mean']:.2f} s (overhead {res['measured_mean'] - bare:+.2f} s "
              f"over bare); cache hits {res['cache_hits']}; errors {dict(res['errors']) or 0}")
        print("  rewards by candidate: " + "; ".join(
            f"{k} {sorted(v, key=lambda x: (x is None, x))}" for k, v in res["rewards"].items()))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    one, two = results[:2]
    ratio = two["rpm"] / one["rpm"]
    overhead = one["measured_mean"] - bare
    print(f"scaling 2 vs 1 workers: {ratio:.2f}x (target >= {SCALING_TARGET}: "
          f"{'met' if ratio >= SCALING_TARGET else 'NOT met'})")
    print(f"per-rollout overhead (1 worker, overlap {args.overlap}): {overhead:+.2f} s "
          f"(bound {TARGET_S} s: {'met' if overhead <= TARGET_S else 'NOT met'})")
    if len(results) > 2:
        print(f"1 worker with overlap auto: {results[2]['rpm']:.1f} rollouts/min "
              f"({results[2]['rpm'] / one['rpm']:.2f}x the 1-worker run above; 2 workers "
              f"with auto overlap nothing on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
