"""Build the src-layout example task from the ``isodate==0.7.2`` sdist.

    python examples/isodate/make_task.py [--out DIR]

Writes ``DIR/task/`` (default ``examples/isodate/build/task/``: task.toml, repo/, hidden/,
reference.patch) and the candidate patches ``DIR/patches/{reference,partial,reformat,
empty}.patch``; the last line printed is the task directory. The task is the ``isodate``
entry of :mod:`bench.realrepo_tasks` (sdist pinned by sha256, downloaded once into
``bench/.cache``), so the example, the benchmark and ``tests/test_e2e_realrepos.py`` score
the same task. Raises what :func:`bench.realrepo_tasks.build_task` raises (no network, a
changed sdist).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.realrepo_tasks import build_task, patches  # noqa: E402


def build(out: Path) -> Path:
    """Write ``out/task`` and ``out/patches``; return the task directory."""
    task = build_task("isodate", out / "task")
    (out / "patches").mkdir(parents=True, exist_ok=True)
    for name, diff in patches("isodate", task).items():
        (out / "patches" / f"{name}.patch").write_bytes(diff)
    return task


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "build")
    print(build(ap.parse_args().out))
