"""Proctor's scoring time against bare pytest on tasks built from real PyPI sdists.

    python3 bench/realrepos.py [--only NAME] [--repeats 2]

For each task of :mod:`bench.realrepo_tasks`: (a) bare ``python -m pytest`` of the public
and hidden tests (hidden files at their upstream paths, reference patch applied) in one
``docker run --network none`` of the sandbox image, run twice, the second (warm) run timed
inside the container; (b) ``proctor.score`` of the reference patch with the baseline
computed first and cached (median of ``--repeats``). Prints both and their ratio.
Target: ratio <= 1.5x.
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

from bench.realrepo_tasks import TASKS, build_task  # noqa: E402
from proctor import load_task, score  # noqa: E402
from proctor.sandbox.engine import docker_client  # noqa: E402
from proctor.sandbox.image import resolve_image  # noqa: E402

TARGET_RATIO = 1.5
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


def proctor_seconds(task_dir: Path, repeats: int) -> list[float]:
    task = load_task(task_dir)
    patch = task.reference_patch.read_bytes()
    rec = score(task, patch)  # computes and caches the baseline
    if rec.status != "scored":
        raise RuntimeError(f"{task.id}: {rec.status}: {rec.error}")
    times = []
    for _ in range(repeats):
        t0 = time.monotonic()
        rec = score(task, patch)
        times.append(time.monotonic() - t0)
    return times


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
            proc = statistics.median(proctor_seconds(task_dir, args.repeats))
        except Exception as exc:  # report and go on with the next task
            print(f"{name:16s} bare {bare:6.2f} s  proctor: {type(exc).__name__}: {exc}")
            continue
        ratio = proc / bare
        print(f"{name:16s} bare {bare:6.2f} s  proctor {proc:6.2f} s  ratio {ratio:5.2f}x "
              f"({'met' if ratio <= TARGET_RATIO else 'NOT met'}, target <= {TARGET_RATIO}x)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
