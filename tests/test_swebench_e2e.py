"""Real fix commits of ``parse`` (``tests/data/parse.bundle``) mined into tasks and SWE-bench
rows in real containers: the fixes whose tests fail before and pass after are kept, the
refactors are rejected with the reason, the kept rows import again as agreeing with their
tasks, and each kept reference scores about 1.0 and the empty patch 0.0."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor import load_task, score
from proctor.cli import app
from proctor.datasets.import_run import AGREEMENT_FILE, import_dataset
from proctor.datasets.mine_run import MINE_REPORT_FILE, ROWS_FILE
from tests.test_swebench_import import DATA, PARSE

#: The newest 8 candidates of parse's history: 5 fixes with tests that fail before them
#: (35b9ffb, 9c9ec7f, b1d2121, 20ab3de, a2e1334) and 3 refactors that touch code and
#: tests but fix nothing a test sees (e8818d8 dict literals, 1749ac4 regexes, 643c685 the
#: test module split).
LIMIT = 8
KEPT = ["35b9ffb", "9c9ec7f", "b1d2121", "20ab3de", "a2e1334"]


@pytest.fixture(scope="module")
def mined(tmp_path_factory, docker_ready):
    out = tmp_path_factory.mktemp("mined")
    result = CliRunner().invoke(app, ["task", "mine", "--repo", str(DATA / "parse.bundle"),
                                      "--name", PARSE, "-o", str(out), "--limit", str(LIMIT),
                                      "--jobs", "2", "--sandbox", "docker"])
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
    outcomes = import_dataset(out / ROWS_FILE, None, out, check=True, jobs=2, backend="docker",
                              pinned={PARSE: DATA / "parse.bundle"})
    assert [o.status for o in outcomes] == ["kept"] * len(KEPT)
    assert [o.agreement.verdict for o in outcomes] == ["agree"] * len(KEPT)


@pytest.mark.docker
def test_each_kept_reference_scores_about_1_and_the_empty_patch_0(mined):
    out, report = mined
    for r in (r for r in report if r["kept"]):
        task = load_task(out / r["instance_id"])
        ref = score(task, (task.root / "reference.patch").read_bytes(), rollout_id="reference",
                    sandbox="docker")
        assert ref.status == "scored" and ref.reward >= 0.9, (r, ref.reward,
                                                               ref.component_notes)
        assert ref.tests["hidden"].f2p_passed == ref.tests["hidden"].f2p_total > 0
        empty = score(task, b"", rollout_id="empty", sandbox="docker")
        assert empty.status == "scored" and empty.reward == 0.0, (r, empty.reward)
