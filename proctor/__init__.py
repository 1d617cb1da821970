"""Proctor: decomposed, tamper-resistant rewards for coding-agent patches.

    from proctor import score, load_task, RewardRecord
    record = score("path/to/task", patch_bytes)   # RewardRecord; record.reward is a float or None
    record = await ascore("path/to/task", patch_bytes)
    records = score_batch([{"task": ..., "patch": ..., "rollout_id": "r1"}], workers=2)
    record = score(task, patch, message=pr_text, transcript=messages,
                   judge=Judge(("python", "my_judge.py")))   # the agent's words; a veto-only judge
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from proctor.errors import (
    EngineUnavailable,
    ImageMissing,
    InfraError,
    ProctorError,
    TaskConfigError,
)
from proctor.version import __version__

if TYPE_CHECKING:
    from proctor.harness.batch import Rollout, ascore, score_batch
    from proctor.harness.judge import Judge
    from proctor.harness.pipeline.score import score
    from proctor.record import RewardRecord
    from proctor.task import Task, load_task

#: name -> module it comes from, imported on first use: ``import proctor`` (and every
#: ``proctor`` command's start) does not pay for the batch machinery, docker-py or pydantic
#: until a name that needs them is read.
_LAZY = {"Rollout": "proctor.harness.batch", "ascore": "proctor.harness.batch",
         "score_batch": "proctor.harness.batch", "Judge": "proctor.harness.judge",
         "score": "proctor.harness.pipeline.score", "RewardRecord": "proctor.record",
         "Task": "proctor.task", "load_task": "proctor.task"}

__all__ = [
    "EngineUnavailable", "ImageMissing", "InfraError", "Judge", "ProctorError", "RewardRecord",
    "Rollout",
    "Task", "TaskConfigError", "__version__", "ascore", "load_task", "score", "score_batch",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'proctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
