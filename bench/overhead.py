"""Proctor's overhead per patch against a bare pytest run (issue: score one patch end to end).

    python bench/overhead.py [--repeats 5]

On the toolz example task: times (a) a bare ``pytest`` run of the public and hidden tests
inside one already-running container of the same sandbox image, with the reference patch
applied, and (b) ``proctor.score`` of the reference patch with the baseline cached (container
create, copy, apply, compile, static analysis, both suites, teardown). Prints both medians,
their ratio and the difference. Target: difference <= 1.5 s.
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

from proctor import load_task, score
from proctor.harness.pipeline.workspace import prepare_repo
from proctor.sandbox import (
    REPO,
    DockerSandbox,
    docker_client,
    resolve_image,
)
from proctor.suites import mutant_generator

TARGET_S = 1.5


def bare_runs(task, image: str, repeats: int) -> list[float]:
    times = []
    with DockerSandbox(image) as sb:
        assert prepare_repo(sb, task, patch=task.reference_patch.read_bytes()).applied
        sb.put_tree("/proctor/hidden", task.hidden, read_only=True)
        public = " ".join(task.config.tests.public)
        hidden = " ".join(task.hidden_files)
        cmd = (f"cd {REPO} && python -m pytest -q -p no:cacheprovider {public}; "
               f"cd /proctor/hidden && PYTHONPATH={REPO} python -m pytest -q "
               f"-p no:cacheprovider {hidden}")
        for _ in range(repeats + 1):  # first run warms the page cache
            res = sb.run(["sh", "-c", cmd], timeout=300)
            times.append(res.duration_s)
        assert "failed" not in res.output, res.output[-2000:]
    return times[1:]


def proctor_runs(task, repeats: int) -> list[float]:
    patch = task.reference_patch.read_bytes()
    rec = score(task, patch)  # computes and caches the baseline
    assert rec.status == "scored", rec.error
    times = []
    for _ in range(repeats):
        mutant_generator.forget_answers()  # its mutants made anew, as a new patch's
        t = time.monotonic()
        rec = score(task, patch)
        times.append(time.monotonic() - t)
        assert rec.status == "scored" and rec.reward > 0.9, rec
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    task_dir = subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                              check=True, capture_output=True, text=True).stdout.split("\n")[-2]
    task = load_task(task_dir)
    image, _ = resolve_image(docker_client())
    bare = statistics.median(bare_runs(task, image, args.repeats))
    proc = statistics.median(proctor_runs(task, args.repeats))
    print(f"task {task.id}, image {image}, {args.repeats} repeats")
    print(f"bare pytest (public + hidden, warm container): median {bare:.3f} s")
    print(f"proctor score (reference patch, cached baseline): median {proc:.3f} s")
    print(f"ratio {proc / bare:.2f}x, overhead {proc - bare:+.3f} s per patch "
          f"(target <= {TARGET_S} s: {'met' if proc - bare <= TARGET_S else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
