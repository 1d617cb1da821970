"""RL helpers without containers: group advantages, patch extraction, adapter plumbing."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import types

import pytest

from proctor.record import EnvInfo, ErrorInfo, Flags, Integrity, RewardRecord
from proctor.rl import completion_text, extract_patch, group_advantages

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


@pytest.fixture
def tasks(tmp_path):
    """Two task directories (a task.toml is what the OpenRLHF adapter checks for)."""
    out = []
    for name in ("task", "task2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.toml").write_text("")
        out.append(str(tmp_path / name))
    return out


def test_openrlhf_strips_the_prompt_and_parses_json_labels(monkeypatch, tasks):
    import proctor.rl.openrlhf as orl

    seen = fake_score_completions(monkeypatch, orl, [rec(1.2), rec(None, status="error")])
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch: plain lists
    out = orl.reward_func(["PROMPT```diff\nx\n```", "Q2 answer"], ["PROMPT", "Q2 "],
                          [tasks[0], json.dumps({"task": tasks[1], "rollout_id": "r9"})])
    assert seen[0].completion == "```diff\nx\n```" and seen[0].task == tasks[0]
    assert seen[1].task == tasks[1] and seen[1].rollout_id == "r9"
    assert out["rewards"] == [1.2, 0.0] and out["scores"] == [1.0, 0.0]
    assert out["extra_logs"]["proctor_valid"] == [1.0, 0.0]


BAD_LABELS = {
    "not_json": '{"task": ',
    "no_task": '{"patch": "x"}',
    "blank_task": {"task": " "},
    "missing_task_dir": "/nonexistent/proctor-task",
    "not_a_string": 17,
    "none": None,
    "patch_not_text": {"task": "/nonexistent/proctor-task", "patch": 5},
    "id_not_text": {"task": "/nonexistent/proctor-task", "group_id": [1]},
    "json_too_deep": '{"task": ' + "[" * 100_000,
    "name_too_long": "t" * 5000,
}


def test_openrlhf_bad_labels_are_error_records_for_that_item_only(monkeypatch, tasks):
    import proctor.rl.openrlhf as orl

    seen = fake_score_completions(monkeypatch, orl, [rec(0.75)])
    monkeypatch.setitem(sys.modules, "torch", None)
    labels = [*BAD_LABELS.values(), tasks[0]]
    n = len(labels)
    out = orl.score_queries(["P answer"] * n, ["P "] * n, labels)
    assert out["rewards"] == [0.0] * (n - 1) + [0.75]
    assert out["extra_logs"]["proctor_valid"] == [0.0] * (n - 1) + [1.0]
    assert [e.task for e in seen] == [tasks[0]]  # the bad ones never reach the scorer
    records = [orl._entry("q", "q", lab) for lab in BAD_LABELS.values()]
    assert all(r.status == "error" and r.error.kind == "bad_input" for r in records)
    assert "not valid JSON" in records[0].error.message
    assert "no 'task'" in records[1].error.message
    assert "no task at" in records[3].error.message


def test_openrlhf_integer_ids_are_kept_as_text(tasks):
    import proctor.rl.openrlhf as orl

    entry = orl._entry("P a", "P ", {"task": tasks[0], "rollout_id": 7, "group_id": 3})
    assert (entry.rollout_id, entry.group_id) == ("7", "3")
    record = orl._entry("P a", "P ", {"task": "/nonexistent/proctor-task", "rollout_id": 7})
    assert record.rollout_id == "7" and record.error.kind == "bad_input"


def test_extract_patch_ignores_an_explicit_patch_that_is_not_text():
    assert extract_patch("```diff\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n```", 5) == (
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    assert extract_patch(None, ["x"]) is None


def test_openrlhf_lists_of_different_lengths_raise():
    import proctor.rl.openrlhf as orl

    with pytest.raises(ValueError, match="differ in length"):
        orl.score_queries(["q"], [], ["t"])


def test_openrlhf_query_that_lost_its_prompt_is_an_error_record(monkeypatch, tasks):
    import proctor.rl.openrlhf as orl

    fake_score_completions(monkeypatch, orl, [])
    out = orl.score_queries(["something else entirely"], ["the prompt"], [tasks[0]])
    assert out["extra_logs"]["proctor_valid"] == [0.0]


CHATML = "<|im_start|>user\nFix getter.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("query, prompt", [
    (CHATML + "ANSWER<|im_end|>", CHATML),                       # special tokens kept
    ("<s>" + CHATML + "ANSWER</s>", CHATML),                     # a BOS before the prompt
    (CHATML.replace("\n", " ") + "ANSWER", CHATML),              # decode changed spacing
    (CHATML[14:] + "ANSWER", CHATML),                            # prompt cut from the left
    ("<|im_start|>user\nFix it!<|im_end|><|im_start|>assistant\nANSWER", "Fix it ?"),
    # the prompt is the user's message only: the template's rest is not the response
    ("<|im_start|>user\nFix getter.\n```diff\n--- a/x\n+++ b/x\n```<|im_end|>\n"
     "<|im_start|>assistant\nANSWER", "Fix getter."),
    ("<s>[INST] Fix getter.\nExample: x [/INST]ANSWER", "Fix getter."),
])
def test_openrlhf_response_of_finds_the_response(query, prompt):
    from proctor.rl.openrlhf import response_of

    assert response_of(query, prompt).strip().removesuffix("<|im_end|>").removesuffix(
        "</s>") == "ANSWER"


def test_openrlhf_prompt_diff_is_never_the_patch(monkeypatch, tasks):
    """A diff in the prompt (an example, the issue) is not the response's patch."""
    import proctor.rl.openrlhf as orl

    seen = fake_score_completions(monkeypatch, orl, [rec(0.0)])
    prompt = f"{CHATML[:-32]}Example:\n```diff\n{DIFF}```<|im_end|>\n<|im_start|>assistant\n"
    orl.score_queries(["<s>" + prompt.replace("\n", " \n") + "No idea.<|im_end|>"], [prompt],
                      [tasks[0]])
    assert extract_patch(seen[0].completion) is None


def test_openrlhf_returns_tensors_when_torch_is_importable(monkeypatch, tasks):
    import proctor.rl.openrlhf as orl

    fake_score_completions(monkeypatch, orl, [rec(0.25)])
    torch = types.ModuleType("torch")
    torch.float32 = "float32"
    torch.tensor = lambda values, dtype: ("tensor", tuple(values), dtype)
    monkeypatch.setitem(sys.modules, "torch", torch)
    out = orl.reward_func(["p q"], ["p"], [tasks[0]])
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


@pytest.mark.parametrize("ground_truth, extra_info", [
    (None, None), ("", {}), ({"task": None}, {"index": 0}), (17, {"num_turns": 2}),
])
def test_verl_sample_without_a_task_is_an_error_dict_not_an_exception(ground_truth,
                                                                        extra_info):
    from proctor.rl.verl import VERL_KEYS, compute_score, compute_score_batch

    d = compute_score("proctor", "```diff\nx\n```", ground_truth, extra_info)
    assert tuple(d) == VERL_KEYS and d["valid"] == 0.0 and d["score"] == 0.0
    assert compute_score_batch(["proctor"], ["x"], [ground_truth], [extra_info]) == [d]


def test_verl_missing_task_directory_is_an_error_dict(tmp_path):
    from proctor.rl.verl import compute_score

    d = compute_score("proctor", f"```diff\n{DIFF}```", str(tmp_path / "absent"),
                      {"num_turns": None, "rollout_reward_scores": {}})
    assert d["valid"] == 0.0 and d["score"] == 0.0


def test_an_unknown_parser_stops_every_adapter_at_its_start_with_the_known_names(tmp_path):
    import subprocess
    import sys

    from proctor.rl.completions import parser_options
    from proctor.rl.trl import make_reward_func
    from proctor.rl.verl import compute_score, compute_score_batch

    assert parser_options() == {"reasoning_parser": "auto", "tool_call_parser": "auto"}
    assert parser_options("qwen3", "qwen3_coder") == {"reasoning_parser": "qwen3",
                                                      "tool_call_parser": "qwen3_coder"}
    with pytest.raises(ValueError, match="unknown reasoning parser 'qwen'.*qwen3"):
        make_reward_func(reasoning_parser="qwen")
    with pytest.raises(ValueError, match="unknown tool-call parser 'xml'.*qwen3_xml"):
        compute_score("d", "x", str(tmp_path), None, tool_call_parser="xml")
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        compute_score_batch(["d"], ["x"], [str(tmp_path)], reasoning_parser="r1")
    # OpenRLHF's file mode reads the environment when it loads the reward file
    env = {"PROCTOR_REASONING_PARSER": "harmony", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", "import proctor.rl.openrlhf"], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "unknown reasoning parser 'harmony'" in proc.stderr and "openai_gptoss" in proc.stderr
