"""RL helpers without containers: group advantages, patch extraction, adapter plumbing."""

from __future__ import annotations

import asyncio
import math
import sys
import types

import pytest

from proctor.record import EnvInfo, ErrorInfo, Flags, Integrity, RewardRecord
from proctor.rl import extract_patch, group_advantages
from proctor.rl.completions import completion_text

DIFF = ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")


def rec(reward, group="g", status="scored", cheat=False, rid="r", task="t"):
    return RewardRecord(
        task_id=task, rollout_id=rid, group_id=group, status=status,
        reward=None if status == "error" else reward,
        error=ErrorInfo(kind="infra", message="x") if status == "error" else None,
        integrity=Integrity(violated=cheat), flags=Flags(exclude_from_advantage=cheat),
        env=EnvInfo(proctor_version="t"))


def zscores(values):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return [(v - mean) / (std + 1e-6) for v in values]


# --------------------------------------------------------------------------- advantages


def test_cheater_neither_contaminates_the_baseline_nor_escapes_its_penalty():
    clean = [1.0, 0.5, 0.0, 0.66]
    records = [rec(r) for r in clean] + [rec(-1.0, cheat=True), rec(None, status="error")]
    adv = group_advantages(records)
    assert adv[:4] == pytest.approx(zscores(clean))  # exactly as if the cheat were absent
    assert adv[4] <= min(adv[:4]) and adv[4] <= -1.0
    assert adv[5] is None


def test_exclude_policy_gives_cheaters_zero():
    adv = group_advantages([rec(1.0), rec(0.0), rec(-1.0, cheat=True)], policy="exclude")
    assert adv[2] == 0.0 and adv[:2] == pytest.approx(zscores([1.0, 0.0]))


def test_cheater_penalty_stays_bounded_when_the_group_has_no_spread():
    adv = group_advantages([rec(0.5), rec(0.5), rec(0.5), rec(-1.0, cheat=True)])
    assert adv[:3] == [0.0, 0.0, 0.0]
    assert -5.0 <= adv[3] <= -1.0


def test_groups_are_independent_and_lone_rollouts_get_zero():
    records = [rec(1.0, "a"), rec(0.0, "a"), rec(0.3, "b"), rec(0.9, None, task="t2")]
    adv = group_advantages(records)
    assert adv[0] > 0 > adv[1] and adv[2] == 0.0 and adv[3] == 0.0


def test_group_of_only_cheaters_and_errors():
    adv = group_advantages([rec(-1.0, cheat=True), rec(None, status="error")])
    assert adv[0] == pytest.approx(-1.0) and adv[1] is None


def test_unknown_policy():
    with pytest.raises(ValueError, match="policy"):
        group_advantages([rec(1.0)], policy="ignore")


# --------------------------------------------------------------------------- patch in a completion


@pytest.mark.parametrize("completion", [
    f"Here is the fix:\n```diff\n{DIFF}```\nDone.",
    f"```patch\n{DIFF}```",
    f"~~~diff\n{DIFF}~~~\n",
    f"```\n{DIFF}```",                                # unlabeled fence, diff body
    DIFF,                                             # the completion is the diff
    f"```python\nprint(1)\n```\n```diff\n{DIFF}```",  # a code block, then the diff
    [{"role": "user", "content": "```diff\nnot me\n```"},
     {"role": "assistant", "content": f"```diff\n{DIFF}```"}],
])
def test_extract_patch_finds_the_diff(completion):
    assert extract_patch(completion) == DIFF


def test_extract_patch_takes_the_last_diff_block():
    first = DIFF.replace("a = 2", "a = 3")
    assert extract_patch(f"```diff\n{first}```\nbetter:\n```diff\n{DIFF}```") == DIFF


def test_extract_patch_adds_the_final_newline():
    assert extract_patch(f"```diff\n{DIFF.rstrip()}\n```") == DIFF


@pytest.mark.parametrize("completion", [
    "I could not fix it.", "```python\nprint(1)\n```", "", None, "```diff\n\n```",
    [{"role": "assistant", "content": "no diff here"}],
])
def test_no_patch(completion):
    assert extract_patch(completion) is None


def test_explicit_patch_wins():
    assert extract_patch("```diff\nother\n```", explicit=DIFF) == DIFF
    assert extract_patch(f"```diff\n{DIFF}```", explicit="  ") == DIFF


def test_completion_text_of_messages():
    assert completion_text([{"role": "assistant", "content": "a"},
                            {"role": "assistant", "content": "b"}]) == "a\nb"
    assert completion_text({"content": "x"}) == "x"


# --------------------------------------------------------------------------- adapters' plumbing


def fake_score_completions(monkeypatch, module, records):
    seen = []

    def fake(entries, options=None):
        seen.extend(entries)
        return records[:len(entries)]

    monkeypatch.setattr(module, "score_completions", fake)
    return seen


def test_trl_maps_errors_to_none_sync_and_async(monkeypatch):
    import proctor.rl.trl as trl

    seen = fake_score_completions(monkeypatch, trl, [rec(0.5), rec(None, status="error")])
    func = trl.make_reward_func()
    kwargs = dict(prompts=["p1", "p2"], completions=["c1", "c2"], completion_ids=[[1], [2]],
                  task=["/t1", "/t2"], trainer_state=object())
    assert func(**kwargs) == [0.5, None]
    assert func.__name__ == "proctor"
    afunc = trl.make_reward_func(is_async=True)
    assert asyncio.iscoroutinefunction(afunc)
    assert asyncio.run(afunc(**kwargs)) == [0.5, None]
    assert [e.task for e in seen[:2]] == ["/t1", "/t2"]
    with pytest.raises(ValueError, match="'task' column"):
        func(prompts=["p"], completions=["c"])


def test_openrlhf_strips_the_prompt_and_parses_json_labels(monkeypatch):
    import proctor.rl.openrlhf as orl

    seen = fake_score_completions(monkeypatch, orl, [rec(1.2), rec(None, status="error")])
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch: plain lists
    out = orl.reward_func(["PROMPT```diff\nx\n```", "Q2 answer"], ["PROMPT", "Q2 "],
                          ["/task", '{"task": "/task2", "rollout_id": "r9"}'])
    assert seen[0].completion == "```diff\nx\n```" and seen[0].task == "/task"
    assert seen[1].task == "/task2" and seen[1].rollout_id == "r9"
    assert out["rewards"] == [1.2, 0.0] and out["scores"] == [1.0, 0.0]
    assert out["extra_logs"]["proctor_valid"] == [1.0, 0.0]


def test_openrlhf_returns_tensors_when_torch_is_importable(monkeypatch):
    import proctor.rl.openrlhf as orl

    fake_score_completions(monkeypatch, orl, [rec(0.25)])
    torch = types.ModuleType("torch")
    torch.float32 = "float32"
    torch.tensor = lambda values, dtype: ("tensor", tuple(values), dtype)
    monkeypatch.setitem(sys.modules, "torch", torch)
    out = orl.reward_func(["q"], ["p"], ["/t"])
    assert out["rewards"] == ("tensor", (0.25,), "float32")
    assert out["extra_logs"]["proctor_valid"] == ("tensor", (1.0,), "float32")


def test_verl_keys_are_the_same_for_every_kind_of_record():
    from proctor.rl.verl import VERL_KEYS, to_verl_dict

    dicts = [to_verl_dict(r) for r in (rec(0.5), rec(-1.0, cheat=True),
                                       rec(None, status="error"))]
    for d in dicts:
        assert tuple(d) == VERL_KEYS and all(isinstance(v, float) for v in d.values())
    assert dicts[2]["valid"] == 0.0 and dicts[2]["score"] == 0.0
    assert dicts[1]["integrity_violation"] == 1.0
