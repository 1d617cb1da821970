"""Scoring one patch. :mod:`~proctor.harness.pipeline.score` runs the phases top-down
(integrity, baseline, sandbox, measure, reward) under the per-patch deadline, the sandbox
slots and cancellation; :mod:`~proctor.harness.pipeline.sandboxes` holds the two sandboxes,
:mod:`~proctor.harness.pipeline.measure` the measure steps and
:mod:`~proctor.harness.pipeline.outcomes` how a record ends. The workspace and suite
modules lay the repository, patch and hidden tests into a sandbox and run the suites
there."""

from __future__ import annotations

from proctor.harness.pipeline.deadline import NOT_RUN_NOTE, Deadline
from proctor.harness.pipeline.install import INSTALL_FAILED
from proctor.harness.pipeline.suites_in_sandbox import (
    SuiteRequest,
    calibrate_task,
    open_patched_sandbox,
    open_task_sandbox,
    run_hidden,
    run_public,
    task_baseline,
)

__all__ = [
    "Deadline", "INSTALL_FAILED", "NOT_RUN_NOTE", "SuiteRequest", "calibrate_task",
    "open_patched_sandbox", "open_task_sandbox", "run_hidden", "run_public", "task_baseline"
]
