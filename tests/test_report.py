"""``proctor report``: the figures (pure), reading a records file with bad lines, the CLI's
exit codes, and the page in a real browser (headless Chromium: every plot drawn, the
drill-down opens, filters work, no console error).

The records here are built in code, one per shape the report must show (scored, partial,
violation, error, flags, penalties, groups). tests/test_batch_e2e.py opens the report of a
real batch (``proctor batch --report``) in the browser too."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.record import (
    EnvInfo,
    ErrorInfo,
    Evidence,
    Flags,
    Integrity,
    RewardRecord,
    SuiteTests,
    Verdict,
)
from proctor.report import (
    build_report,
    compare_data,
    group_figures,
    read_records,
    report_data,
    verdict_of,
)
from tests.report_browser import check_in_browser

ROOT = Path(__file__).resolve().parents[1]
PATCH = ("diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
         "@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n"
         "+    return x + 1  # <script>alert(1)</script>\n")
PATCH_SHA = hashlib.sha256(PATCH.encode()).hexdigest()


def rec(rid: str, reward: float | None, *, task: str = "t1", group: str | None = "g1",  # noqa: PLR0913
        sample: int | None = 0, gate: str = "PASS", status: str = "scored",
        violated: bool = False, flags: dict | None = None, penalties: dict | None = None,
        total_s: float = 2.0, sha: str | None = PATCH_SHA) -> RewardRecord:
    tests = {"hidden": SuiteTests(fail_to_pass={"tests/test_mod.py::test_f": "passed"},
                                  pass_to_pass={"tests/test_mod.py::test_g": "failed",
                                                "tests/test_mod.py::test_h": "passed"},
                                  f2p_passed=1, f2p_total=1, p2p_failed=1, p2p_total=2)}
    return RewardRecord(
        task_id=task, rollout_id=rid, group_id=group, sample_index=sample, status=status,
        reward=reward, reason="integrity_violation" if violated else None,
        components={"compiled": 1.0, "hidden_tests": reward, "performance": None}
        if status == "scored" else {},
        component_notes={"performance": "the task declares no benchmark"},
        penalties=penalties or {}, integrity=Integrity(
            violated=violated, reasons=["touches hidden test path tests/x.py"] if violated
            else [], paths=["pkg/mod.py"]),
        flags=Flags(**(flags or {})), tests=tests if status == "scored" else {},
        evidence={"public_tests": Evidence(command="pytest -q", exit_code=1,
                                           output="x" * 5000 + "TAIL", duration_s=1.5)},
        verdict=Verdict(score=(reward or 0) * 100, gate=gate, rule=f"rule of {rid}")
        if status == "scored" else None,
        error=ErrorInfo(kind="infra", message="engine went away", retryable=True)
        if status == "error" else None,
        timing={"public_tests_s": total_s / 2, "mutation_score_s": total_s / 3,
                "total_s": total_s, "harness_ops_s": 0.1},
        env=EnvInfo(proctor_version="0.1.0", patch_sha256=sha))


def corpus() -> list[RewardRecord]:
    return [
        rec("a1", 1.0), rec("a2", 1.0, sample=1),                      # flat group g1
        rec("a3", 0.5, group="g2", gate="FAIL", penalties={"visible_only": 0.05}),
        rec("a4", 0.9, group="g2", sample=1, total_s=9.0),
        rec("a5", -1.0, group="g2", sample=2, violated=True, gate="FAIL",
            flags={"exclude_from_advantage": True}),
        rec("b1", 0.7, task="t2", group="h1", gate="WARN", flags={"false_claim": True}),
        rec("b2", None, task="t2", group="h1", sample=1, status="error"),
        rec("b3", 0.2, task="t2", group=None, sample=None, gate="FAIL"),
    ]


def write_jsonl(path: Path, records: list[RewardRecord], extra: tuple[str, ...] = ()) -> Path:
    path.write_text("".join(r.to_json() + "\n" for r in records) + "".join(extra))
    return path


def test_verdicts_name_errors_violations_and_gates():
    by_id = {r.rollout_id: verdict_of(r) for r in corpus()}
    assert by_id == {"a1": "PASS", "a2": "PASS", "a3": "FAIL", "a4": "PASS",
                     "a5": "violation", "b1": "WARN", "b2": "error", "b3": "FAIL"}


def test_groups_count_only_rewards_an_advantage_is_computed_over():
    g = group_figures(corpus())
    # g1 [1.0, 1.0] flat; g2 [0.5, 0.9] (the violation is excluded); h1 has one scored
    # reward (the error has none): not measured; b3 is in no group.
    assert (g["groups"], g["measured"], g["flat"]) == (3, 2, 1)
    assert g["flat_share"] == 0.5
    rows = {row["group_id"]: row for row in g["rows"]}
    assert rows["g1"]["flat"] and rows["g1"]["spread"] == 0.0
    assert rows["g2"]["size"] == 2 and rows["g2"]["spread"] == pytest.approx(0.2)


def test_task_figures_rates_components_and_phases():
    data = report_data(corpus())
    t1, t2 = data["tasks"]
    assert (t1["rollouts"], t1["scored"], t1["violations"], t1["excluded"]) == (5, 5, 1, 1)
    assert t1["violation_rate"] == 0.2 and t2["error_rate"] == pytest.approx(1 / 3)
    assert t1["reward"]["mean"] == pytest.approx((1 + 1 + 0.5 + 0.9 - 1) / 5)
    assert t1["components"]["compiled"] == {"mean": 1.0, "sd": 0.0, "n": 5}
    assert t1["components"]["performance"]["n"] == 0  # never measured: no mean, not 0
    assert t1["phases"]["public_tests"] == pytest.approx((1 + 1 + 1 + 4.5 + 1) / 5)
    assert "total" not in t1["phases"] and "harness_ops" not in t1["phases"]
    assert [s["rollout_id"] for s in data["slowest"]][0] == "a4"
    assert data["totals"]["gates"] == {"PASS": 3, "WARN": 1, "FAIL": 2, "violation": 1,
                                       "error": 1}


def test_drill_down_is_bounded_and_keeps_what_explains_the_reward():
    data = report_data(corpus(), patches={PATCH_SHA: PATCH})
    d = data["details"][2]  # a3
    assert d["penalties"] == [{"name": "visible_only", "amount": 0.05, "indicator": None,
                               "weight": None, "rule": d["penalties"][0]["rule"]}]
    assert "public FAIL_TO_PASS" in d["penalties"][0]["rule"]
    assert d["verdict"]["rule"] == "rule of a3"
    out = d["evidence"]["public_tests"]["output"]
    assert out.endswith("TAIL") and len(out) < 1000 and "characters left out" in out
    # PASS_TO_PASS: only what did not pass is listed, with the counts.
    assert d["tests"]["hidden"]["pass_to_pass_not_passed"] == {"tests/test_mod.py::test_g":
                                                                "failed"}
    flags = data["details"][5]["flags"]
    assert [f["name"] for f in flags] == ["false_claim"] and "message" in flags[0]["rule"]
    assert data["patches"] == {PATCH_SHA: PATCH}
    assert data["rows"][0][data["columns"].index("patch")] == PATCH_SHA


def test_a_patch_is_shown_only_for_the_record_that_scored_it():
    other = rec("x", 1.0, sha="0" * 64)
    data = report_data([other], patches={PATCH_SHA: PATCH})
    assert data["patches"] == {} and data["rows"][0][data["columns"].index("patch")] is None


def test_compare_pairs_by_rollout_id_else_by_group_and_sample():
    this = corpus()
    other = [r.model_copy(update={"reward": 0.1, "verdict": Verdict(score=10, gate="FAIL")})
             if r.rollout_id in ("a1", "b1") else r for r in corpus()]
    c = compare_data(this, other, "new.jsonl", "old.jsonl")
    assert c["paired_by"] == "rollout_id" and c["paired"] == 8
    assert [(x["key"], x["other"], x["this"]) for x in c["changed"]] == [
        ("a1", "FAIL", "PASS"), ("b1", "FAIL", "WARN")]
    t1 = next(t for t in c["tasks"] if t["task_id"] == "t1")
    assert t1["delta"] == pytest.approx((1.0 - 0.1) / 5)
    # Another checkpoint names its rollouts its own way: paired by task, group, sample.
    renamed = [r.model_copy(update={"rollout_id": "ckpt2-" + r.rollout_id})
               for r in corpus() if r.sample_index is not None]
    c = compare_data(renamed, [r for r in other if r.sample_index is not None], "b", "a")
    assert c["paired_by"] == "task_id, group_id, sample_index" and c["paired"] == 7
    assert len(c["changed"]) == 2


def test_bad_lines_are_skipped_with_their_reasons(tmp_path):
    good = corpus()
    raw = json.loads(good[0].to_json())
    path = write_jsonl(tmp_path / "r.jsonl", good[:2], (
        "\n",                                            # blank: not a line
        good[2].to_json()[:40] + "\n",                   # torn
        json.dumps({**raw, "schema": "proctor.reward/9"}) + "\n",
        "[1, 2]\n",
        json.dumps({**raw, "status": "maybe"}) + "\n",
        good[3].to_json().replace('"reward":0.9', '"reward":NaN') + "\n",
        good[6].to_json() + "\n",                        # an error record is a record
    ))
    rf = read_records(path)
    assert [r.rollout_id for r in rf.records] == ["a1", "a2", "b2"]
    assert rf.lines == 8 and rf.skipped_total == 5
    assert rf.examples == {
        "not JSON (a torn line?)": [4],
        "schema 'proctor.reward/9' is not 'proctor.reward/1'": [5],
        "a JSON array, not a record object": [6],
        "not a valid record (status: Input should be 'scored' or 'error')": [7],
        "holds NaN or Infinity (not JSON)": [8],
    }


def test_overflowing_numbers_are_skipped_and_extremes_do_not_crash(tmp_path):
    good = corpus()
    lines = [good[0].to_json().replace('"reward":1.0', '"reward":1e999'),
             good[1].to_json().replace('"total_s":2.0', '"total_s":-1e999')]
    extremes = [rec(f"x{i}", 0.5).model_copy(update={"reward": r})
                for i, r in enumerate((1e308, 1e308, -1e308))]
    path = write_jsonl(tmp_path / "r.jsonl", extremes, tuple(x + "\n" for x in lines))
    rf = read_records(path)
    assert rf.examples == {"holds NaN or Infinity (not JSON)": [4, 5]}
    done = build_report(path, tmp_path / "rep.html")
    assert done.records == 3


def test_compare_leaves_keys_held_twice_unpaired():
    """Two rollouts of one run with the same key: which to pair would be a guess."""
    this = [rec("a", 1.0), rec("b", 1.0, sample=1)]
    other = [rec("a", 0.1, gate="FAIL"), rec("a", 0.2, gate="FAIL"), rec("b", 0.0, gate="FAIL")]
    c = compare_data(this, other, "new", "old")
    assert (c["paired"], c["ambiguous"]) == (1, 2)
    assert [x["key"] for x in c["changed"]] == ["b"]


def test_the_same_records_give_the_same_file(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", corpus())
    a = build_report(path, tmp_path / "a.html").path.read_bytes()
    b = build_report(path, tmp_path / "b.html").path.read_bytes()
    assert a == b and len(a) < 6_000_000


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proctor", "report", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_bad_input_exits_2_and_says_why(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "junk.jsonl").write_text("{torn\n[]\n")
    res = run_cli("empty.jsonl", cwd=tmp_path)
    assert res.returncode == 2 and "holds no records (it is empty)" in res.stderr
    res = run_cli("junk.jsonl", cwd=tmp_path)
    assert res.returncode == 2 and "none of its 2 lines is a reward record" in res.stderr
    assert "1 x not JSON (a torn line?)" in res.stderr
    res = run_cli("missing.jsonl", cwd=tmp_path)
    assert res.returncode == 2 and "No such file" in res.stderr
    assert not (tmp_path / "report.html").exists()


def test_cli_refuses_to_overwrite_an_input_or_a_directory(tmp_path):
    write_jsonl(tmp_path / "r.jsonl", corpus())
    before = (tmp_path / "r.jsonl").read_bytes()
    res = run_cli("r.jsonl", "-o", "r.jsonl", cwd=tmp_path)
    assert res.returncode == 2 and "is an input of the report" in res.stderr
    assert (tmp_path / "r.jsonl").read_bytes() == before
    (tmp_path / "adir").mkdir()
    res = run_cli("r.jsonl", "-o", "adir", cwd=tmp_path)
    assert res.returncode == 2 and "-o adir is a directory" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "r.jsonl"]  # no temp file


def test_a_file_name_that_is_not_utf8_is_written_escaped(tmp_path):
    name = os.fsdecode(b"r\xff.jsonl")
    write_jsonl(tmp_path / name, corpus())
    res = run_cli(name, "-o", "rep.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Proctor report: r\\udcff.jsonl" in (tmp_path / "rep.html").read_text()


def test_cli_writes_the_rest_and_names_the_skipped_lines(tmp_path):
    write_jsonl(tmp_path / "r.jsonl", corpus(), ("{torn\n",))
    res = run_cli("r.jsonl", "-o", "out/rep.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "report: 8 records -> out/rep.html" in res.stderr
    assert "skipped 1 line: not JSON (a torn line?) (line 9)" in res.stderr
    assert (tmp_path / "out" / "rep.html").stat().st_size > 1_000_000
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["rep.html"]  # no temp left


def test_report_in_a_real_browser(tmp_path):
    odd = [rec("n1", 0.3, task="17", group=None), rec("e1", None, task="", status="error",
                                                        group=None)]
    records = write_jsonl(tmp_path / "r.jsonl", corpus() + odd, ("{torn\n",))
    old = [r.model_copy(update={"reward": 0.1, "verdict": Verdict(score=10, gate="FAIL")})
           if r.rollout_id == "a1" else r for r in corpus()]
    other = write_jsonl(tmp_path / "old.jsonl", old)
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps({"task": "t1", "rollout_id": "a3", "patch": PATCH}) + "\n")
    build_report(records, tmp_path / "rep.html", compare=other, rollouts=rollouts)
    shown = check_in_browser(tmp_path / "rep.html", tmp_path, "a3", [
        "Rollout a3", "rule of a3", "visible_only", "public FAIL_TO_PASS",
        "+    return x + 1  # <script>alert(1)</script>",   # the patch, as text
        "tests/test_mod.py::test_f", "Integrity", "pkg/mod.py"])
    assert shown["sections"] == ["rewards", "components", "time", "groups", "compare",
                                 "tasks", "rollouts"]
    assert {"plot-reward-hist", "plot-task-box", "plot-components", "plot-rates",
            "plot-phases", "plot-slowest", "plot-group-spread", "plot-group-flat",
            "plot-compare"} <= set(shown["plots"])
    assert shown["notices"] == ["skipped 1 line: not JSON (a torn line?) (line 11)"]
    # Ids that look like numbers stay categories; the empty task id is named.
    assert shown["task_axis"] == ["category", ["(no task)", "17", "t1", "t2"]]
    assert shown["violation_rows"] == ["a5"]
    assert shown["task_hist"] > 0
