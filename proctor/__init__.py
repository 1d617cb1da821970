"""Proctor: decomposed, tamper-resistant rewards for coding-agent patches.

    from proctor import score, load_task, RewardRecord
    record = score("path/to/task", patch_bytes)   # RewardRecord; record.reward is a float or None
    record = await ascore("path/to/task", patch_bytes)
    records = score_batch([{"task": ..., "patch": ..., "rollout_id": "r1"}], workers=2)
    record = score(task, patch, message=pr_text, transcript=messages,
                   judge=Judge(("python", "my_judge.py")))   # the agent's words; a veto-only judge
"""

from proctor.errors import (
    EngineUnavailable,
    ImageMissing,
    InfraError,
    ProctorError,
    TaskConfigError,
)
from proctor.harness.batch import Rollout, ascore, score_batch
from proctor.harness.judge import Judge
from proctor.harness.pipeline.score import score
from proctor.record import RewardRecord
from proctor.task import Task, load_task
from proctor.version import __version__

__all__ = [
    "EngineUnavailable", "ImageMissing", "InfraError", "Judge", "ProctorError", "RewardRecord",
    "Rollout",
    "Task", "TaskConfigError", "__version__", "ascore", "load_task", "score", "score_batch",
]
