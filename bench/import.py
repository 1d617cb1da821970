"""Import and check of mined SWE-bench rows: seconds per instance and the agreement table.

    python bench/import.py [--limit 8] [--jobs 1] [--repo tests/data/parse.bundle]

Mines the newest ``--limit`` candidate fix commits of the repository (``proctor task mine``:
rows, import, ``task check``'s baseline), then, for each candidate, prints the seconds its
import and its check took (``--jobs 1``: one at a time, so the seconds are its own), the
verdict and the FAIL_TO_PASS / PASS_TO_PASS counts, and the check's cost as a ratio to one
bare pytest run of the same tests (public and hidden, reference applied) in a warm
container of the same image: a baseline is ``runs`` runs of both suites on the base
repository and as many with the reference, so about ``2 * runs`` bare runs is its floor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import load_task
from proctor.datasets.git_repos import repo_name
from proctor.datasets.mine_run import mine_repository
from proctor.harness.pipeline.workspace import prepare_repo
from proctor.sandbox import REPO, DockerSandbox, docker_client, resolve_image


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
    stamps: dict[tuple[str, str], float] = {}
    started = time.monotonic()

    def progress(outcome, step: str) -> None:
        stamps[(outcome.instance, step)] = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="proctor-bench-import-") as out:
        mined = mine_repository(args.repo, args.name or repo_name(args.repo), Path(out),
                                limit=args.limit, jobs=args.jobs, progress=progress)
        image, _ = resolve_image(docker_client())
        print(f"{args.name}: {len(mined)} candidates, --jobs {args.jobs}, image {image}")
        print(f"{'instance':42} {'import s':>8} {'check s':>8} {'bare s':>7} {'ratio':>6} "
              f"{'F2P':>4} {'P2P':>5}  kept / why not")
        imports = sorted(t for (_, step), t in stamps.items() if step == "import")
        checks = sorted(t for (_, step), t in stamps.items() if step == "check")
        last_import = imports[-1] if imports else started
        previous = {"import": started, "check": last_import}
        ratios = []
        for m in sorted(mined, key=lambda m: stamps.get((m.instance, "import"), 0.0)):
            imp = stamps.get((m.instance, "import"), previous["import"]) - previous["import"]
            previous["import"] += imp
            end = stamps.get((m.instance, "check"))
            chk = (end - previous["check"]) if end and args.jobs == 1 else float("nan")
            if end:
                previous["check"] = end
            bare, ratio, f2p, p2p = float("nan"), float("nan"), "", ""
            if m.kept:
                task = load_task(Path(out) / m.instance)
                bare = bare_run_s(task, image)
                ratio = chk / bare
                ratios.append(ratio)
                f2p, p2p = str(len(m.row.FAIL_TO_PASS)), str(len(m.row.PASS_TO_PASS))
            print(f"{m.instance:42} {imp:8.2f} {chk:8.2f} {bare:7.2f} {ratio:6.1f} {f2p:>4} "
                  f"{p2p:>5}  {'kept' if m.kept else m.why}")
        total = (checks[-1] if checks else last_import) - started
        print(f"total {total:.1f} s for {len(mined)} candidates "
              f"({total / max(1, len(mined)):.1f} s each); check / bare run, kept tasks: "
              f"median {statistics.median(ratios):.1f}x" if ratios else "no task kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
