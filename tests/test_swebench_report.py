"""SWE-bench shapes out and in: records become SWE-bench's report, graded as the ``swebench``
package grades (checked against its own code, installed from the registry into a venv of
its own), and SWE-bench predictions are read as rollouts of the imported tasks."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.datasets import swebench_report
from proctor.datasets.swebench_report import (
    DuplicateInstances,
    export,
    gold_lists,
    instance_report,
    resolution,
    status_map,
)
from proctor.file_lock import file_lock
from proctor.harness.batch import parse_jsonl, read_rollouts
from proctor.record import EnvInfo, ErrorInfo, RewardRecord, SuiteTests

SWEBENCH = "swebench==5.0.2"
OUTCOMES = ["passed", "failed", "error", "skipped", "xfailed", "xpassed", "missing",
            "timeout", "crashed", "not_run", "unverified"]


def record(instance: str, f2p: dict, p2p: dict, *, reward: float = 0.5, reason=None,
           status: str = "scored", metadata: dict | None = None,
           public: dict | None = None) -> RewardRecord:
    tests = {"hidden": SuiteTests(fail_to_pass=f2p, pass_to_pass=p2p)}
    if public is not None:
        tests["public"] = SuiteTests(pass_to_pass=public)
    return RewardRecord(task_id=instance, rollout_id=f"r-{instance}", status=status,
                        reward=None if status == "error" else reward, reason=reason,
                        tests=tests if status == "scored" else {}, metadata=metadata,
                        env=EnvInfo(proctor_version="test"),
                        error=ErrorInfo(kind="infra", message="engine gone")
                        if status == "error" else None)


def test_a_fix_passing_every_graded_test_is_resolved_and_its_lists_are_the_hidden_suite():
    rec = record("a", {"t::f": "passed"}, {"t::p": "passed"}, public={"u::p": "failed"})
    report = instance_report(rec)["a"]
    assert report["resolved"] and report["patch_successfully_applied"]
    assert report["tests_status"]["FAIL_TO_PASS"] == {"success": ["t::f"], "failure": []}
    assert report["tests_status"]["PASS_TO_PASS"] == {"success": ["t::p"], "failure": []}
    assert report["proctor"] == {"rollout_id": "r-a", "reward": 0.5, "violation": False,
                                 "reason": None}


def test_a_violation_is_never_resolved_whatever_its_tests_say():
    rec = record("a", {"t::f": "passed"}, {}, reward=-1.0, reason="integrity")
    assert instance_report(rec)["a"]["resolved"] is False
    assert instance_report(rec)["a"]["proctor"]["violation"] is True


def test_the_run_summary_counts_as_swebench_does():
    records = [
        record("full", {"f": "passed"}, {"p": "passed"}),
        record("partial", {"f": "passed", "g": "failed"}, {"p": "passed"}),
        record("broke", {"f": "passed"}, {"p": "failed"}),
        record("empty", {}, {}, reward=0.0, reason="empty_patch"),
        record("none", {}, {}, reward=0.0, reason="empty_patch",
               metadata={"instance_id": "none", "model_patch_is_none": True}),
        record("infra", {}, {}, status="error"),
        record("noapply", {}, {}, reward=0.0, reason="did_not_apply"),
    ]
    report = export(records, [r.task_id for r in records] + ["never-run"])
    assert report["schema_version"] == 2 and report["total_instances"] == 8
    assert report["resolved_ids"] == ["full"]
    assert report["unresolved_ids"] == ["broke", "noapply", "partial"]
    assert report["empty_patch_ids"] == ["empty", "none"]
    assert report["error_ids"] == ["infra"] and report["incomplete_ids"] == ["never-run"]
    assert report["completed_instances"] == 4 and report["submitted_instances"] == 7
    assert report["instances"]["noapply"]["patch_successfully_applied"] is False
    assert "tests_status" not in report["instances"]["noapply"]
    with pytest.raises(DuplicateInstances, match="instance full has more than one record"):
        export(records + [records[0].model_copy(update={"rollout_id": "again"})])


# --------------------------------------------------------------------------- swebench itself


@pytest.fixture(scope="session")
def swebench_python() -> Path:
    """The python of a venv with the swebench package from the registry, cached by version
    under ~/.cache/proctor (built under a lock; ``.complete`` written last, so a venv an
    interrupted build left is built again)."""
    root = Path(os.environ.get("PROCTOR_SWEBENCH_VENVS",
                               Path.home() / ".cache" / "proctor" / "swebench-venvs"))
    venv = root / SWEBENCH.replace("==", "-")
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f"{venv.name}.lock"):
        if not (venv / ".complete").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", SWEBENCH], check=True,
                           capture_output=True)
            (venv / ".complete").write_text(SWEBENCH)
    return venv / "bin" / "python"


GRADE = """
import json, sys
from swebench.harness.grading import get_eval_tests_report, get_resolution_status
out = []
for case in json.load(sys.stdin):
    report = get_eval_tests_report(case["statuses"], case["gold"])
    out.append({"tests_status": report, "resolution": get_resolution_status(report)})
json.dump(out, sys.stdout)
"""


def _cases() -> list[RewardRecord]:
    """Records over every outcome, alone and in pairs, in both lists, with lists empty."""
    cases = []
    for a, b in itertools.product(OUTCOMES, repeat=2):
        cases.append(record(f"{a}-{b}", {"t.py::f1": a, "t.py::f2[x-1]": "passed"},
                            {"t.py::p1": b, "t.py::C::p2": "passed"}))
    for a in OUTCOMES:
        cases.append(record(f"only-f2p-{a}", {"t.py::f": a}, {}))
        cases.append(record(f"only-p2p-{a}", {}, {"t.py::p": a}))
    return cases


def test_grading_is_swebench_s_own_field_by_field(swebench_python):
    records = _cases()
    payload = [{"statuses": status_map(r), "gold": gold_lists(r)} for r in records]
    done = subprocess.run([str(swebench_python), "-c", GRADE], input=json.dumps(payload),
                          capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout)
    assert len(theirs) == len(records) > 100
    for rec, case, their in zip(records, payload, theirs, strict=True):
        ours = swebench_report.tests_status(case["statuses"], case["gold"])
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"):
            assert ours[key] == their["tests_status"][key], (rec.task_id, key)
        assert resolution(ours) == their["resolution"], rec.task_id
        assert instance_report(rec)[rec.task_id]["resolved"] == (
            their["resolution"] == "RESOLVED_FULL")


# --------------------------------------------------------------------------- predictions in


@pytest.fixture
def tasks_dir(tmp_path) -> Path:
    for name in ("inst-1", "inst-2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.toml").write_text('id = "x"\n')
    return tmp_path


def test_predictions_are_rollouts_of_the_imported_tasks(tasks_dir):
    lines = [json.dumps({"instance_id": "inst-1", "model_patch": "diff --git a/x b/x\n",
                         "model_name_or_path": "m/1"}),
             json.dumps({"instance_id": "inst-2", "model_patch": None,
                         "model_name_or_path": "m/1"}),
             json.dumps({"instance_id": "ghost", "model_patch": "d",
                         "model_name_or_path": "m/1"}),
             json.dumps({"instance_id": "../inst-1", "model_patch": "d"})]
    items = parse_jsonl(lines, tasks_dir)
    first, none, ghost, escape = items
    assert first.rollout.task == str(tasks_dir / "inst-1")
    assert first.rollout.rollout_id == "m/1/inst-1"
    assert first.rollout.metadata == {"instance_id": "inst-1", "model_name_or_path": "m/1",
                                      "model_patch_is_none": False}
    assert none.rollout.patch == "" and none.rollout.metadata["model_patch_is_none"] is True
    assert ghost.rollout is None and ghost.problem.startswith("unknown instance ghost")
    assert escape.rollout is None and "needs an instance_id" in escape.problem
    without = parse_jsonl(lines[:1])[0]
    assert without.rollout is None and "--tasks TASKS_DIR" in without.problem


def test_a_json_predictions_file_by_instance_id(tasks_dir, tmp_path):
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({"inst-1": {"model_patch": "d", "model_name_or_path": "m"},
                                 "inst-2": {"model_patch": "", "model_name_or_path": "m"}}))
    items = read_rollouts(preds, tasks_dir)
    assert [i.rollout.rollout_id for i in items] == ["m/inst-1", "m/inst-2"]


def test_export_command_reads_records_and_says_what_it_skipped(tmp_path):
    rewards = tmp_path / "rewards.jsonl"
    rewards.write_text(record("a", {"f": "passed"}, {}).to_json() + "\n{torn\n")
    result = CliRunner().invoke(app, ["export", "swebench", str(rewards), "-o",
                                      str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    assert "skipped 1 lines" in result.output
    assert json.loads((tmp_path / "report.json").read_text())["resolved_ids"] == ["a"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(app, ["export", "swebench", str(empty), "-o", "x.json"])
    assert result.exit_code == 2 and "no reward record" in result.output


def test_bad_predictions_are_records_naming_their_instance_and_model(tasks_dir, tmp_path):
    from proctor.harness.batch import bad_input_record

    items = parse_jsonl([
        json.dumps({"instance_id": "inst-1", "model_patch": "d", "metadata": "not a dict",
                    "model_name_or_path": "m"}),
        json.dumps({"instance_id": "inst-2", "model_name_or_path": "m"}),  # no model_patch
        json.dumps({"instance_id": "ghost", "model_patch": "d", "model_name_or_path": "m"}),
    ], tasks_dir)
    assert items[0].problem == "instance inst-1: metadata must be an object"
    assert items[1].rollout.patch == "" and items[1].rollout.metadata["model_patch_is_none"]
    rec = bad_input_record(items[2])
    assert rec.rollout_id == "m/ghost" and rec.metadata == {"instance_id": "ghost",
                                                             "model_name_or_path": "m"}
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({"inst-1": {"model_patch": "d"}, "inst-2": "oops"}))
    first, second = read_rollouts(preds, tasks_dir)
    assert first.rollout is not None and second.problem.startswith("expected a JSON object")


def test_export_to_a_directory_is_a_clear_error(tmp_path):
    rewards = tmp_path / "rewards.jsonl"
    rewards.write_text(record("a", {"f": "passed"}, {}).to_json() + "\n")
    result = CliRunner().invoke(app, ["export", "swebench", str(rewards), "-o", str(tmp_path)])
    assert result.exit_code == 2 and "cannot write" in result.output, result.output
