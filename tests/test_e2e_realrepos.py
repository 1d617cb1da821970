"""End to end: exact rewards of candidate patches on tasks built from real PyPI sdists
(bench/realrepo_tasks.py). Needs Docker and the sandbox image, and PyPI for the sdists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.realrepo_tasks import build_task, patches  # noqa: E402
from proctor import load_task, score  # noqa: E402
from proctor.patch import code_lines_changed  # noqa: E402
from proctor.rewards import diff_cost  # noqa: E402

#: Measured on the docker backend; reformat = reference - its extra diff cost (checked
#: below), empty = 0.0.
EXPECTED = {
    "isodate": {"reference": 0.998, "partial": 0.499},
    "more-itertools": {"reference": 0.998, "partial": 0.33233333333333337},
    "inflect": {"reference": 0.9744871794871797, "partial": 0.4808333333333334},
    "pyflakes": {"reference": 0.9965, "partial": 0.9368787878787879},
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def built(request, tmp_path_factory, docker_ready):
    name = request.param
    task_dir = build_task(name, tmp_path_factory.mktemp(name) / "task")
    # One baseline run of each state (the benchmark's tasks take two): these rewards do not
    # depend on it, since none of these projects' tests flips between runs.
    toml = (task_dir / "task.toml").read_text()
    assert "\nruns = 2\n" in toml
    (task_dir / "task.toml").write_text(toml.replace("\nruns = 2\n", "\nruns = 1\n"))
    task = load_task(task_dir)
    cand = patches(name, task_dir)
    return name, task, cand, {k: score(task, p) for k, p in cand.items()}


def test_exact_rewards(built):
    name, _, _, recs = built
    for k, want in EXPECTED[name].items():
        assert recs[k].status == "scored", recs[k].error
        assert recs[k].reward == want, k


def test_empty_scores_zero(built):
    assert built[3]["empty"].status == "scored"
    assert built[3]["empty"].reward == 0.0


def test_reformat_costs_only_its_diff(built):
    _, _, cand, recs = built
    assert recs["reformat"].status == "scored", recs["reformat"].error
    extra = (diff_cost(code_lines_changed(cand["reformat"].decode()))
             - diff_cost(code_lines_changed(cand["reference"].decode())))
    assert recs["reformat"].reward == pytest.approx(recs["reference"].reward - extra, abs=1e-12)


def test_the_stats_pass_selection_judges_every_mutant_as_the_whole_stats_pass(
        built, monkeypatch):
    """The baseline's reach map lets the stats pass leave out tests that cannot reach the
    changed functions (proctor/suites/reach.py); every mutant gets the same verdict, and
    the record the same reward, as when every trusted test runs."""
    _, task, cand, recs = built
    compared = []
    for k in ("reference", "partial"):
        selected = recs[k].evidence["mutation"].details
        if "stats" not in selected:  # no mutant on its changed lines: no stats pass to judge
            continue
        compared.append(k)
        assert selected["stats_selection"]["why_all"] is None, selected["stats_selection"]
        assert selected["stats_selection"]["left_out"] > 0
        monkeypatch.setenv("PROCTOR_REACH_SELECTION", "0")
        full = score(task, cand[k])
        monkeypatch.delenv("PROCTOR_REACH_SELECTION")
        whole = full.evidence["mutation"].details
        assert whole["stats_selection"]["left_out"] == 0
        assert full.reward == recs[k].reward, k
        assert whole["verdicts"] == selected["verdicts"], k
        assert ([s["name"].rpartition("__mutmut_")[2] for s in whole["survivors"]]
                == [s["name"].rpartition("__mutmut_")[2] for s in selected["survivors"]]), k
    assert "reference" in compared
