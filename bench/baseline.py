"""What a task's baseline costs when no cache has it (a task's first score, ``proctor task
check``, a dataset import), against the bare test runs it contains.

    python bench/baseline.py [--task DIR] [--repeats 3]

On the toolz example (or ``--task`` directories), interleaved, median of ``--repeats``:

- **bare**: one run of the public and hidden tests in a warm container
  (``bench/peer.py``'s), times the runs the baseline makes (``runs`` per patch state, two
  states, and the traced run);
- **side by side**: ``task_baseline`` as scoring computes it (the reference patch's
  sandbox beside the base repo's, a second sandbox slot permitting);
- **in turn**: the same runs one state after the other (the baseline with no second slot).

Each baseline is computed afresh (``refresh``); the machine's busy CPU (``/proc/stat``) is
printed with the wall time. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu import busy_s
from bench.peer import _repo_tar, bare_s
from proctor import load_task, score
from proctor.harness.pipeline import slots, task_baseline
from proctor.harness.pipeline.suites_in_sandbox import baseline_runner, task_bytecode
from proctor.sandbox import Limits
from proctor.suites import load_or_compute_baseline


def measure(task_dir: Path, repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall s, busy CPU s) of each way for ``task_dir``."""
    task = load_task(task_dir)
    patch = task.reference_patch.read_bytes()
    rec = score(task, patch)  # names the image, builds the bytecode tree
    if rec.status != "scored" or not rec.env.image:
        raise RuntimeError(f"{task.id}: {rec.status}: {rec.error}")
    tag, image_id = rec.env.image, rec.env.image_digest
    limits = Limits()
    mounts = task_bytecode(task, tag, image_id, limits, "docker")
    stdin = _repo_tar(task, patch)
    runs = 2 * task.config.baseline.runs + 1

    def side_by_side() -> None:
        with slots.acquire():  # as a score's preparation holds one
            task_baseline(task, tag, image_id, limits, "docker", refresh=True, mounts=mounts)

    def in_turn() -> None:
        run_suites, record_reach = baseline_runner(task, tag, limits, "docker", mounts)
        with slots.acquire():
            load_or_compute_baseline(task, image_id, run_suites, True, record_reach)

    ways = {"bare": lambda: bare_s(task, tag, stdin) * runs, "side by side": side_by_side,
            "in turn": in_turn}
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    for fn in ways.values():
        fn()  # warm-up
    for _ in range(repeats):
        for k, fn in ways.items():
            b0, t0 = busy_s(), time.monotonic()
            got = fn()
            wall = got if k == "bare" else time.monotonic() - t0
            out[k].append((wall, busy_s() - b0))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", type=Path, action="append", help="a task directory (repeatable)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tasks = args.task or [Path(subprocess.run(
        [sys.executable, str(ROOT / "examples/toolz/make_task.py")], capture_output=True,
        text=True, check=True).stdout.strip().splitlines()[-1])]
    print("| task | bare runs | side by side | in turn | side by side / bare | "
          "in turn / side by side | busy CPU side by side / in turn |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for task_dir in tasks:
        m = measure(task_dir, args.repeats)
        (bare, _), (sbs, sbs_cpu), (turn, turn_cpu) = m["bare"], m["side by side"], \
            m["in turn"]
        print(f"| {load_task(task_dir).id} | {bare:.2f} s | {sbs:.2f} s | {turn:.2f} s | "
              f"{sbs / bare:.2f}x | {turn / sbs:.2f}x | {sbs_cpu:.1f} / {turn_cpu:.1f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
