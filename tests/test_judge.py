"""The judge may only veto (``proctor.harness.judge``): real commands and a real entry
point judging records, its failures changing nothing, and the gate that keeps it from
running at all."""

from __future__ import annotations

import json
import sys

import pytest

from proctor import Judge
from proctor.harness.judge import judge_record
from proctor.record import EnvInfo, Measurements, RewardRecord, SuiteTests
from proctor.rewards import Weights, compute_reward, gate_verdict

M = Measurements(compiled=1.0, static_analysis=1.0, mutation_score=1.0,
                 suites={"hidden": SuiteTests(f2p_passed=2, f2p_total=2)})
DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def scored(reward: float | None = None, blockers=()) -> RewardRecord:
    breakdown = compute_reward(M.model_copy(deep=True), Weights())
    total = breakdown.total if reward is None else reward
    return RewardRecord(task_id="t", rollout_id="r", status="scored", reward=total,
                        components=breakdown.components, env=EnvInfo(proctor_version="t"),
                        measurements=M.model_copy(deep=True),
                        verdict=gate_verdict(total, breakdown.components, list(blockers)))


def py(code: str) -> Judge:
    """A judge command: this interpreter running ``code``."""
    return Judge((sys.executable, "-c", code), timeout_s=20)


VETO = ("import json, sys; d = json.load(sys.stdin); "
        "print('thinking...'); "
        "print(json.dumps({'veto': 'rm -rf' in d['diff'] or 'lie' in (d['message'] or ''), "
        "'reason': 'claims %s, reward %.3f' % (d['message'], d['record']['reward'])}))")


def test_a_veto_caps_the_reward_and_fails_the_gate():
    rec = judge_record(scored(), py(VETO), DIFF, "a lie", veto_cap=0.0)
    assert rec.reward == 0.0 and rec.verdict.gate == "FAIL" and rec.flags.judge_veto
    assert rec.verdict.rule == "hard blocker: judge veto: claims a lie, reward 1.000"
    judged = rec.evidence["judge"].details
    assert judged["veto"] is True and judged["provenance"] == "judge" and judged["calls"] == 1
    # the cap is kept in the measurements: the record regrades to the same reward
    assert compute_reward(rec.measurements, Weights()).total == rec.reward


def test_a_veto_never_raises_a_reward():
    rec = judge_record(scored(reward=-0.3), py(VETO), DIFF, "a lie", veto_cap=0.5)
    assert rec.reward == -0.3 and rec.verdict.gate == "FAIL"


def test_no_veto_changes_nothing():
    before = scored()
    rec = judge_record(scored(), py(VETO), DIFF, "an honest message", veto_cap=0.0)
    assert rec.reward == before.reward and rec.verdict == before.verdict
    assert not rec.flags.judge_veto
    assert rec.evidence["judge"].details["decision"] == "no veto: nothing changes"


def test_the_judge_is_never_called_when_the_gate_already_fails(tmp_path):
    marker = tmp_path / "called"
    judge = py(f"open({str(marker)!r}, 'w').write('x'); print('{{\"veto\": false}}')")
    rec = judge_record(scored(blockers=["false claim: x"]), judge, DIFF, None)
    assert not marker.exists()
    assert rec.evidence["judge"].details == {
        "ran": False, "calls": 0, "provenance": "judge",
        "why": "the deterministic gate is FAIL (hard blocker: false claim: x)"}


@pytest.mark.parametrize("code,why", [
    ("import sys; sys.exit(3)", "the judge exited 3"),
    ("print('I think it is fine')", 'the judge answered no {"veto": bool, "reason": str}'),
    ("print('{\"veto\": \"yes\"}')", 'the judge answered no {"veto": bool'),
    ("import time; time.sleep(30)", "the judge ran past its 0.5 s"),
])
def test_a_judge_that_fails_changes_nothing_and_says_so(code, why):
    before = scored()
    rec = judge_record(scored(), Judge((sys.executable, "-c", code), timeout_s=0.5),
                       DIFF, "a lie")
    assert rec.reward == before.reward and rec.verdict == before.verdict
    assert why in rec.evidence["judge"].details["why"]
    assert rec.evidence["judge"].details["decision"].startswith("none")


def test_a_judge_that_cannot_start_changes_nothing():
    rec = judge_record(scored(), Judge(("/nonexistent/judge",)), DIFF, None)
    assert "could not start" in rec.evidence["judge"].details["why"]


def test_an_entry_point_judge(tmp_path, monkeypatch):
    (tmp_path / "my_judge.py").write_text(
        "def judge(payload):\n"
        "    return {'veto': payload['record']['reward'] > 0.9, 'reason': 'too good'}\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    rec = judge_record(scored(), Judge(entry_point="my_judge:judge", timeout_s=20), DIFF,
                       None, veto_cap=0.25)
    assert rec.reward == 0.25 and rec.flags.judge_veto
    assert rec.evidence["judge"].command == "entry point my_judge:judge"


@pytest.mark.parametrize("kwargs", [{}, {"command": (), }, {"entry_point": "nocolon"},
                                    {"command": ("x",), "entry_point": "a:b"},
                                    {"command": ("x",), "timeout_s": 0}])
def test_a_bad_judge_is_a_configuration_error(kwargs):
    with pytest.raises(ValueError):
        Judge(**kwargs)


def test_the_payload_is_the_record_the_diff_and_the_message(tmp_path):
    out = tmp_path / "payload.json"
    judge = py(f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read()); "
               "print('{\"veto\": false, \"reason\": \"\"}')")
    judge_record(scored(), judge, DIFF, "hello")
    payload = json.loads(out.read_text())
    assert payload["diff"] == DIFF and payload["message"] == "hello"
    assert payload["record"]["reward"] == pytest.approx(1.0)


def test_a_batch_passes_its_judge_and_caches_by_it(tmp_path, toolz_task):
    from proctor.harness.batch import BatchOptions, ResultCache, Rollout, RolloutScorer
    from tests.test_batch_unit import FakeScorer, fake_preparer

    class JudgedScorer(FakeScorer):
        def __init__(self):
            super().__init__()
            self.judges = []

        def __call__(self, task, patch, *, judge=None, **kw):
            self.judges.append(judge)
            return super().__call__(task, patch, **kw)

    fake, cache = JudgedScorer(), ResultCache(tmp_path / "results")
    veto = py(VETO)
    for judge in (None, veto, veto, py("print(1)")):
        rs = RolloutScorer(BatchOptions(judge=judge), scorer=fake, preparer=fake_preparer(),
                           cache=cache, sleep=lambda s: None)
        r = Rollout(task=str(toolz_task), rollout_id="r", patch=DIFF)
        rs.score_rollout(r, r.patch_bytes())
    assert fake.judges == [None, veto, py("print(1)")]  # the second veto run: a cache hit


def test_a_bad_judge_stops_a_batch_before_it_starts(tmp_path):
    from typer.testing import CliRunner

    from proctor.cli import app

    (tmp_path / "r.jsonl").write_text("")
    for args in (["--judge", ""], ["--judge-entry", "nocolon"],
                 ["--judge", "x", "--judge-timeout", "0"]):
        result = CliRunner().invoke(app, ["batch", str(tmp_path / "r.jsonl"), "-o",
                                          str(tmp_path / "out.jsonl"), *args])
        assert result.exit_code == 2 and "--judge:" in result.output, result.output
        scored_cli = CliRunner().invoke(app, ["score", str(tmp_path), "-", *args], input="")
        assert scored_cli.exit_code == 2 and "--judge:" in scored_cli.output
