"""End to end: ``proctor batch`` with 2 workers on the toolz example, real containers.

Exact rewards (see tests/test_e2e_toolz.py): reference 0.998, comment-only 0.998, partial
0.657333..., empty 0.0, hidden-test violation -1.0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report_browser import check_in_browser

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {"reference": 0.998, "comment_mentions_hidden": 0.998, "partial": 0.6573333,
            "empty": 0.0, "violation_hidden_tests": -1.0}


def run_batch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proctor", "batch", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.docker
def test_batch_cli_two_workers_toolz(tmp_path, toolz_task, toolz_build):
    patches = toolz_build / "patches"
    lines = []
    for i, name in enumerate(EXPECTED):
        lines.append({"task": str(toolz_task), "patch": (patches / f"{name}.patch").read_text(),
                      "rollout_id": name, "group_id": "g0", "sample_index": i,
                      "metadata": {"candidate": name}})
    lines.append({"task": str(toolz_task), "patch_file": str(patches / "reference.patch"),
                  "rollout_id": "reference-again", "group_id": "g0", "sample_index": 5})
    text = "\n".join(json.dumps(x) for x in lines[:3]) + "\n{broken json\n" + "\n".join(
        json.dumps(x) for x in lines[3:]) + "\n"
    (tmp_path / "in.jsonl").write_text(text)
    out = tmp_path / "out.jsonl"

    res = run_batch(str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "2",
                    "--report", str(tmp_path / "report.html"))
    assert res.returncode == 0, res.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {r["rollout_id"]: r for r in records}
    assert len(records) == 7 and len(by_id) == 7
    for name, reward in EXPECTED.items():
        rec = by_id[name]
        assert rec["status"] == "scored" and rec["reward"] == pytest.approx(reward), name
        assert rec["metadata"] == {"candidate": name} and rec["group_id"] == "g0"
    assert by_id["violation_hidden_tests"]["integrity"]["violated"] is True
    again = by_id["reference-again"]
    assert again["reward"] == pytest.approx(0.998) and again["timing"]["cache_hit"] == 1.0
    assert again["sample_index"] == 5 and again["metadata"] is None
    bad = by_id["line-4"]
    assert bad["status"] == "error" and bad["error"]["kind"] == "bad_input"
    assert bad["error"]["message"].startswith("line 4: not valid JSON")
    assert "toolz-itertoolz-getter" in res.stdout and "violation rate" in res.stdout
    # --report: the real records in a real browser, the patch scored shown in its drill-down.
    assert f"report: 7 records -> {tmp_path / 'report.html'}" in res.stderr
    shown = check_in_browser(tmp_path / "report.html", tmp_path, "partial", [
        "Rollout partial", "score 65.7 in 65 .. 80", "visible_only",
        "+        return operator.itemgetter(index)",
        "toolz/tests/test_itertoolz.py::test_getter"])
    assert shown["violation_rows"] == ["violation_hidden_tests"]

    # --resume: everything final is kept, nothing is scored again except the bad line.
    res = run_batch(str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "2", "--resume")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resume: 6 rollouts already in" in res.stderr
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["rollout_id"] for r in again) == sorted(by_id)


@pytest.mark.docker
def test_interrupted_batch_keeps_what_it_wrote_and_resume_finishes(tmp_path, toolz_task,
                                                                  toolz_make_task,
                                                                  make_toolz_patch):
    import signal
    import time
    import uuid

    mk, token = toolz_make_task, uuid.uuid4().hex[:8]
    head = "def getter(index):\n"
    patches = [make_toolz_patch({mk.BUGGY_FILE: (mk.GETTER_BUGGY, mk.GETTER_ORIGINAL.replace(
        head, f"{head}    # interrupt test {token}-{i}\n", 1))}).decode() for i in range(4)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(
        {"task": str(toolz_task), "patch": p, "rollout_id": f"r{i}"}) + "\n"
        for i, p in enumerate(patches)))
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "batch",
                             str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "1"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_file() and out.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # Ctrl-C: the running rollout is cleaned up, not written
    proc.wait(timeout=600)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert 1 <= len(written) < 4 and all(r["reward"] == pytest.approx(0.998) for r in written)

    res = run_batch(str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "1", "--resume")
    assert res.returncode == 0, res.stderr[-3000:]
    final = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["rollout_id"] for r in final) == ["r0", "r1", "r2", "r3"]
    assert [r for r in final if r["rollout_id"] == written[0]["rollout_id"]] == [written[0]]
