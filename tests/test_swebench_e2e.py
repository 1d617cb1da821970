"""Real fix commits of ``parse`` (``tests/data/parse.bundle``) mined into tasks and SWE-bench
rows in real containers: the fixes whose tests fail before and pass after are kept, the
refactors are rejected with the reason, the kept rows import again as agreeing with their
tasks, and each kept reference scores about 1.0 and the empty patch 0.0."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.datasets import ImportOptions
from proctor.datasets.import_run import AGREEMENT_FILE, REPORT_FILE, import_dataset
from proctor.datasets.mine_run import MINE_REPORT_FILE, ROWS_FILE
from proctor.suites import VARIANTS
from tests.test_swebench_import import DATA, PARSE

#: The newest 8 candidates of parse's history: 5 fixes with tests that fail before them
#: (35b9ffb, 9c9ec7f, b1d2121, 20ab3de, a2e1334) and 3 refactors that touch code and
#: tests but fix nothing a test sees (e8818d8 dict literals, 1749ac4 regexes, 643c685 the
#: test module split).
LIMIT = 8
KEPT = ["35b9ffb", "9c9ec7f", "b1d2121", "20ab3de", "a2e1334"]
#: One run with and one without each fix (the default is three): parse's tests do not flip
#: between runs (the baseline's flaky classification has tests of its own,
#: tests/test_baseline_classify.py), so one run tells these commits apart.
BASELINE_RUNS = 1
OPTIONS = ImportOptions(baseline_runs=BASELINE_RUNS)


@pytest.fixture(scope="module")
def mined(tmp_path_factory, docker_ready):
    out = tmp_path_factory.mktemp("mined")
    result = CliRunner().invoke(app, ["task", "mine", "--repo", str(DATA / "parse.bundle"),
                                      "--name", PARSE, "-o", str(out), "--limit", str(LIMIT),
                                      "--jobs", "2", "--sandbox", "docker",
                                      "--baseline-runs", str(BASELINE_RUNS)])
    assert result.exit_code == 0, result.output
    report = [json.loads(x) for x in (out / MINE_REPORT_FILE).read_text().splitlines()]
    return out, report


@pytest.mark.docker
def test_fixes_are_kept_with_the_measured_lists_and_refactors_rejected(mined):
    out, report = mined
    assert len(report) == LIMIT
    kept = sorted(r["commit"][:7] for r in report if r["kept"])
    assert kept == sorted(KEPT), report
    for r in report:
        if not r["kept"]:
            assert r["why"] == "no hidden test fails before the fix and passes after it", r
            assert not (out / r["instance_id"]).exists()
    rows = [json.loads(x) for x in (out / ROWS_FILE).read_text().splitlines()]
    assert len(rows) == len(KEPT)
    for row in rows:
        assert row["FAIL_TO_PASS"] and row["PASS_TO_PASS"]
        assert all(t.split("::")[0] in ("tests/test_parse.py", "test_parse.py")
                   for t in row["FAIL_TO_PASS"])
        agreement = json.loads((out / row["instance_id"] / AGREEMENT_FILE).read_text())
        assert agreement["verdict"] == "agree", agreement


@pytest.mark.docker
def test_the_mined_rows_import_again_and_agree(mined):
    out, _ = mined
    outcomes = import_dataset(out / ROWS_FILE, None, out, options=OPTIONS, check=True, jobs=2,
                              backend="docker", pinned={PARSE: DATA / "parse.bundle"})
    assert [o.status for o in outcomes] == ["kept"] * len(KEPT)
    assert [o.agreement.verdict for o in outcomes] == ["agree"] * len(KEPT)
    # Checked as `proctor task check` checks: the differential runs calibrated on each
    # reference, in the report; parse's tests run the same under every variant.
    report = [json.loads(x) for x in (out / REPORT_FILE).read_text().splitlines()]
    every = sorted(VARIANTS)
    assert [r["variants"] for r in report] == [{"hidden": every, "public": every}] * len(KEPT)
    assert all(o.baseline.variant_changes is not None for o in outcomes)
    # A row naming a test that does not exist: imported again (only its swebench.json
    # changes, so the baseline stays cached) and an error naming the test.
    rows = [json.loads(x) for x in (out / ROWS_FILE).read_text().splitlines()]
    ghost = {**rows[0], "FAIL_TO_PASS": [*rows[0]["FAIL_TO_PASS"], "tests/test_parse.py::ghost"]}
    (out / "ghost.jsonl").write_text(json.dumps(ghost) + "\n")
    again = import_dataset(out / "ghost.jsonl", None, out / "ghost", options=OPTIONS,
                           check=True, backend="docker", pinned={PARSE: DATA / "parse.bundle"})
    assert again[0].status == "error"
    assert again[0].cause == ("FAIL_TO_PASS names tests that do not exist here: "
                              "tests/test_parse.py::ghost")
    assert again[0].agreement.fail_to_pass.row_only == ["tests/test_parse.py::ghost"]


@pytest.mark.docker
def test_predictions_score_each_reference_about_1_and_the_empty_patch_0(mined, tmp_path):
    """SWE-bench predictions through ``proctor batch --tasks`` and back out through
    ``proctor export swebench``: the references ("gold") resolve every kept instance, the
    empty patches ("empty") none, and an unknown instance is a record naming it."""
    out, report = mined
    kept = [r["instance_id"] for r in report if r["kept"]]
    preds = [{"instance_id": i, "model_name_or_path": "gold",
              "model_patch": (out / i / "reference.patch").read_text()} for i in kept]
    preds += [{"instance_id": i, "model_name_or_path": "empty", "model_patch": ""}
              for i in kept]
    preds.append({"instance_id": "r1chardj0n3s__parse-000000000000", "model_patch": "x",
                  "model_name_or_path": "gold"})
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    runner = CliRunner()
    result = runner.invoke(app, ["batch", str(tmp_path / "preds.jsonl"), "--tasks", str(out),
                                 "-o", str(tmp_path / "rewards.jsonl"), "--workers", "2",
                                 "--sandbox", "docker"])
    assert result.exit_code == 0, result.output
    records = [json.loads(x) for x in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    by_id = {r["rollout_id"]: r for r in records}
    for i in kept:
        gold, empty = by_id[f"gold/{i}"], by_id[f"empty/{i}"]
        assert gold["status"] == "scored" and gold["reward"] >= 0.9, (i, gold["reward"],
                                                                      gold["component_notes"])
        hidden = gold["tests"]["hidden"]
        assert hidden["f2p_passed"] == hidden["f2p_total"] > 0
        assert empty["status"] == "scored" and empty["reward"] == 0.0, (i, empty["reward"])
    ghost = by_id["gold/r1chardj0n3s__parse-000000000000"]
    assert ghost["status"] == "error" and "unknown instance" in ghost["error"]["message"]
    assert ghost["metadata"]["instance_id"] == "r1chardj0n3s__parse-000000000000"
    for model, resolved, empties in (("gold", kept, []), ("empty", [], kept)):
        result = runner.invoke(app, ["export", "swebench", str(tmp_path / "rewards.jsonl"),
                                     "--model", model, "-o", str(tmp_path / f"{model}.json")])
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / f"{model}.json").read_text())
        assert summary["resolved_ids"] == sorted(resolved)
        assert summary["empty_patch_ids"] == sorted(empties)
        # The unknown instance is the gold run's error, named by its instance.
        assert summary["error_ids"] == (["r1chardj0n3s__parse-000000000000"]
                                        if model == "gold" else [])


@pytest.mark.docker
def test_a_row_whose_environment_cannot_be_built_is_an_error_naming_it(tmp_path, docker_ready):
    from proctor.datasets import RepoCache
    from proctor.datasets.mine import row_from_commit

    with RepoCache(DATA) as cache:
        row = row_from_commit(cache.get(PARSE), PARSE, KEPT[0])
    row = row.model_copy(update={"instance_id": "unbuildable",
                                 "requirements": ["proctor-no-such-package==9.9.9"]})
    (tmp_path / "rows.jsonl").write_text(row.model_dump_json() + "\n")
    outcomes = import_dataset(tmp_path / "rows.jsonl", DATA, tmp_path / "tasks", check=True,
                              backend="docker")
    assert [o.status for o in outcomes] == ["error"]
    assert "proctor-no-such-package" in outcomes[0].cause, outcomes[0].cause
