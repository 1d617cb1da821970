"""Proctor: decomposed, tamper-resistant rewards for coding-agent patches.

    from proctor import score, load_task, RewardRecord
    record = score("path/to/task", patch_bytes)   # RewardRecord; record.reward is a float or None
"""

from proctor.errors import (
    EngineUnavailable,
    ImageMissing,
    InfraError,
    ProctorError,
    TaskConfigError,
)
from proctor.harness.executor import score
from proctor.harness.task import Task, load_task
from proctor.record import RewardRecord
from proctor.version import __version__

__all__ = [
    "EngineUnavailable", "ImageMissing", "InfraError", "ProctorError", "RewardRecord", "Task",
    "TaskConfigError", "__version__", "load_task", "score",
]
