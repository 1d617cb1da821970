"""Soak: many patches, two workers, honest candidates mixed with abuse cases.

    python bench/soak.py [--n 300] [--workers 2] [--sandbox docker|local] [--abuse-share 0.25]
                         [--seed 0] [--warm N] [--json OUT]

On the toolz example (built into a temp dir) with the small-limits task of
``bench/abuse_cases.py``: first scores every honest candidate once, alone (this also computes
the cached baseline); then scores ``--n`` patches drawn from the candidates and the abuse
cases with a ``concurrent.futures`` pool of ``--workers`` threads over ``proctor.score``.

Reports: wall time (s), rollouts per minute, peak live sandboxes of this process (Docker
containers or local sandbox dirs, sampled every 0.2 s; ``--warm`` sandboxes made ahead, two
per worker by default as in a batch, count too), how many sandboxes were found waiting,
leftover sandboxes and ``proctor-*`` temp dirs after the run (both must be 0), records
with ``status="error"``, and whether every honest patch got the same reward in the soak as
alone. Exit code 0 only when the leftovers are 0, no record is an error and every honest
reward matched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.abuse_cases import ABUSES, make_abuse_task
from bench.batch import load_make_task
from proctor import score
from proctor.sandbox import (
    choose_backend,
    cleanup,
    warm_counts,
    warm_sandboxes,
)
from proctor.sandbox.bwrap_backend import DIR_PREFIX, sandbox_base

LABEL = "org.proctor"


def live_sandboxes(backend: str, client) -> list[str]:
    """Sandboxes of this process that exist now (container ids or local dirs)."""
    if backend == "docker":
        found = client.containers.list(
            all=True, filters={"label": [LABEL, f"{LABEL}.owner_pid={os.getpid()}"]})
        return [c.id for c in found]
    mine = f'"{LABEL}.owner_pid": "{os.getpid()}"'
    out = []
    for d in sandbox_base().glob(DIR_PREFIX + "*"):
        try:
            if mine in (d / ".owner").read_text():
                out.append(str(d))
        except OSError:
            out.append(str(d))  # half made or half removed: still there
    return out


def temp_leftovers() -> list[str]:
    """``proctor-*`` entries of the temp dir and the local sandbox dir."""
    dirs = {Path(tempfile.gettempdir()), sandbox_base()}
    return sorted(str(p) for d in dirs if d.is_dir() for p in d.glob("proctor-*"))


class Sampler(threading.Thread):
    """Samples the live sandbox count every ``period`` seconds; ``peak`` is the maximum."""

    def __init__(self, backend: str, client, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.backend, self.client, self.period = backend, client, period
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, len(live_sandboxes(self.backend, self.client)))
            except Exception:  # noqa: BLE001 - a failed sample is not a result
                pass
            self.stop.wait(self.period)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="patches to score in the soak")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sandbox", choices=["docker", "local"], default=None)
    ap.add_argument("--abuse-share", type=float, default=0.25,
                    help="share of abuse cases among the n patches (0..1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warm", type=int, default=None,
                    help="warm sandboxes kept waiting during the soak (default: two per "
                         "worker, as a batch keeps them; 0: none)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)

    # A private temp dir (and local sandbox dir) for this run: the leftover count is then
    # exactly ours, whatever other processes on the machine create in /tmp meanwhile.
    private = Path(tempfile.mkdtemp(prefix="soak-tmp-", dir="/tmp"))
    private.chmod(0o755)
    (private / "sandboxes").mkdir(mode=0o755)
    os.environ["TMPDIR"] = tempfile.tempdir = str(private)
    os.environ["PROCTOR_SANDBOX_DIR"] = str(private / "sandboxes")
    cleanup.at_start()
    backend = choose_backend(args.sandbox)
    client = None
    if backend == "docker":
        from proctor.sandbox import docker_client

        client = docker_client()
    before_tmp = set(temp_leftovers())

    work = Path(tempfile.mkdtemp(prefix="soak-"))
    mk = load_make_task()
    mk.build(work / "example")
    task = make_abuse_task(work / "example" / "task", work / "abuse-task")
    honest = {p.stem: p.read_bytes() for p in sorted((work / "example/patches").glob("*.patch"))}
    abuse = {name: mk.make_patch(task / "repo", {"toolz/itertoolz.py": edit})
             for name, edit in ABUSES.items()}

    print(f"[soak] backend {backend}; scoring {len(honest)} honest candidates alone",
          file=sys.stderr)
    alone = {}
    for name, patch in honest.items():
        rec = score(task, patch, sandbox=backend, rollout_id=f"alone-{name}")
        alone[name] = rec.reward
        print(f"[soak]   {name}: {rec.reward} ({rec.status})", file=sys.stderr)

    rng = random.Random(args.seed)
    plan = [(("abuse", rng.choice(sorted(abuse))) if rng.random() < args.abuse_share
             else ("honest", rng.choice(sorted(honest)))) for _ in range(args.n)]

    def one(i: int, kind: str, name: str):
        patch = abuse[name] if kind == "abuse" else honest[name]
        rec = score(task, patch, sandbox=backend, rollout_id=f"soak-{i}-{name}")
        return kind, name, rec

    sampler = Sampler(backend, client)
    sampler.start()
    start = time.monotonic()
    warm = 2 * args.workers if args.warm is None else args.warm
    with warm_sandboxes(warm), ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(lambda a: one(*a), [(i, k, n) for i, (k, n) in
                                                     enumerate(plan)]))
        counts = warm_counts()
    wall = time.monotonic() - start
    sampler.stop.set()
    sampler.join()
    time.sleep(0.5)

    errors = [(k, n, f"{r.error.kind}: {r.error.message[:300]}" if r.error else "")
              for k, n, r in results
              if r.status == "error"]
    mismatches = [(n, r.reward, alone[n]) for k, n, r in results
                  if k == "honest" and r.reward != alone[n]]
    slowest = {}
    for _, n, r in results:
        slowest[n] = max(slowest.get(n, 0.0), r.timing.get("total_s", 0.0))
    left = live_sandboxes(backend, client)
    left_tmp = sorted(set(temp_leftovers()) - before_tmp)
    figures = {
        "backend": backend, "n": args.n, "workers": args.workers,
        "honest": sum(k == "honest" for k, _ in plan),
        "abuse": sum(k == "abuse" for k, _ in plan),
        "wall_s": round(wall, 1),
        "rollouts_per_min": round(args.n / wall * 60, 1),
        "peak_live_sandboxes": sampler.peak,
        "warm": warm, "warm_taken": counts["taken"], "warm_missed": counts["missed"],
        "warm_failed": counts["failed"],
        "leftover_sandboxes": len(left),
        "leftover_temp_dirs": len(left_tmp),
        "error_records": len(errors),
        "honest_rewards_match_alone": not mismatches,
        "mismatches": mismatches[:10],
        "errors": errors[:10],
        "slowest_total_s_by_patch": dict(sorted(slowest.items())),
    }
    figures["leftover_temp_dir_names"] = left_tmp[:10]
    shutil.rmtree(work, ignore_errors=True)
    if not left_tmp:
        shutil.rmtree(private, ignore_errors=True)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    ok = not left and not left_tmp and not errors and not mismatches
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
