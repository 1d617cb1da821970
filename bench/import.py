"""Import and check of mined SWE-bench rows: seconds per instance and the agreement table.

    python bench/import.py [--limit 8] [--jobs 1] [--repo tests/data/parse.bundle]

Mines the newest ``--limit`` candidate fix commits of the repository (``proctor task mine``),
then imports the rows it wrote as a user would (``proctor task import swebench``: import,
then ``task check``: the baseline set against the row, and the differential runs'
calibration), with an empty baseline cache so every check is computed. For each row it
prints the seconds its import and its check took (``--jobs 1``: one at a time, so the
seconds are its own), the check's cost as a ratio to one bare pytest run of the same tests
(public and hidden, reference applied) in a warm container of the same image (a baseline is
``runs`` runs of both suites on the base repository and as many with the reference, so
about ``2 * runs`` bare runs is its floor, before calibration), and the agreement: verdict,
FAIL_TO_PASS ids row / Proctor / equal, flaky ids, and the variants of the differential
runs. The mining's own candidates (kept or why not) are listed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import load_task
from proctor.datasets.git_repos import repo_name
from proctor.datasets.import_run import import_dataset
from proctor.datasets.mine_run import ROWS_FILE, mine_repository
from proctor.harness.pipeline.workspace import prepare_repo
from proctor.sandbox import REPO, DockerSandbox, docker_client, resolve_image
from proctor.suites import VARIANTS


def bare_run_s(task, image: str, repeats: int = 3) -> float:
    """Median seconds of one bare pytest run of the task's public and hidden tests (the
    hidden files at their upstream paths), reference applied, in one warm container."""
    times = []
    with DockerSandbox(image) as sb:
        assert prepare_repo(sb, task, patch=task.reference_patch.read_bytes()).applied
        sb.put_tree("/proctor/hidden", task.hidden, read_only=True)
        sb.run(["sh", "-c", f"cp -r /proctor/hidden/. {REPO}/"], timeout=60, user="root")
        tests = " ".join([*task.config.tests.public, *task.hidden_files])
        cmd = f"cd {REPO} && python -m pytest -q -p no:cacheprovider {tests}"
        for _ in range(repeats + 1):  # the first run warms the page cache
            times.append(sb.run(["sh", "-c", cmd], timeout=300).duration_s)
    return statistics.median(times[1:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT / "tests" / "data" / "parse.bundle")
    ap.add_argument("--name", default="r1chardj0n3s/parse")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="proctor-bench-import-") as out:
        out = Path(out)
        started = time.monotonic()
        mined = mine_repository(args.repo, args.name or repo_name(args.repo), out / "mined",
                                limit=args.limit, jobs=args.jobs)
        print(f"{args.name}: {len(mined)} candidates mined in "
              f"{time.monotonic() - started:.1f} s, --jobs {args.jobs}")
        for m in mined:
            print(f"  {m.instance:42} {'kept' if m.kept else m.why}")
        stamps: dict[tuple[str, str], float] = {}

        def progress(outcome, step: str) -> None:
            stamps[(outcome.instance, step)] = time.monotonic()

        os.environ["PROCTOR_CACHE_DIR"] = str(out / "cache")  # every check computed
        started = time.monotonic()
        outcomes = import_dataset(out / "mined" / ROWS_FILE, None, out / "tasks",
                                  pinned={args.name: args.repo.resolve()}, check=True,
                                  calibrate=True, jobs=args.jobs, progress=progress)
        image, _ = resolve_image(docker_client())
        print(f"import + check of {len(outcomes)} rows, image {image}")
        print(f"{'instance':42} {'import s':>8} {'check s':>8} {'bare s':>7} {'ratio':>6} "
              f"{'verdict':>8} {'F2P r/p/eq':>10} {'flaky':>5}  variants")
        previous = {"import": started, "check": max(
            (t for (_, step), t in stamps.items() if step == "import"), default=started)}
        ratios = []
        for o in outcomes:
            spent = {}
            for step in ("import", "check"):
                end = stamps.get((o.instance, step))
                spent[step] = end - previous[step] if end else float("nan")
                previous[step] = end or previous[step]
            bare = ratio = float("nan")
            if o.status != "error" and args.jobs == 1:
                bare = bare_run_s(load_task(o.task), image)
                ratio = spent["check"] / bare
                ratios.append(ratio)
            a = o.agreement
            f = a.fail_to_pass if a else None
            counts = (f"{len(f.equal) + len(f.row_only)}/{len(f.equal) + len(f.proctor_only)}"
                      f"/{len(f.equal)}" if f else "-")
            variants = o.variants
            shown = ("not calibrated" if variants is None else "; ".join(
                f"{s}: {'all' if set(v) == set(VARIANTS) else ','.join(v) or 'none'}"
                for s, v in variants.items()))
            print(f"{o.instance:42} {spent['import']:8.2f} {spent['check']:8.2f} {bare:7.2f} "
                  f"{ratio:6.1f} {a.verdict if a else o.status:>8} {counts:>10} "
                  f"{len(a.flaky) if a else 0:>5}  {o.cause or shown}")
        total = time.monotonic() - started
        print(f"total {total:.1f} s for {len(outcomes)} rows "
              f"({total / max(1, len(outcomes)):.1f} s each); check / bare run: "
              + (f"median {statistics.median(ratios):.1f}x" if ratios else "not measured"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
