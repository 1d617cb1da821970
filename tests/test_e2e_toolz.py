"""End to end: score the toolz example's patches in real containers with ``proctor.score``.

Exact values, default weights (compiled .10, public .25, hidden .35, mutation .20, static .10).
The reference fix has mutants on its two lines (all killed: mutation 1.0, nominal weights).
Where mutation is null (no mutants, e.g. the syntax error), its weight is re-shared:
effective weights are the nominal ones divided by 0.8 (compiled .125, public .3125, hidden
.4375, static .125); with every quality component at 1.0 both give the same total. Suites:
public has 4 FAIL_TO_PASS and 112 PASS_TO_PASS tests, hidden 6 and 45.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from proctor import load_task, score
from proctor.cli import app
from proctor.record import RewardRecord
from proctor.suites.baseline import baseline_key

BUGGY_FILE = "toolz/itertoolz.py"
NOMINAL_WEIGHTS = {"compiled": 0.10, "public_tests": 0.25, "hidden_tests": 0.35,
                   "mutation_score": 0.20, "static_analysis": 0.10, "performance": 0.0}


@pytest.fixture(scope="session")
def scored(toolz_task, toolz_patches):
    """``scored(name)``: the record of the named example patch, scored once per session
    (lazily, so the scoring runs under the calling test's leak check)."""
    cache: dict[str, RewardRecord] = {}

    def get(name: str) -> RewardRecord:
        if name not in cache:
            cache[name] = score(toolz_task, toolz_patches[name], rollout_id=name)
        return cache[name]

    return get


def counts(rec: RewardRecord, suite: str) -> tuple[int, int, int, int]:
    """(f2p passed, f2p total, p2p failed, p2p total) of one suite."""
    t = rec.tests[suite]
    return t.f2p_passed, t.f2p_total, t.p2p_failed, t.p2p_total


def recompute(rec: RewardRecord) -> float:
    """The total from the record's own figures, by design.md section 3 (done by hand)."""
    w, c = rec.weights, rec.components
    credit = sum(w[k] * c[k] for k in ("public_tests", "hidden_tests") if c[k] is not None)
    quality = sum(w[k] * c[k] for k in ("compiled", "mutation_score", "static_analysis",
                                        "performance") if c[k] is not None)
    return credit + rec.progress * quality - rec.diff_cost - sum(rec.penalties.values())


def assert_self_consistent(rec: RewardRecord) -> None:
    """Components, progress and penalties agree with the per-suite test figures."""
    f2p = {s: rec.tests[s].f2p_passed / rec.tests[s].f2p_total for s in ("public", "hidden")}
    broken = {s: rec.tests[s].p2p_failed / rec.tests[s].p2p_total for s in ("public", "hidden")}
    assert rec.components["public_tests"] == pytest.approx(f2p["public"] - broken["public"])
    assert rec.components["hidden_tests"] == pytest.approx(f2p["hidden"] - broken["hidden"])
    w = rec.weights
    assert rec.progress == pytest.approx(
        (w["public_tests"] * f2p["public"] + w["hidden_tests"] * f2p["hidden"])
        / (w["public_tests"] + w["hidden_tests"]))
    assert rec.penalties["visible_only"] == pytest.approx(
        0.10 * max(0.0, f2p["public"] - f2p["hidden"]))
    assert rec.reward == pytest.approx(recompute(rec), abs=1e-12)


# --------------------------------------------------------------------------- candidates


@pytest.mark.docker
def test_reference_patch_scores_full_marks(scored):
    rec = scored("reference")
    assert rec.status == "scored" and rec.error is None and rec.reason is None
    assert rec.reward == pytest.approx(0.998)  # 1.0 - 4 changed code lines * 0.0005
    assert rec.components == {"compiled": 1.0, "public_tests": 1.0, "hidden_tests": 1.0,
                              "mutation_score": 1.0, "static_analysis": 1.0,
                              "performance": None}
    assert rec.weights == pytest.approx(NOMINAL_WEIGHTS)
    assert rec.evidence["mutation"].details["verdicts"] == {"killed": 2}
    assert rec.diff_cost == pytest.approx(0.002)
    assert rec.penalties == {"visible_only": 0.0}
    assert counts(rec, "public") == (4, 4, 0, 112)
    assert counts(rec, "hidden") == (6, 6, 0, 45)
    assert rec.verdict.gate == "PASS" and rec.verdict.blockers == []
    assert rec.apply_strategy == "git_apply"
    assert rec.integrity.violated is False and rec.integrity.paths == [BUGGY_FILE]
    assert rec.flags.exclude_from_advantage is False
    assert rec.env.image and rec.env.image_digest and rec.env.task_fingerprint
    assert rec.env.sandbox == "docker"
    assert_self_consistent(rec)


@pytest.mark.docker
def test_partial_patch_gets_partial_credit_and_visible_only_penalty(scored):
    rec = scored("partial")
    assert rec.status == "scored" and rec.reason is None
    assert counts(rec, "public") == (4, 4, 0, 112)
    assert counts(rec, "hidden") == (3, 6, 0, 45)
    assert sorted(t for t, o in rec.tests["hidden"].fail_to_pass.items() if o != "passed") == [
        "toolz/tests/test_itertoolz.py::test_getter",
        "toolz/tests/test_itertoolz.py::test_groupby_non_callable",
        "toolz/tests/test_itertoolz.py::test_pluck",
    ]
    assert rec.components["public_tests"] == 1.0
    assert rec.components["hidden_tests"] == 0.5
    assert rec.components["compiled"] == 1.0 and rec.components["static_analysis"] == 1.0
    assert rec.diff_cost == pytest.approx(0.001)  # 2 changed code lines
    assert rec.penalties["visible_only"] == pytest.approx(0.05)  # 0.10 * (1.0 - 0.5)
    assert rec.penalties["visible_only"] > 0
    # By hand: credit .3125*1 + .4375*.5 = .53125; progress = .53125/.75 = 17/24;
    # quality (compiled .125 + static .125) * 17/24; minus diff .001 and visible-only .05.
    by_hand = 0.53125 + (17 / 24) * 0.25 - 0.001 - 0.05
    assert rec.progress == pytest.approx(17 / 24)
    assert rec.reward == pytest.approx(by_hand, abs=1e-12)
    assert rec.reward == pytest.approx(0.6573333333333333, abs=1e-12)
    assert_self_consistent(rec)
    assert rec.verdict.gate in ("WARN", "FAIL")
    assert rec.verdict.gate == "WARN"  # score 65.7: 65 <= score < 80, no component below .40


@pytest.mark.docker
def test_empty_patch_scores_exactly_zero(scored):
    rec = scored("empty")
    assert rec.status == "scored"
    assert rec.reward == 0.0
    assert rec.reason == "empty_patch"
    assert rec.tests == {} and rec.apply_strategy is None


@pytest.mark.docker
def test_hidden_test_overwrite_is_integrity_violation_without_any_container(
        toolz_task, toolz_patches, scored, count_containers):
    scored("reference")  # baseline cached: the violation would need no baseline work anyway
    with count_containers() as counter:
        rec = score(toolz_task, toolz_patches["violation_hidden_tests"])
    assert counter.created == []
    assert rec.status == "scored"
    assert rec.reward == -1.0
    assert rec.reason == "integrity_violation"
    assert rec.integrity.violated is True
    assert "toolz/tests/test_itertoolz.py" in rec.integrity.paths
    assert any("hidden test" in r for r in rec.integrity.reasons)
    assert rec.verdict.gate == "FAIL" and "integrity violation" in rec.verdict.blockers
    assert rec.tests == {} and rec.evidence == {}
    assert rec.env.sandbox is None  # ended before a backend was chosen


@pytest.mark.docker
def test_container_counter_sees_a_scoring_container(toolz_task, toolz_patches, scored,
                                                     count_containers):
    """Control for the test above: with the baseline cached, one patch = two containers (the
    public suite's, then a fresh one for the hidden suite)."""
    scored("reference")
    with count_containers() as counter:
        rec = score(toolz_task, toolz_patches["reference"])
    assert rec.status == "scored"
    assert len(counter.created) == 2


@pytest.mark.docker
def test_comment_naming_hidden_test_and_conftest_scores_like_reference(scored):
    ref, rec = scored("reference"), scored("comment_mentions_hidden")
    assert rec.integrity.violated is False
    assert rec.reward == ref.reward
    assert rec.components == ref.components
    assert rec.diff_cost == ref.diff_cost  # comment lines are free


@pytest.mark.docker
def test_candidates_are_ordered(scored):
    r = {n: scored(n).reward for n in ("violation_hidden_tests", "empty", "partial", "reference")}
    assert r["violation_hidden_tests"] < r["empty"] < r["partial"] < r["reference"]


# --------------------------------------------------------------------------- crafted patches


@pytest.mark.docker
def test_stale_hunk_context_does_not_apply(toolz_task, toolz_patches):
    context = b"\n         elif index:\n"
    assert toolz_patches["reference"].count(context) == 1
    stale = toolz_patches["reference"].replace(context, b"\n         elif index is not None:\n")
    rec = score(toolz_task, stale)
    assert rec.status == "scored"
    assert rec.reason == "did_not_apply"
    assert rec.reward == 0.0
    assert rec.apply_strategy is None
    assert rec.evidence["apply"].exit_code == 1
    assert rec.tests == {}


def _break_functions(source: str, names: list[str]) -> str:
    for name in names:
        head = next(line for line in source.splitlines() if line.startswith(f"def {name}("))
        assert source.count(head + "\n") == 1, head
        source = source.replace(head + "\n", head + "\n    raise RuntimeError('sabotage')\n")
    return source


@pytest.mark.docker
def test_destructive_honest_patch_is_negative_but_above_violation(toolz_task, make_toolz_patch):
    original = (toolz_task / "repo" / BUGGY_FILE).read_text()
    broken = _break_functions(original, ["groupby", "unique", "first", "get", "concat",
                                         "frequencies", "take", "count", "interpose"])
    rec = score(toolz_task, make_toolz_patch({BUGGY_FILE: (original, broken)}))
    assert rec.status == "scored" and rec.reason is None
    assert rec.integrity.violated is False
    assert rec.components["compiled"] == 1.0
    pub_f2p, _, pub_broken, _ = counts(rec, "public")
    hid_f2p, _, hid_broken, _ = counts(rec, "hidden")
    assert pub_f2p == 0 and hid_f2p == 0
    assert (pub_broken, hid_broken) == (2, 20)  # of 112 and 45 PASS_TO_PASS
    assert rec.progress == 0.0  # nothing fixed: no quality credit at all
    assert -1.0 < rec.reward < 0.0
    # 9 inserted code lines * .0005 = .0045; nothing fixed, so mutation is not measured
    # and, progress being 0, its weight is kept, not re-shared: the weights are nominal.
    assert rec.components["mutation_score"] is None and "mutation" not in rec.evidence
    assert rec.weights == load_task(toolz_task).config.effective_weights().as_dict()
    assert rec.reward == pytest.approx(-0.25 * 2 / 112 - 0.35 * 20 / 45 - 0.0045, abs=1e-12)
    assert rec.verdict.gate == "FAIL"
    assert_self_consistent(rec)


@pytest.mark.docker
def test_syntax_error_fails_compile_and_tests(toolz_task, make_toolz_patch, toolz_make_task):
    mk = toolz_make_task
    bad = mk.GETTER_ORIGINAL.replace("def getter(index):", "def getter(index)")
    rec = score(toolz_task, make_toolz_patch({BUGGY_FILE: (mk.GETTER_BUGGY, bad)}))
    assert rec.status == "scored" and rec.reason is None
    assert rec.components["compiled"] == 0.0
    assert rec.evidence["compiled"].details["failures"].keys() == {BUGGY_FILE}
    assert counts(rec, "public")[0] == 0 and counts(rec, "hidden")[0] == 0
    assert counts(rec, "public")[2] > 0 and counts(rec, "hidden")[2] > 0  # import fails
    assert rec.components["static_analysis"] == 0.5  # one new finding: the syntax error
    assert [f["rule"] for f in rec.evidence["static_analysis"].details["new_error_findings"]
            ] == ["invalid-syntax"]
    # Nothing imports: every test of both suites fails. Progress 0: mutation not measured
    # and its weight kept (not re-shared over the credit terms), -.25 - .35, diff cost
    # 6 code lines * .0005.
    assert rec.components["public_tests"] == rec.components["hidden_tests"] == -1.0
    assert rec.components["mutation_score"] is None
    assert rec.reward == pytest.approx(-0.603, abs=1e-12)
    assert rec.verdict.gate == "FAIL"
    assert_self_consistent(rec)


@pytest.mark.docker
def test_trivialised_public_tests_are_restored(toolz_task, make_toolz_patch, toolz_make_task):
    """A patch that rewrites public tests to ``assert True`` gains nothing: the public
    suite runs from the pristine snapshot, so public FAIL_TO_PASS is exactly what the same
    source change earns without the test edit."""
    mk = toolz_make_task
    # Fixes the one-element-list branch only: the public failures come from the other one.
    source_fix = mk.GETTER_BUGGY.replace("return lambda x: x[index]",
                                         "return lambda x: (x[index],)")
    recipes = "toolz/tests/test_recipes.py"
    original = (toolz_task / "repo" / recipes).read_text()
    trivial = "def test_countby():\n    assert True\n\n\ndef test_partitionby():\n    assert True\n"
    honest = score(toolz_task, make_toolz_patch({BUGGY_FILE: (mk.GETTER_BUGGY, source_fix)}))
    cheat = score(toolz_task, make_toolz_patch({BUGGY_FILE: (mk.GETTER_BUGGY, source_fix),
                                                recipes: (original, trivial)}))
    assert honest.status == cheat.status == "scored", (honest.error, cheat.error)
    assert cheat.integrity.violated is False  # public tests may be edited; it just has no effect
    assert counts(honest, "public")[:2] == (0, 4)
    assert cheat.tests["public"].fail_to_pass == honest.tests["public"].fail_to_pass
    assert counts(cheat, "public") == counts(honest, "public")
    assert cheat.tests["public"].fail_to_pass[f"{recipes}::test_countby"] == "failed"
    assert cheat.components["public_tests"] == honest.components["public_tests"] == 0.0
    assert cheat.reward <= honest.reward  # only the diff cost differs


@pytest.mark.docker
def test_baseline_is_computed_once_and_cached(toolz_task, toolz_patches, proctor_cache_dir,
                                              scored, count_containers):
    first = scored("reference")  # computes the baseline if no earlier test did
    key = baseline_key(load_task(toolz_task), first.env.image_digest)
    cached = proctor_cache_dir / "baselines" / f"{key}.json"
    assert cached.is_file()
    files, mtime = sorted(cached.parent.iterdir()), cached.stat().st_mtime_ns
    with count_containers() as counter:
        rec = score(toolz_task, toolz_patches["partial"])
    assert rec.status == "scored"
    assert sorted(cached.parent.iterdir()) == files  # no new cache file, no temp file left
    assert cached.stat().st_mtime_ns == mtime  # not rewritten
    assert len(counter.created) == 2  # the patch's own two; no base/reference containers
    assert rec.timing["baseline_s"] < 1.0


# --------------------------------------------------------------------------- CLI


@pytest.mark.docker
def test_cli_score_json(toolz_build, toolz_task):
    patch = toolz_build / "patches" / "reference.patch"
    result = CliRunner().invoke(app, ["score", str(toolz_task), str(patch), "--json",
                                      "--rollout-id", "cli-1"])
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["schema"] == "proctor.reward/1"
    assert rec["rollout_id"] == "cli-1"
    assert rec["status"] == "scored"
    assert rec["reward"] == pytest.approx(0.998)
    RewardRecord.model_validate(rec)


@pytest.mark.docker
def test_cli_task_check_lists_fail_to_pass(toolz_task, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # rich: no wrapping of the test ids
    result = CliRunner().invoke(app, ["task", "check", str(toolz_task)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("FAIL_TO_PASS") == 10  # 4 public + 6 hidden
    assert "toolz/tests/test_recipes.py::test_countby" in result.stdout
    assert "toolz/tests/test_itertoolz.py::test_getter" in result.stdout
    assert "task valid" in result.stdout


def test_cli_schema_is_json_schema():
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema["title"] == "RewardRecord" and schema["type"] == "object"
    assert {"schema", "status", "reward", "components", "integrity", "error"} <= set(
        schema["properties"])


@pytest.mark.docker
def test_patch_without_progress_skips_mutation_with_the_same_reward(toolz_task,
                                                                   make_toolz_patch,
                                                                   toolz_make_task):
    """A change that fixes nothing and breaks nothing: progress 0, so the mutation score
    (multiplied by it) cannot change the reward; it is not measured (null, with why), and
    the total is bit-identical to the one a measured score would give."""
    from proctor.rewards import compute_reward
    from proctor.suites import NO_PROGRESS_NOTE

    mk = toolz_make_task
    noop = mk.GETTER_BUGGY.replace("    else:\n        return operator.itemgetter(*index)",
                                   "    else:\n        index = tuple(index)\n"
                                   "        return operator.itemgetter(*index)")
    assert noop != mk.GETTER_BUGGY
    rec = score(toolz_task, make_toolz_patch({BUGGY_FILE: (mk.GETTER_BUGGY, noop)}))
    assert rec.status == "scored" and rec.reason is None and rec.progress == 0.0
    assert counts(rec, "public")[2] == 0 and counts(rec, "hidden")[2] == 0
    assert rec.components["mutation_score"] is None and "mutation" not in rec.evidence
    assert rec.measurements.notes["mutation_score"] == NO_PROGRESS_NOTE
    assert rec.reward == -0.0005  # one changed code line of diff cost, nothing else
    task = load_task(toolz_task)
    for value in (0.0, 1.0):  # what a measured score would have given: the same total
        measured = rec.measurements.model_copy(update={"mutation_score": value})
        assert compute_reward(measured, task.config.effective_weights()).total == rec.reward
    assert_self_consistent(rec)
