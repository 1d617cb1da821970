"""Harness failures, as a small exception tree.

An agent's bad patch is never an exception: it is an outcome with a reason
(``empty_patch``, ``patch_unparseable``, ``did_not_apply``...). These exceptions are
for the harness and the task author; they are caught once, at the edge
(:func:`proctor.harness.pipeline.score.score`), and turned into a record with
``status="error"`` and ``reward=None``.

    ProctorError
    ├── TaskConfigError      the task is wrong (bad task.toml, empty suite, no FAIL_TO_PASS)
    └── InfraError           the machine is wrong (engine down, container died); retryable
        ├── EngineUnavailable
        └── ImageMissing     not retryable until `proctor image build` runs
"""

from __future__ import annotations


class ProctorError(Exception):
    """Base of every harness failure. ``kind`` names it in the reward record."""

    kind = "proctor_error"
    retryable = False


class TaskConfigError(ProctorError):
    """The task directory or its ``task.toml`` is invalid. Exit code 2 on the CLI."""

    kind = "task_config"


class InfraError(ProctorError):
    """The infrastructure failed (Docker, a container, a tool). Exit code 3 on the CLI.

    Never scored: an RL trainer must not learn from harness noise.
    """

    kind = "infra"
    retryable = True


class EngineUnavailable(InfraError):
    """No Docker engine answers."""

    kind = "engine_unavailable"


class ImageMissing(InfraError):
    """The sandbox image is not built on this engine."""

    kind = "image_missing"
    retryable = False
