"""The HTML report at scale (issue 25): 10,000 records give a file under 10 MB that becomes
interactive in under 3 s in headless Chromium.

    python bench/report.py                       # score the toolz example, grow 10,000 records
    python bench/report.py --from rewards.jsonl  # grow them from your own records
    python bench/report.py --n 2000 --loads 5

The records are grown from real ones: the toolz example's five candidate patches scored by
``proctor batch`` (or the records given), copied round-robin into ``--n`` rollouts over
``n / 20`` tasks with two GRPO groups of 10 each. Each copy gets its own task id, rollout id,
reward (the real one plus noise, a violation stays -1.0), patch (a distinct line added, given
to the report as the rollouts' patches), test ids and evidence output (named after its task),
so the file does not compress better than a real run's would.

Timed in one run: building the report (``build_report``), and in Chromium the time from
navigation until the page says it is interactive (every plot drawn, the table filled),
the median of ``--loads`` loads; the same for the minimal peer, Plotly's own
``to_html`` of one histogram of the same rewards. Prints the size and time against the
targets, and the ratio to the peer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor.record import RewardRecord
from proctor.report import build_report, read_records
from tests.report_browser import chromium, open_report

SIZE_TARGET_MB, READY_TARGET_MS = 10.0, 3000.0
CANDIDATES = ["reference", "partial", "comment_mentions_hidden", "violation_hidden_tests",
              "empty"]


def real_records(work: Path) -> tuple[list[RewardRecord], dict[str, str]]:
    """The toolz example's candidates scored by ``proctor batch`` (records, patches)."""
    task = Path(subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                               capture_output=True, text=True, check=True)
                .stdout.strip().splitlines()[-1])
    patches = task.parent / "patches"
    lines = [{"task": str(task), "patch_file": str(patches / f"{c}.patch"), "rollout_id": c,
              "group_id": "g", "sample_index": i} for i, c in enumerate(CANDIDATES)]
    (work / "in.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    subprocess.run([sys.executable, "-m", "proctor", "batch", str(work / "in.jsonl"), "-o",
                    str(work / "real.jsonl")], check=True, capture_output=True)
    texts = {c: (patches / f"{c}.patch").read_text() for c in CANDIDATES}
    recs = read_records(work / "real.jsonl").records
    return recs, {r.env.patch_sha256 or "": texts[r.rollout_id] for r in recs}


def _renamed(tests: dict, task: str) -> dict:
    return {f"{task}/{k}": v for k, v in tests.items()}


def grow(real: list[RewardRecord], patches: dict[str, str], n: int, seed: int = 0
         ) -> tuple[list[RewardRecord], dict[str, str]]:
    """``n`` records grown from ``real`` (module docstring), with their patches by SHA-256."""
    rng = random.Random(seed)
    out, texts = [], {}
    for i in range(n):
        base = real[i % len(real)]
        task, group = f"task-{i // 20:04d}", f"g{i // 10}"
        data = json.loads(base.to_json())
        data.update(task_id=task, rollout_id=f"r{i:05d}", group_id=group, sample_index=i % 10)
        if data["status"] == "scored" and data["reward"] not in (-1.0, None):
            data["reward"] = round(min(1.0, max(0.0, data["reward"] + rng.gauss(0, 0.1))), 4)
        for suite in data.get("tests", {}).values():
            suite["fail_to_pass"] = _renamed(suite["fail_to_pass"], task)
            suite["pass_to_pass"] = _renamed(suite["pass_to_pass"], task)
        for ev in data.get("evidence", {}).values():
            ev["output"] = ev["output"].replace("toolz/", f"{task}/toolz/")
        text = patches.get(base.env.patch_sha256 or "", "")
        if text:
            text = text.replace("@@ ", f"@@ rollout {i} ", 1)
            sha = hashlib.sha256(text.encode()).hexdigest()
            texts[sha] = text
            data["env"]["patch_sha256"] = sha
        timing = data.get("timing", {})
        for key in timing:
            if key.endswith("_s"):
                timing[key] = round(timing[key] * rng.uniform(0.7, 1.5), 3)
        out.append(RewardRecord.model_validate(data))
    return out, texts


def peer_page(rewards: list[float], path: Path) -> None:
    """The minimal peer: Plotly's own self-contained page of one reward histogram."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Histogram(x=rewards))
    path.write_text(fig.to_html(include_plotlyjs=True, full_html=True, post_script=(
        "window.proctorReadyMs = performance.now(); document.body.dataset.ready = '1';")))


def ready_ms(path: Path, loads: int) -> tuple[float, list]:
    """Median milliseconds to interactive over ``loads`` loads, and the plots of the last."""
    times, plots = [], []
    with chromium() as driver:
        for _ in range(loads):
            opened = open_report(driver, path, timeout_s=120)
            if opened.ready != "1" or opened.errors:
                raise SystemExit(f"{path} did not render: {opened}")
            times.append(opened.ready_ms)
            plots = opened.plots
    return statistics.median(times), plots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="records in the report")
    ap.add_argument("--loads", type=int, default=3, help="browser loads timed per page")
    ap.add_argument("--from", dest="source", type=Path, help="real records to grow from")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="proctor-bench-report-") as tmp:
        work = Path(tmp)
        if args.source:
            real, patches = read_records(args.source).records, {}
        else:
            real, patches = real_records(work)
        records, texts = grow(real, patches, args.n)
        src = work / "rewards.jsonl"
        src.write_text("".join(r.to_json() + "\n" for r in records))
        started = time.monotonic()
        done = build_report(src, work / "report.html", patches=texts)
        build_s = time.monotonic() - started
        ours, plots = ready_ms(done.path, args.loads)
        peer_page([r.reward for r in records if r.reward is not None], work / "peer.html")
        peer, _ = ready_ms(work / "peer.html", args.loads)
        mb = done.size / 1e6
        print(f"records {done.records} (grown from {len(real)} real), input "
              f"{src.stat().st_size / 1e6:.1f} MB, patches shown {done.patches}")
        print(f"report  {mb:.2f} MB (target < {SIZE_TARGET_MB:g}: "
              f"{'ok' if mb < SIZE_TARGET_MB else 'OVER'}), built in {build_s:.1f} s")
        print(f"interactive in Chromium: {ours:.0f} ms median of {args.loads} (target < "
              f"{READY_TARGET_MS:.0f}: {'ok' if ours < READY_TARGET_MS else 'OVER'}); "
              f"{len(plots)} plots drawn")
        print(f"minimal peer (Plotly's page of one histogram): {peer:.0f} ms; "
              f"ratio {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
