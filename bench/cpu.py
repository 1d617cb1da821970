"""CPU and sandbox commands per rollout (issue 6: scaling is CPU bound).

    python bench/cpu.py [--n 5] [--patch reference] [--no-overlap] [--task DIR] [--kept-mutants]

Scores the example's candidate patch (or ``--task``'s ``reference.patch``) ``--n`` times,
one after the other (baseline cached first), and prints per rollout: wall time; the whole
machine's busy CPU from /proc/stat (meaningful only on a quiet machine: the load average is
printed); the part of it spent inside the containers (cgroup v1 ``cpuacct``, read before
each removal); dockerd + containerd; this process with its children; and the sandbox
operations by kind (commands, file copies and reads, signals, containers). With 2 cores, 2
workers can reach at most ``2 * wall(1 worker) / busy CPU`` times the 1-worker throughput.
``PROCTOR_BYTECODE=0`` in the environment measures the runs compiling the repository from
source (:mod:`proctor.suites.bytecode`). Each rollout's mutants are made anew, as a patch not
scored before has them; ``--kept-mutants`` lets the repeats take the host generator's kept
answer (:mod:`proctor.suites.mutant_generator`), as a patch scored again does.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import score
from proctor.sandbox import docker_backend as db
from proctor.suites import mutant_generator

HZ = os.sysconf("SC_CLK_TCK")
CGROUP = Path("/sys/fs/cgroup/cpuacct/docker")


def busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (all but idle and iowait)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(v) - v[3] - v[4]) / HZ


def daemons_s() -> float:
    total = 0.0
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if (p / "comm").read_text().strip() in ("dockerd", "containerd"):
                st = (p / "stat").read_text().rsplit(")", 1)[1].split()
                total += sum(int(x) for x in st[11:15]) / HZ
        except OSError:
            pass
    return total


class Counters:
    """Wraps the Docker sandbox to count its operations and its containers' CPU."""

    def __init__(self) -> None:
        self.ops: collections.Counter = collections.Counter()
        self.container_cpu = 0.0

    def install(self) -> None:
        cls = db.DockerSandbox
        for name, kind in (("run", "command"), ("put_archive", "file copy (tar)"),
                           ("get_file", "file read"), ("kill_user_processes", "kill (+ probe)")):
            self._wrap(cls, name, kind)
        put_dirs = cls.put_read_only_dirs

        def counted_put_dirs(sb, *a, **kw):  # a file copy, made with one command (run)
            self.ops["file copy (tar)"] += 1
            self.ops["command"] -= 1
            return put_dirs(sb, *a, **kw)

        cls.put_read_only_dirs = counted_put_dirs
        create, close = cls._create, cls.close

        def counted_create(sb, *a, **kw):
            self.ops["container"] += 1
            return create(sb, *a, **kw)

        def measured_close(sb):
            if sb._container is not None:
                usage = CGROUP / sb._container.id / "cpuacct.usage"
                if usage.exists():
                    self.container_cpu += int(usage.read_text()) / 1e9
            return close(sb)

        cls._create, cls.close = counted_create, measured_close

    def _wrap(self, cls, name: str, kind: str) -> None:
        orig = getattr(cls, name)

        def counted(sb, *a, **kw):
            self.ops[kind] += 1
            return orig(sb, *a, **kw)

        setattr(cls, name, counted)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--patch", default="reference")
    ap.add_argument("--no-overlap", action="store_true")
    ap.add_argument("--task", type=Path, help="a task directory (its reference.patch)")
    ap.add_argument("--kept-mutants", action="store_true",
                    help="the repeats take the mutants kept from the first (a patch scored again)")
    args = ap.parse_args()
    if args.task:
        task, patch = args.task, (args.task / "reference.patch").read_bytes()
    else:
        task = Path(subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                                   check=True, capture_output=True,
                                   text=True).stdout.split("\n")[-2])
        patch = (task.parent / "patches" / f"{args.patch}.patch").read_bytes()
    rec = score(task, patch)  # baseline computed or loaded
    assert rec.status == "scored", rec.error
    counters = Counters()
    counters.install()
    load0 = os.getloadavg()[0]
    b0, d0, t0, w0 = busy_s(), daemons_s(), os.times(), time.monotonic()
    for i in range(args.n):
        if not args.kept_mutants:
            mutant_generator.forget_answers()
        rec = score(task, patch, rollout_id=f"cpu-{i}", overlap=not args.no_overlap)
    wall = (time.monotonic() - w0) / args.n
    t1, n = os.times(), args.n
    host = (t1.user - t0.user + t1.system - t0.system + t1.children_user - t0.children_user
            + t1.children_system - t0.children_system) / n
    print(f"{args.patch} x {n}, overlap {not args.no_overlap}, reward {rec.reward}; load "
          f"average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"wall per rollout {wall:.3f} s; busy CPU per rollout (whole machine) "
          f"{(busy_s() - b0) / n:.3f} s")
    print(f"  in containers {counters.container_cpu / n:.3f} s, dockerd + containerd "
          f"{(daemons_s() - d0) / n:.3f} s, this process {host:.3f} s")
    print("sandbox operations per rollout: " + ", ".join(
        f"{kind} {count / n:g}" for kind, count in sorted(counters.ops.items())))
    print("timing of the last: " + ", ".join(f"{k} {v}" for k, v in rec.timing.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
