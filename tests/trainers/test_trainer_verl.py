"""verl 0.9: verl's own reward loop (``RewardLoopManager``, its Ray reward workers and the
naive reward manager) scores a ``DataProto`` by calling Proctor's ``compute_score``.

The config is verl's own ``ppo_trainer`` (composed with Hydra from the installed verl)
plus the reward settings under test: the 0.9 keys ``reward.custom_reward_function.{path,
name}`` written here, then the README's ``verl-config`` snippet (0.9 has no batch form:
Proctor ships no reward manager). The batch holds responses that carry a fenced diff (decoded by
verl from token ids, EOS included), responses with an explicit ``extra_info["patch"]``, and
a sample whose task is missing. Rewards (``rm_scores`` summed over the response) must equal
``proctor.score`` of the same patches; the missing task gives ``score`` 0.0, ``valid`` 0.0.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

verl = pytest.importorskip("verl", reason="verl not importable: bash scripts/test-trainers.sh "
                                          "runs this in a venv that has it")

import numpy as np  # noqa: E402 - after the skip
import ray  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from packaging.version import Version  # noqa: E402
from readme_snippets import RL_DIR, localise, shell_words, snippet  # noqa: E402
from tiny_lm import tiny_tokenizer  # noqa: E402
from trainer_cases import MISSING_TASK, PATCH_NAMES  # noqa: E402

if Version(verl.__version__) < Version("0.9"):
    pytest.skip(f"verl {verl.__version__} is older than 0.9", allow_module_level=True)

PROMPT_LEN, DATA_SOURCE = 16, "proctor/toolz"
CONFIG_09 = [f"reward.custom_reward_function.path={RL_DIR / 'verl.py'}",
             "reward.custom_reward_function.name=compute_score",
             "reward.reward_manager.source=register", "reward.reward_manager.name=naive"]


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _config(tokenizer_dir: Path, overrides: list[str], yaml_text: str | None = None):
    """verl's trainer config with the tiny tokenizer, 2 reward workers and the reward
    settings given as Hydra overrides and/or a YAML fragment merged on top (as a user's
    config file would)."""
    base = [f"actor_rollout_ref.model.path={tokenizer_dir}", "reward.num_workers=2"]
    config = _compose(base + overrides)
    if yaml_text is not None:
        config = OmegaConf.merge(config, OmegaConf.create(localise(yaml_text)))
    return config


def _snippet_config(name: str, tokenizer_dir: Path):
    """The README snippet ``name`` applied: a YAML block is merged, a shell block's
    ``verl.trainer.main_ppo`` command gives its ``key=value`` overrides."""
    snip = snippet(name)
    if snip.lang in ("yaml", "yml"):
        return _config(tokenizer_dir, [], snip.code)
    commands = [w for w in shell_words(name) if any("main_ppo" in x for x in w)]
    assert commands, f"snippet '{name}' has neither YAML nor a verl.trainer.main_ppo command"
    overrides = [w for w in commands[0] if "=" in w and not w.startswith("-")]
    return _config(tokenizer_dir, overrides)


def _samples(toolz_task, toolz_patches):
    """(name, response text, extra_info, task) per sample: each patch once as a fenced
    diff in the response, once as an explicit patch, and the missing task."""
    out = []
    for name in PATCH_NAMES:
        patch = toolz_patches[name].decode()
        out.append((name, f"The fix:\n```diff\n{patch}```\nDone.", {}, str(toolz_task)))
        out.append((name, "I changed the code.", {"patch": patch}, str(toolz_task)))
    out.append(("missing", "```diff\n" + toolz_patches["reference"].decode() + "```", {},
                MISSING_TASK))
    return out


def _data_proto(samples, tokenizer):
    """A ``DataProto`` shaped as verl's rollout leaves it: left-padded prompts,
    right-padded responses ending in EOS, the attention mask over both, and the
    non-tensor fields the reward manager reads."""
    from tensordict import TensorDict
    from verl import DataProto

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompt_ids = tokenizer("Fix toolz.itertoolz.getter.", add_special_tokens=False).input_ids
    assert len(prompt_ids) <= PROMPT_LEN
    responses = [tokenizer(text, add_special_tokens=False).input_ids + [eos]
                 for _, text, _, _ in samples]
    resp_len = max(map(len, responses))
    prompts, resp, mask = [], [], []
    for ids in responses:
        p_pad = PROMPT_LEN - len(prompt_ids)
        prompts.append([pad] * p_pad + prompt_ids)
        resp.append(ids + [pad] * (resp_len - len(ids)))
        mask.append([0] * p_pad + [1] * len(prompt_ids) + [1] * len(ids)
                    + [0] * (resp_len - len(ids)))
    prompts_t, resp_t = torch.tensor(prompts), torch.tensor(resp)
    batch = TensorDict({"prompts": prompts_t, "responses": resp_t,
                        "input_ids": torch.cat([prompts_t, resp_t], dim=1),
                        "attention_mask": torch.tensor(mask)}, batch_size=len(samples))
    non_tensor = {
        "data_source": np.array([DATA_SOURCE] * len(samples), dtype=object),
        "reward_model": np.array([{"ground_truth": task, "style": "rule"}
                                  for *_, task in samples], dtype=object),
        "extra_info": np.array([dict(info, index=i) for i, (_, _, info, _) in
                                enumerate(samples)], dtype=object),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


@pytest.fixture
def verl_ray(tmp_path):
    """A fresh local Ray cluster started as verl's entry point starts it (its runtime
    env), 2 CPUs; shut down after the test."""
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)  # a local cluster of its own, never another machine
    import proctor

    runtime_env = OmegaConf.to_container(OmegaConf.create(get_ppo_ray_runtime_env(_compose([]))))
    # The reward workers import the Proctor of this test run (the checkout under test).
    runtime_env.setdefault("env_vars", {})["PYTHONPATH"] = \
        str(Path(proctor.__file__).resolve().parents[1])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir="/tmp/ray",
             runtime_env=runtime_env)
    yield
    ray.shutdown()


def _run_reward_loop(config, toolz_task, toolz_patches, tokenizer_dir):
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.trainer.ppo.reward import extract_reward

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    samples = _samples(toolz_task, toolz_patches)
    data = _data_proto(samples, tokenizer)
    manager = RewardLoopManager(config=config, rm_resource_pool=None)
    reward_tensor, extra = extract_reward(manager.compute_rm_score(data))
    return samples, reward_tensor.sum(dim=-1).tolist(), extra


def _check(samples, rewards, extra, expected):
    assert len(rewards) == len(samples)
    assert {"score", "valid"} <= set(extra), sorted(extra)
    for i, (name, _, info, _) in enumerate(samples):
        where = f"sample {i} ({name}, {'explicit patch' if info else 'diff in response'})"
        if name == "missing":
            assert rewards[i] == 0.0 and extra["valid"][i] == 0.0, where
        else:
            assert rewards[i] == pytest.approx(expected[name], abs=1e-6), where
            assert extra["score"][i] == pytest.approx(expected[name], abs=1e-6), where
            assert extra["valid"][i] == 1.0, where


@pytest.mark.docker
def test_verl_09_reward_loop_calls_compute_score(verl_ray, toolz_task, toolz_patches,
                                                 tiny_tokenizer_dir, expected_rewards):
    config = _config(tiny_tokenizer_dir, CONFIG_09)
    samples, rewards, extra = _run_reward_loop(config, toolz_task, toolz_patches,
                                               tiny_tokenizer_dir)
    _check(samples, rewards, extra, expected_rewards)


@pytest.mark.docker
def test_readme_verl_config_snippet(verl_ray, toolz_task, toolz_patches, tiny_tokenizer_dir,
                                    expected_rewards):
    config = _snippet_config("verl-config", tiny_tokenizer_dir)
    assert config.reward.custom_reward_function.path, \
        "the README's verl config sets no reward.custom_reward_function.path (verl 0.9 " \
        "reads only reward.*; top-level custom_reward_function is a legacy key it ignores)"
    samples, rewards, extra = _run_reward_loop(config, toolz_task, toolz_patches,
                                               tiny_tokenizer_dir)
    _check(samples, rewards, extra, expected_rewards)


def test_tiny_tokenizer_round_trips_patches(toolz_patches):
    """What verl decodes is the text we encoded (byte-level BPE), EOS dropped."""
    tok = tiny_tokenizer()
    for name in PATCH_NAMES:
        text = f"```diff\n{toolz_patches[name].decode()}```"
        ids = tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id]
        assert tok.decode(ids, skip_special_tokens=True) == text
