"""Many rollouts: the batch runner (local threads or Ray), rollouts JSONL in and records
out, the result cache, retries of infrastructure errors, and the batch summary."""

from __future__ import annotations

from proctor.harness.batch.options import BatchConfigError, BatchOptions, check_options
from proctor.harness.batch.result_cache import ResultCache, result_key
from proctor.harness.batch.retry import RetryPolicy, with_retries
from proctor.harness.batch.rollout import (
    PreparedTask,
    RolloutScorer,
    TaskPreparer,
    prepare_task,
    shared_rollout_scorer,
)
from proctor.harness.batch.rollout_io import (
    BAD_INPUT,
    BatchItem,
    Rollout,
    bad_input_record,
    error_record,
    parse_jsonl,
    prepare_resume,
    read_rollouts,
)
from proctor.harness.batch.run import ascore, iter_batch, score_batch
from proctor.harness.batch.summary import BatchSummary, is_violation, summarize

__all__ = [
    "BAD_INPUT", "BatchConfigError", "BatchItem", "BatchOptions", "BatchSummary",
    "PreparedTask", "ResultCache", "RetryPolicy", "Rollout", "RolloutScorer", "TaskPreparer",
    "ascore", "bad_input_record", "check_options", "error_record", "is_violation",
    "iter_batch", "parse_jsonl", "prepare_resume", "prepare_task", "read_rollouts",
    "result_key", "score_batch", "shared_rollout_scorer", "summarize", "with_retries"
]
