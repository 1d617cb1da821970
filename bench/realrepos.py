"""Proctor's scoring time against bare pytest on tasks built from real PyPI sdists.

    python3 bench/realrepos.py [--only NAME] [--repeats 2]

For each task of :mod:`bench.realrepo_tasks`: (a) bare ``python -m pytest`` of the public
and hidden tests (hidden files at their upstream paths, reference patch applied) in one
``docker run --network none`` of the sandbox image, run twice, the second (warm) run timed
inside the container; (b) ``proctor.score`` of the reference patch with the baseline
computed first and cached (median of ``--repeats``). Prints both and their ratio
(target <= 1.5x), and the mutation step's seconds against its budget of 1.0 s + 30 ms per
mutant (the budget includes the killer tests' own run time, so meeting it meets the
issue's "beyond the killer tests" form a fortiori).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.realrepo_tasks import TASKS, build_task
from proctor import load_task, score
from proctor.sandbox import (
    docker_client,
    resolve_image,
)
from proctor.suites import mutant_generator

TARGET_RATIO = 1.5
MUTATION_BASE_S = 1.0
MUTATION_PER_MUTANT_S = 0.030
VENV_PATH = "/opt/proctor/venv/bin:/usr/bin:/bin"


def bare_seconds(name: str, task_dir: Path, image: str) -> float:
    """Seconds of the second of two in-container pytest runs of public + hidden tests."""
    t = TASKS[name]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(task_dir / "repo", work)
        shutil.copytree(task_dir / "hidden", work, dirs_exist_ok=True)
        subprocess.run(["git", "apply", str(task_dir / "reference.patch")], cwd=work,
                       check=True)
        pp = ":".join(f"/tmp/w/{p}" for p in t.pythonpath)
        tests = " ".join(t.public + t.hidden)
        run = f"python -m pytest -q -p no:cacheprovider {tests} >/tmp/out 2>&1"
        script = ("cp -r /src /tmp/w && cd /tmp/w && "
                  f"{run}; s=$(date +%s.%N); {run}; rc=$?; e=$(date +%s.%N); "
                  "tail -1 /tmp/out; echo TIME $s $e $rc")
        env = ["-e", f"PATH={VENV_PATH}"] + (["-e", f"PYTHONPATH={pp}"] if pp else [])
        out = subprocess.run(["docker", "run", "--rm", "--network", "none", *env,
                              "-v", f"{work}:/src:ro", image, "sh", "-c", script],
                             check=True, capture_output=True, text=True).stdout
    _, s, e, rc = out.strip().splitlines()[-1].split()
    if rc != "0":
        raise RuntimeError(f"{name}: bare pytest failed:\n{out}")
    return float(e) - float(s)


def proctor_seconds(task_dir: Path, repeats: int) -> tuple[list[float], list[tuple[float, int]]]:
    """Wall seconds of each ``score`` call, and (mutation seconds, mutants run) of each."""
    task = load_task(task_dir)
    patch = task.reference_patch.read_bytes()
    rec = score(task, patch)  # computes and caches the baseline
    if rec.status != "scored":
        raise RuntimeError(f"{task.id}: {rec.status}: {rec.error}")
    times, mutation = [], []
    for _ in range(repeats):
        mutant_generator.forget_answers()  # its mutants made anew, as a new patch's
        t0 = time.monotonic()
        rec = score(task, patch)
        times.append(time.monotonic() - t0)
        ev = rec.evidence.get("mutation")
        if ev is not None:
            mutation.append((ev.duration_s, int(ev.details.get("mutants_selected", 0))))
    return times, mutation


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(TASKS))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    image, _ = resolve_image(docker_client())
    out = Path(os.environ.get("PROCTOR_CACHE_DIR", ROOT / "bench/.cache")) / "realrepo-tasks"
    print(f"image {image}, {args.repeats} repeats")
    for name in [args.only] if args.only else TASKS:
        task_dir = build_task(name, out / name)
        bare = bare_seconds(name, task_dir, image)
        try:
            times, mutation = proctor_seconds(task_dir, args.repeats)
        except Exception as exc:  # report and go on with the next task
            print(f"{name:16s} bare {bare:6.2f} s  proctor: {type(exc).__name__}: {exc}")
            continue
        proc = statistics.median(times)
        ratio = proc / bare
        print(f"{name:16s} bare {bare:6.2f} s  proctor {proc:6.2f} s  ratio {ratio:5.2f}x "
              f"({'met' if ratio <= TARGET_RATIO else 'NOT met'}, target <= {TARGET_RATIO}x)",
              flush=True)
        if mutation:
            m_s = statistics.median(s for s, _ in mutation)
            n = max(n for _, n in mutation)
            budget = MUTATION_BASE_S + MUTATION_PER_MUTANT_S * n
            print(f"{'':16s} mutation step {m_s:5.2f} s for {n} mutants, budget {budget:.2f} s "
                  f"({'met' if m_s <= budget else 'NOT met'})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
