"""TRL: a real ``GRPOTrainer`` trains a tiny local model for 2 steps with Proctor's reward
function, the README's ``trl`` snippet as written, then the async form.

The dataset has a ``patch`` column (the explicit patch wins over the random model's
completion), one row per example patch plus one whose task is missing. Checked on what the
trainer itself recorded (its completions log and metrics): every completion's reward equals
``proctor.score`` of its row's patch, and the error row's reward is NaN (TRL's mask for
``None``) with advantage 0, left out of the logged mean reward.
"""

from __future__ import annotations

import functools
import math

import pytest

trl = pytest.importorskip("trl", minversion="1.16",
                          reason="TRL >= 1.16 not importable: bash scripts/test-trainers.sh "
                                 "runs this in a venv that has it")

from readme_snippets import run_python  # noqa: E402 - after the skip
from tiny_lm import tiny_llama, tiny_tokenizer  # noqa: E402
from trainer_cases import MISSING_TASK, PATCH_NAMES  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

ERROR_ROW = "missing-task"


def _dataset(toolz_task, toolz_patches):
    from datasets import Dataset

    rows = [{"prompt": f"Fix toolz.itertoolz.getter ({name}):", "task": str(toolz_task),
             "patch": toolz_patches[name].decode()} for name in PATCH_NAMES]
    rows.append({"prompt": f"Fix the task ({ERROR_ROW}):", "task": MISSING_TASK,
                 "patch": toolz_patches["reference"].decode()})
    return Dataset.from_list(rows)


def _row_name(prompt: str) -> str:
    return prompt[prompt.index("(") + 1:prompt.index(")")]


class _Recorder(TrainerCallback):
    """What the trainer logged at each step: its per-completion log (prompts, rewards of
    each reward function, advantages) and its metrics."""

    def __init__(self) -> None:
        self.trainer = None
        self.steps: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or "reward" not in logs:
            return
        log = self.trainer._logs  # the per-completion table TRL logs (prompt, rewards...)
        self.steps.append({"prompts": list(log["prompt"]),
                           "rewards": {k: list(v) for k, v in log["rewards"].items()},
                           "advantages": list(log["advantages"]), "metrics": dict(logs)})


def _config(tmp_path, **test_settings):
    """``GRPOConfig`` with this test's settings under the caller's own arguments: small,
    CPU, 2 steps, nothing written but the output dir, logged every step."""
    from trl import GRPOConfig

    defaults = dict(output_dir=str(tmp_path / "grpo"), max_steps=2, max_completion_length=8,
                    learning_rate=1e-4, logging_steps=1, report_to="none", save_strategy="no",
                    use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0,
                    log_completions=False)
    defaults.update(test_settings)
    return functools.partial(GRPOConfig, **defaults)


def _check(recorder: _Recorder, expected: dict[str, float], name: str, steps: int = 2):
    assert len(recorder.steps) == steps, recorder.steps
    for step in recorder.steps:
        rewards = step["rewards"][name]
        assert len(rewards) == len(step["prompts"]) == len(step["advantages"]) > 0
        scored = []
        for prompt, reward, adv in zip(step["prompts"], rewards, step["advantages"],
                                       strict=True):
            row = _row_name(prompt)
            if row == ERROR_ROW:
                assert math.isnan(reward), "an error record must reach TRL as None (NaN)"
                assert adv == 0.0, "a masked completion must get no advantage"
            else:
                assert reward == pytest.approx(expected[row], abs=1e-6), row
                scored.append(expected[row])
        assert scored, "no scorable completion in the step"
        metrics = step["metrics"]
        assert metrics[f"rewards/{name}/mean"] == pytest.approx(sum(scored) / len(scored),
                                                                abs=1e-5)
        assert metrics["reward"] == pytest.approx(sum(scored) / len(scored), abs=1e-5)


@pytest.mark.docker
def test_readme_trl_snippet_trains_two_steps(tmp_path, toolz_task, toolz_patches,
                                             expected_rewards):
    from trl import GRPOTrainer

    tokenizer = tiny_tokenizer()
    dataset = _dataset(toolz_task, toolz_patches)
    # The snippet's num_generations (8) is kept; every row in each step's batch.
    config = _config(tmp_path, per_device_train_batch_size=8 * len(dataset))

    def trainer_cls(**kwargs):
        kwargs.setdefault("processing_class", tokenizer)
        return GRPOTrainer(**kwargs)

    ns = run_python("trl", {"model": tiny_llama(tokenizer), "dataset": dataset,
                            "GRPOTrainer": trainer_cls, "GRPOConfig": config})
    trainer = ns["trainer"]
    recorder = _Recorder()
    recorder.trainer = trainer
    trainer.add_callback(recorder)
    trainer.train()

    name = trainer.reward_func_names[0]
    assert name == "proctor"
    _check(recorder, expected_rewards, name)
    assert trainer.state.global_step == 2


@pytest.mark.docker
def test_async_reward_func_trains_two_steps(tmp_path, toolz_task, toolz_patches,
                                            expected_rewards):
    import inspect

    from trl import GRPOTrainer

    from proctor.rl.trl import make_reward_func

    reward = make_reward_func(is_async=True, workers=2)
    assert inspect.iscoroutinefunction(reward)
    tokenizer = tiny_tokenizer()
    dataset = _dataset(toolz_task, toolz_patches)
    args = _config(tmp_path, per_device_train_batch_size=2 * len(dataset))(num_generations=2)
    trainer = GRPOTrainer(model=tiny_llama(tokenizer), reward_funcs=[reward], args=args,
                          train_dataset=dataset, processing_class=tokenizer)
    assert trainer._has_async_funcs  # TRL awaits it on its own event loop thread
    recorder = _Recorder()
    recorder.trainer = trainer
    trainer.add_callback(recorder)
    trainer.train()
    _check(recorder, expected_rewards, "proctor")
