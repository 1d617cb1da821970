"""Host CPU of the tamper checks' text judging, against parsing the same texts.

    python bench/tamper_scan.py [--repeats 5] [TASK_DIR]

For each candidate patch of the example task (``examples/toolz/build/patches``, or the
``.patch`` files beside ``TASK_DIR``), times :func:`~proctor.harness.tamper.judge_texts` on
the texts the host predicts ``git apply`` writes (what a score runs while its sandbox is
made: the suspicious-code scan, the tests-weakened and pyproject checks) and a bare
``ast.parse`` of the same ``.py`` texts, the least any scan of them costs. Prints the
median process CPU of each per patch and their ratio. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import load_task
from proctor.harness.tamper import judge_texts, predicted_texts, pristine_hashes, pristine_text
from proctor.patch import parse_patch


def _cpu(fn, repeats: int) -> float:
    """Median process CPU seconds of ``fn()`` over ``repeats`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", nargs="?", default=str(ROOT / "examples/toolz/build/task"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    task = load_task(args.task)
    patches = sorted((Path(args.task).parent / "patches").glob("*.patch"))
    if not patches:
        print(f"no .patch files beside {args.task}", file=sys.stderr)
        return 2
    hashes = pristine_hashes(task.repo, task.fingerprint)

    def before(path: str) -> str | None:
        return pristine_text(task.repo, path)

    print(f"{'patch':<28} {'.py lines':>9} {'judge ms':>9} {'parse ms':>9} {'ratio':>6}")
    for path in patches:
        text = path.read_text()
        summary = parse_patch(text)
        texts = predicted_texts(summary, text, task.repo)
        if texts is None:
            print(f"{path.stem:<28} the host cannot predict its texts: skipped")
            continue
        py = [t for p, t in texts.items() if p.endswith(".py") and t is not None]
        judge = _cpu(lambda s=summary, t=texts: judge_texts(
            s, hashes, t, before, task.config.tests.public), args.repeats)
        parse = _cpu(lambda py=py: [ast.parse(t) for t in py], args.repeats)
        lines = sum(t.count("\n") for t in py)
        ratio = f"{judge / parse:.1f}x" if py and parse else "-"
        print(f"{path.stem:<28} {lines:>9} {judge * 1e3:>9.1f} {parse * 1e3:>9.1f} {ratio:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
