"""proctor.rl.verl under verl 0.9's own classes: the README's ``reward.*`` config as verl
0.9.1 loads it (``get_custom_reward_fn``, ``resolve_reward_manager_cls``), the legacy keys
it ignores, and verl's ``RewardLoopWorker`` scoring a real ``DataProto`` of the toolz
example with a tokenizer built here (rewards equal to ``proctor.score`` of the patches).

Skipped when verl is not importable in the running python: run it from a venv with verl
0.9 (``pip install torch==2.13.0`` first, then ``verl==0.9.1``), from the repository root:
``/path/to/venv/bin/python -m pytest tests/test_verl_09.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

verl = pytest.importorskip("verl", reason="verl is not importable in this python")
if not str(getattr(verl, "__version__", "")).startswith("0.9"):
    pytest.skip(f"verl 0.9 wanted, found {getattr(verl, '__version__', '?')}",
                allow_module_level=True)

from omegaconf import OmegaConf  # noqa: E402  (verl's dependency)

from proctor.harness.pipeline.score import score  # noqa: E402
from proctor.rl.verl import VERL_KEYS  # noqa: E402

CONFIG = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
README_CONFIG = ["reward.custom_reward_function.path=pkg://proctor.rl.verl",
                 "reward.custom_reward_function.name=compute_score",
                 "reward.reward_manager.source=register", "reward.reward_manager.name=naive",
                 "reward.num_workers=1"]


def verl_config(*dotlist: str):
    """verl 0.9.1's full PPO trainer config with Hydra-style overrides."""
    return OmegaConf.merge(OmegaConf.load(CONFIG), OmegaConf.from_dotlist(list(dotlist)))


def test_readme_config_loads_proctor_compute_score_under_the_naive_manager():
    from verl.experimental.reward_loop.reward_manager import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    cfg = verl_config(*README_CONFIG)
    fn = get_custom_reward_fn(cfg)
    assert fn is not None and fn.args[0].__module__ == "proctor.rl.verl"
    assert resolve_reward_manager_cls(cfg) is NaiveRewardManager
    out = fn(data_source="x", solution_str="no diff", ground_truth="", extra_info={})
    assert tuple(out) == VERL_KEYS and out["valid"] == 0.0  # no task: an error, no raise


def test_pre_0_9_keys_are_ignored_or_refused():
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    legacy = verl_config("custom_reward_function.path=pkg://proctor.rl.verl",
                         "custom_reward_function.name=compute_score",
                         "reward_model.reward_manager=batch")
    assert get_custom_reward_fn(legacy) is None
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.reward_score import default_compute_score

    manager = load_reward_manager(legacy, tokenizer=None)  # what 0.9 builds from it
    assert manager.compute_score is default_compute_score  # not Proctor's
    with pytest.raises(NotImplementedError):
        manager.compute_score(data_source="proctor/toolz", solution_str="x", ground_truth="t")
    batch = verl_config(*README_CONFIG, "reward.reward_manager.name=batch")
    with pytest.raises(ValueError, match="Unknown reward manager: batch"):
        resolve_reward_manager_cls(batch)


# --------------------------------------------------------------------------- the reward loop


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, toolz_patches) -> Path:
    """A byte-level BPE tokenizer trained here (exact decode), saved as a HF tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|pad|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([p.decode() for p in toolz_patches.values()], trainer)
    out = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                            pad_token="<|pad|>").save_pretrained(out)
    return out


def dataproto(tokenizer, prompts: list[str], responses: list[str], tasks: list[str],
              extra_fields: list[dict]):
    """A rollout batch as verl 0.9 hands it to the reward loop: left-padded prompts,
    right-padded responses ending in EOS, attention mask, non-tensor fields (an agent
    loop's ``extra_fields`` as ``tool_extra_fields``)."""
    import numpy as np
    import torch
    from verl import DataProto

    p_ids = [tokenizer.encode(p) for p in prompts]
    r_ids = [tokenizer.encode(r) + [tokenizer.eos_token_id] for r in responses]
    plen, rlen, pad = max(map(len, p_ids)), max(map(len, r_ids)), tokenizer.pad_token_id
    prompt_t = torch.tensor([[pad] * (plen - len(x)) + x for x in p_ids])
    resp_t = torch.tensor([x + [pad] * (rlen - len(x)) for x in r_ids])
    mask = torch.tensor([[0] * (plen - len(p)) + [1] * (len(p) + len(r)) + [0] * (rlen - len(r))
                         for p, r in zip(p_ids, r_ids, strict=True)])
    n = len(prompts)
    return DataProto.from_dict(
        tensors={"prompts": prompt_t, "responses": resp_t, "attention_mask": mask,
                 "input_ids": torch.cat([prompt_t, resp_t], dim=1)},
        non_tensors={"data_source": np.array(["proctor/toolz"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": t, "style": "rule"}
                                               for t in tasks], dtype=object),
                     "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
                     "tool_extra_fields": np.array(extra_fields, dtype=object)})


@pytest.mark.docker
def test_reward_loop_worker_scores_like_proctor_score(toolz_task, toolz_patches,
                                                      tokenizer_dir):
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop import RewardLoopWorker

    cfg = verl_config(*README_CONFIG, f"actor_rollout_ref.model.path={tokenizer_dir}")
    worker = RewardLoopWorker(cfg)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ref, part = toolz_patches["reference"].decode(), toolz_patches["partial"].decode()
    responses = [f"The fix:\n```diff\n{ref}```", f"```diff\n{part}```", "I am not sure.",
                 f"```diff\n{ref}```", "I edited the file."]
    tasks = [str(toolz_task)] * 3 + [str(toolz_task / "absent"), str(toolz_task)]
    fields = [{}] * 4 + [{"patch": ref}]  # an agent loop that kept the workspace's diff
    data = dataproto(tokenizer, ["Fix getter."] * 5, responses, tasks, fields)
    # the loop the worker (and its manager) took at construction, as in its Ray actor
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    expected = [score(toolz_task, p.encode()).reward for p in (ref, part)]
    assert [o["reward_score"] for o in outputs] == [
        pytest.approx(expected[0]), pytest.approx(expected[1]), 0.0, 0.0,
        pytest.approx(expected[0])]
    infos = [o["reward_extra_info"] for o in outputs]
    assert [i["valid"] for i in infos] == [1.0, 1.0, 1.0, 0.0, 1.0]  # missing task: error
    assert infos[2]["no_patch"] == 1.0 and outputs[3]["reward_score"] == 0.0
    assert all(set(i) == set(VERL_KEYS) for i in infos)
