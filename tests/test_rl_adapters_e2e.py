"""Trainer adapters called exactly as verl, TRL and OpenRLHF call them, scoring the toolz
example in real containers (reference 0.998, partial 0.657333..., no diff 0.0 no_patch)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")  # verl hands the batch manager numpy object arrays

PARTIAL = pytest.approx(0.6573333)
RL_DIR = Path(__file__).resolve().parents[1] / "proctor" / "rl"


def load_by_path(filename: str, name: str = "custom_module"):
    """How verl (custom_reward_function.path) and OpenRLHF (--remote_rm_url file) load a
    reward file: by path, under a module name of their own."""
    spec = importlib.util.spec_from_file_location(name, RL_DIR / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verl_reward_fn(name: str, reward_kwargs: dict):
    """verl's get_custom_reward_fn: the named function with reward_kwargs bound."""
    raw = getattr(load_by_path("verl.py"), name)
    return lambda *args, **kwargs: raw(*args, **kwargs, **reward_kwargs)


@pytest.fixture(scope="module")
def answers(toolz_patches):
    ref, part = toolz_patches["reference"].decode(), toolz_patches["partial"].decode()
    return {"reference": f"The fix:\n```diff\n{ref}```\n", "partial": f"```patch\n{part}```",
            "none": "I looked but I am not sure what to change."}


@pytest.mark.docker
def test_verl_naive_and_batch_reward_managers(toolz_task, answers):
    from proctor.rl.verl import VERL_KEYS

    compute_score = verl_reward_fn("compute_score", {})
    compute_score_batch = verl_reward_fn("compute_score_batch", {"workers": 2})
    # NaiveRewardManager: one keyword call per sample.
    one = compute_score(data_source="proctor/toolz", solution_str=answers["reference"],
                        ground_truth=str(toolz_task), extra_info={"index": 0, "split": "train"})
    assert one["score"] == pytest.approx(0.998) and one["valid"] == 1.0

    # BatchRewardManager: non_tensor_batch arrays (numpy object arrays) and reward_kwargs.
    names = ["reference", "partial", "none"]
    out = compute_score_batch(
        data_sources=np.array(["proctor/toolz"] * 3, dtype=object),
        solution_strs=[answers[n] for n in names],
        ground_truths=[str(toolz_task)] * 3,
        extra_infos=np.array([{"index": i} for i in range(3)], dtype=object))
    assert [d["score"] for d in out] == [pytest.approx(0.998), PARTIAL, 0.0]
    assert out[2]["no_patch"] == 1.0 and out[2]["valid"] == 1.0
    assert all(tuple(d) == VERL_KEYS for d in out)


@pytest.mark.docker
def test_trl_grpo_reward_function_sync_and_async(toolz_task, answers):
    from proctor.rl.trl import make_reward_func

    completions = [[{"role": "assistant", "content": answers[n]}]
                   for n in ("reference", "partial", "none")]
    kwargs = dict(prompts=[[{"role": "user", "content": "fix getter"}]] * 3,
                  completions=completions, completion_ids=[[1], [2], [3]],
                  task=[str(toolz_task)] * 3, trainer_state=None)
    sync = make_reward_func(workers=2)
    assert sync(**kwargs) == [pytest.approx(0.998), PARTIAL, 0.0]

    async def trainer_loop():  # TRL gathers async reward functions in its event loop
        func = make_reward_func(workers=2, is_async=True)
        (result,) = await asyncio.gather(func(**kwargs))
        return result

    assert asyncio.run(trainer_loop()) == [pytest.approx(0.998), PARTIAL, 0.0]


@pytest.mark.docker
def test_openrlhf_reward_func_file_mode(toolz_task, answers, monkeypatch):
    reward_func = load_by_path("openrlhf.py", "reward_module").reward_func
    monkeypatch.setitem(sys.modules, "torch", None)  # torch is not installed here anyway
    prompts = ["<user>fix getter</user>", "<user>fix getter</user>"]
    queries = [prompts[0] + answers["partial"], prompts[1] + answers["none"]]
    out = reward_func(queries, prompts, [str(toolz_task), f'{{"task": "{toolz_task}"}}'])
    assert out["rewards"] == [PARTIAL, 0.0]
    assert out["scores"] == [PARTIAL, 0.0]
    assert out["extra_logs"]["proctor_no_patch"] == [0.0, 1.0]


@pytest.mark.docker
def test_openrlhf_query_with_special_tokens_and_bad_labels(toolz_task, toolz_patches,
                                                          monkeypatch):
    """Issue 13: OpenRLHF decodes prompt + response with skip_special_tokens=False, so a
    correct patch ends in ```<|im_end|> (it used to score 0.0 no_patch); one bad label or
    missing task is an error record for that sample only, never an exception."""
    reward_func = load_by_path("openrlhf.py", "reward_module").reward_func
    monkeypatch.setitem(sys.modules, "torch", None)
    ref = toolz_patches["reference"].decode()
    prompt = "<|im_start|>user\nFix getter.<|im_end|>\n<|im_start|>assistant\n"
    answer = f"The fix:\n```diff\n{ref}```<|im_end|>\n<|endoftext|>"
    queries = [prompt + answer, prompt + f"```diff\n{ref}</s>", prompt + answer, prompt + answer]
    labels = [str(toolz_task), str(toolz_task), '{"task": ', "/nonexistent/task"]
    out = reward_func(queries, [prompt] * 4, labels)
    assert out["rewards"] == [pytest.approx(0.998), pytest.approx(0.998), 0.0, 0.0]
    assert out["extra_logs"]["proctor_valid"] == [1.0, 1.0, 0.0, 0.0]
    assert out["extra_logs"]["proctor_no_patch"] == [0.0] * 4


def _family_answers(ref: str) -> dict[str, str]:
    """The reference fix as a Qwen3-Coder XML tool call and as a gpt-oss harmony completion
    (a wrong draft in its analysis channel, the fix in its final one)."""
    draft = ref.replace("(x[index],)", "[x[index]]")
    return {
        "qwen3_coder": ("I will submit the fix.\n\n<tool_call>\n<function=submit_patch>\n"
                        f"<parameter=patch>\n{ref}\n</parameter>\n</function>\n</tool_call>"
                        "<|im_end|>"),
        "harmony": (f"<|channel|>analysis<|message|>Draft:\n```diff\n{draft}```<|end|>"
                    "<|start|>assistant<|channel|>final<|message|>"
                    f"```diff\n{ref}```<|return|>"),
    }


@pytest.mark.docker
def test_trl_and_verl_score_family_syntaxes_like_the_bare_patch(toolz_task, toolz_patches):
    from proctor.rl.trl import make_reward_func

    ref = toolz_patches["reference"].decode()
    family = _family_answers(ref)
    trl = make_reward_func(workers=2, tool_call_parser="qwen3_coder")
    assert trl(prompts=[[{"role": "user", "content": "fix"}]], completions=[
        [{"role": "assistant", "content": family["qwen3_coder"]}]],
        task=[str(toolz_task)]) == [pytest.approx(0.998)]
    harmony = make_reward_func(workers=2, reasoning_parser="openai_gptoss")
    assert harmony(prompts=["fix"], completions=[family["harmony"]],
                   task=[str(toolz_task)]) == [pytest.approx(0.998)]
    compute_score = verl_reward_fn("compute_score", {})
    for text in family.values():
        out = compute_score(data_source="proctor/toolz", solution_str=text,
                            ground_truth=str(toolz_task), extra_info={})
        assert out["score"] == pytest.approx(0.998) and out["no_patch"] == 0.0


@pytest.mark.docker
def test_proctor_score_reads_a_completion_file(toolz_task, toolz_patches, tmp_path):
    import json

    from typer.testing import CliRunner

    from proctor.cli import app

    ref = toolz_patches["reference"].decode()
    path = tmp_path / "completion.txt"
    path.write_text(_family_answers(ref)["harmony"])
    result = CliRunner().invoke(app, ["score", str(toolz_task), "--completion", str(path),
                                      "--json", "--reasoning-parser", "openai_gptoss"])
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["reward"] == pytest.approx(0.998)
    assert rec["evidence"]["extraction"]["details"]["reasoning_parser"] == "openai_gptoss"
    assert rec["evidence"]["extraction"]["details"]["source"] == "fenced"
    bad = CliRunner().invoke(app, ["score", str(toolz_task), "--completion", str(path),
                                   "--tool-call-parser", "nope"])
    assert bad.exit_code == 2 and "unknown tool-call parser 'nope'" in bad.output
    both = CliRunner().invoke(app, ["score", str(toolz_task), str(path), "--completion",
                                    str(path)])
    assert both.exit_code == 2 and "one of them" in both.output
