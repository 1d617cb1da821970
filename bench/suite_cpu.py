"""Where the test suite's time goes: CPU per test file, against the machine's busy CPU.

    python bench/suite_cpu.py [--top 25] [-- PYTEST_ARGS...]

Runs the main suite on two xdist workers (``-m "not serial"``, the tests marked ``waits``
among them, which ``scripts/test.sh`` runs in a process of their own; ``PYTEST_ARGS``
replace the selection, e.g. ``-- tests/test_slots.py``) with
``bench/suite_cpu_plugin.py`` loaded, while sampling the machine's busy CPU from
``/proc/stat``. Prints the run's wall time, the machine's busy CPU and its share of both
cores, the CPU the tests account for (their processes, reaped children and Docker
sandboxes) and what is left (the engine, the kernel's namespace work, processes nobody
reaped: a rollout's container start costs ~0.19 s of machine CPU, each ``docker exec``
~0.04 s), then the files and the tests that cost the most, and the tests that wait (the
``waits`` marker's candidates, and any marked test that no longer waits). Run it on a quiet
machine; the suite takes as long as in CI.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu import busy_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    selection = args.pytest_args or ["-m", "not serial"]
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as out:
        env = {**os.environ, "PROCTOR_SUITE_CPU_DIR": out}
        busy0, start = busy_s(), time.monotonic()
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                              "worksteal", "-p", "bench.suite_cpu_plugin", *selection],
                             cwd=ROOT, env=env)
        wall, busy = time.monotonic() - start, busy_s() - busy0
        rows = [json.loads(line) for f in Path(out).glob("*.jsonl")
                for line in f.read_text().splitlines()]
    cost = {r["id"]: r["self_s"] + r["children_s"] + r["containers_s"] for r in rows}
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        entry = files[r["id"].split("::")[0]]
        entry[0] += cost[r["id"]]
        entry[1] += r["wall_s"]
        entry[2] += 1
    attributed = sum(cost.values())
    cores = os.cpu_count() or 1
    print(f"\nwall {wall:.0f} s, machine busy CPU {busy:.0f} s ({busy / wall / cores:.0%} of "
          f"{cores} cores); the tests account for {attributed:.0f} s, "
          f"{busy - attributed:.0f} s ({(busy - attributed) / busy:.0%}) is left unattributed")
    print(f"\n{'CPU s':>7} {'wall s':>7} {'tests':>5}  file (wall: the sum over its tests)")
    for name, (cpu, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{cpu:7.1f} {w:7.1f} {n:5d}  {name}")
    print(f"\n{'CPU s':>7} {'wall s':>7}  test")
    for r in sorted(rows, key=lambda r: -cost[r["id"]])[:args.top]:
        print(f"{cost[r['id']]:7.1f} {r['wall_s']:7.1f}  {r['id'][:140]}")
    _print_waiting(rows, cost)
    return rc


#: A test "waits" when it takes at least this long and its CPU is at most WAIT_SHARE of it.
WAIT_MIN_S = 5.0
WAIT_SHARE = 0.4


def _print_waiting(rows: list[dict], cost: dict[str, float]) -> None:
    """The tests whose wall time is mostly waiting (the ``waits`` marker's candidates) and
    the marked ones that no longer wait. Local-backend tests are left out: their
    sandboxes' CPU is only partly counted, so they look idle when they are not (judge
    them by their Docker twin). So is the CPU of a daemon or server a test starts (its
    parent is not the test's process): check such a test before marking it."""
    waiting = [r for r in rows if not r.get("local") and r["wall_s"] >= WAIT_MIN_S
               and cost[r["id"]] <= WAIT_SHARE * r["wall_s"]]
    print(f"\ntests that wait (>= {WAIT_MIN_S:g} s, CPU <= {WAIT_SHARE:.0%} of it; "
          "[waits]: marked, run beside the workers by scripts/test.sh)")
    for r in sorted(waiting, key=lambda r: -r["wall_s"]):
        mark = "[waits]" if r.get("waits") else "       "
        print(f"{cost[r['id']]:7.1f} {r['wall_s']:7.1f}  {mark} {r['id'][:130]}")
    busy = [r for r in rows if r.get("waits") and not r.get("local")
            and cost[r["id"]] > WAIT_SHARE * r["wall_s"]]
    for r in busy:
        print(f"marked waits but busy: {cost[r['id']]:.1f} s CPU in {r['wall_s']:.1f} s  "
              f"{r['id'][:120]}")


if __name__ == "__main__":
    sys.exit(main())
