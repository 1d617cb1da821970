"""One rollout, the same code in every executor: the task prepared once per process
(:class:`TaskPreparer`), then per rollout a result-cache lookup, :func:`proctor.score` and
retries of infrastructure errors (:class:`RolloutScorer`)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from proctor.errors import ProctorError, TaskConfigError
from proctor.harness.batch.options import BatchOptions
from proctor.harness.batch.result_cache import ResultCache, relabel, result_key
from proctor.harness.batch.retry import with_retries
from proctor.harness.batch.rollout_io import (
    BAD_INPUT,
    BatchItem,
    Rollout,
    bad_input_record,
    error_record,
)
from proctor.harness.pipeline import cancel, slots
from proctor.harness.pipeline.score import score
from proctor.record import RewardRecord
from proctor.task import Task, load_task


@dataclass(frozen=True)
class PreparedTask:
    """A loaded task whose baseline exists: ``image`` (tag) and ``image_id`` (digest) are
    None for backends without images."""

    task: Task
    image: str | None
    image_id: str | None


def prepare_task(path: str | Path, *, image: str | None = None,
                 sandbox: str = "docker") -> PreparedTask:
    """Load the task, resolve the image and make sure its baseline is cached (computed here
    if needed, under the baseline file lock).

    Raises:
        TaskConfigError: invalid task or baseline (no FAIL_TO_PASS test...).
        InfraError: engine or image unavailable, a baseline container failed.
    """
    from proctor.harness.pipeline import task_baseline
    from proctor.sandbox import resolve_env

    task = load_task(path)
    env, env_id = resolve_env(sandbox, image)
    task_baseline(task, env, env_id, task.config.limits.to_limits(), sandbox)
    return PreparedTask(task, env, env_id)


class TaskPreparer:
    """Prepares each task once per process, whatever the number of threads asking: the
    first caller prepares, the others wait for it. Successes are kept; a
    :class:`TaskConfigError` is kept too (it would repeat); infrastructure errors are not
    (the next call tries again). A task directory is assumed not to change while the process
    runs (its fingerprint is part of the result cache key); restart after editing a task."""

    def __init__(self, prepare: Callable[..., PreparedTask] | None = None) -> None:
        self._prepare = prepare or (lambda *a, **kw: prepare_task(*a, **kw))
        self._done: dict[tuple, PreparedTask | TaskConfigError] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, path: str | Path, *, image: str | None = None,
            sandbox: str = "docker") -> PreparedTask:
        """:func:`prepare_task` of ``path`` for this image and backend, once per process (a
        caller waits while another thread prepares the same one); the baseline's sandboxes
        hold a slot of the sandbox cap meanwhile.

        Raises:
            TaskConfigError: as :func:`prepare_task`, again on every later call.
            InfraError: as :func:`prepare_task`; a later call tries again.
        """
        key = (str(Path(path).resolve()), image, sandbox)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            done = self._done.get(key)
            if isinstance(done, TaskConfigError):
                raise done
            if done is not None:
                return done
            try:
                with slots.acquire():  # the baseline's sandboxes count against the cap
                    prepared = self._prepare(path, image=image, sandbox=sandbox)
            except TaskConfigError as exc:
                self._done[key] = exc
                raise
            self._done[key] = prepared
            return prepared


# --------------------------------------------------------------------------- one rollout


class RolloutScorer:
    """Scores one rollout: prepared task, result cache, ``proctor.score``, retries. Never
    raises; every outcome is a record. Thread-safe; one per process is enough.

    ``scorer`` (default :func:`proctor.score`) and ``preparer`` may be replaced, e.g. by
    fakes in tests of the orchestration.
    """

    def __init__(self, options: BatchOptions | None = None, *,
                 scorer: Callable[..., RewardRecord] | None = None,
                 preparer: TaskPreparer | None = None, cache: ResultCache | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.options = options or BatchOptions()
        overlap = self.options.overlapped
        self.scorer = scorer or (lambda *a, **kw: score(*a, overlap=overlap, **kw))
        self.preparer = preparer or TaskPreparer()
        self.cache = cache if cache is not None else (
            ResultCache() if self.options.cache else None)
        self.sleep = sleep

    def score_item(self, item: BatchItem) -> RewardRecord:
        """The record for one input position (bad input included); a ``cancelled`` error
        record, not scored, when the current cancel scope is cancelled."""
        if item.rollout is None:
            return bad_input_record(item)
        r = item.rollout
        if cancel.requested():
            return _cancelled_record(r)
        try:
            patch = r.patch_bytes()
        except OSError as exc:
            return error_record(
                rollout_id=r.rollout_id, task=r.task, group_id=r.group_id,
                sample_index=r.sample_index, metadata=r.metadata, kind=BAD_INPUT,
                message=f"{item.where}: patch_file {r.patch_file!r} cannot be read: "
                        f"{exc.strerror or exc}")
        return self.score_rollout(r, patch)

    def score_rollout(self, r: Rollout, patch: bytes) -> RewardRecord:
        """The record for rollout ``r`` with its patch already read: from the result cache
        when it holds this patch, task, image and backend, else scored, with infrastructure
        errors retried per the options; a ``cancelled`` error record when the cancel scope
        is cancelled meanwhile. Never raises: a harness bug becomes an ``internal_error``
        record, so one rollout cannot stop the batch. ``metadata`` is the rollout's."""
        sha = hashlib.sha256(patch).hexdigest()
        try:
            rec = with_retries(lambda: self._attempt(r, patch, sha), self.options.retry,
                               self.sleep)
        except Exception as exc:  # noqa: BLE001 - a harness bug must not stop the batch
            rec = error_record(rollout_id=r.rollout_id, task=r.task, kind="internal_error",
                               message=f"{type(exc).__name__}: {exc}", patch_sha256=sha,
                               group_id=r.group_id, sample_index=r.sample_index)
        rec.metadata = r.metadata
        return rec

    def _attempt(self, r: Rollout, patch: bytes, sha: str) -> RewardRecord:
        started = time.monotonic()
        try:
            prep = self.preparer.get(r.task, image=self.options.image,
                                     sandbox=self.options.sandbox)
        except ProctorError as exc:
            return error_record(rollout_id=r.rollout_id, task=r.task, kind=exc.kind,
                                message=str(exc), retryable=exc.retryable, patch_sha256=sha,
                                group_id=r.group_id, sample_index=r.sample_index)
        if self.cache is None:
            rec = self._score(prep, r, patch)
            return _cancelled_record(r, sha) if cancel.requested() else rec
        key = result_key(sha, prep.task.fingerprint, prep.image_id,
                         sandbox=self.options.sandbox, said_sha256=r.said_sha256(),
                         judge=repr(self.options.judge) if self.options.judge else None)
        with self.cache.lock(key):
            hit = self.cache.get(key)
            if hit is not None:
                return relabel(hit, rollout_id=r.rollout_id, group_id=r.group_id,
                               sample_index=r.sample_index, metadata=r.metadata,
                               lookup_s=time.monotonic() - started)
            rec = self._score(prep, r, patch)
            if cancel.requested():  # its sandboxes were removed under it: not a result
                return _cancelled_record(r, sha)
            self.cache.put(key, rec)
            return rec

    def _score(self, prep: PreparedTask, r: Rollout, patch: bytes) -> RewardRecord:
        return self.scorer(prep.task, patch, rollout_id=r.rollout_id, group_id=r.group_id,
                           sample_index=r.sample_index, image=prep.image,
                           sandbox=self.options.sandbox, **r.said(),
                           **({"judge": self.options.judge} if self.options.judge else {}))


def _cancelled_record(r: Rollout, sha: str | None = None) -> RewardRecord:
    """The record of a rollout whose scoring was cancelled (never cached, not retried)."""
    return error_record(rollout_id=r.rollout_id, task=r.task, kind=cancel.CANCELLED,
                        message="scoring cancelled: its requester went away",
                        retryable=False, patch_sha256=sha, group_id=r.group_id,
                        sample_index=r.sample_index)


_DEFAULT: dict[BatchOptions, RolloutScorer] = {}
_DEFAULT_LOCK = threading.Lock()


def shared_rollout_scorer(options: BatchOptions | None = None) -> RolloutScorer:
    """The process-wide :class:`RolloutScorer` for ``options`` (so trainer adapters and the
    HTTP server prepare each task once per process)."""
    options = options or BatchOptions()
    with _DEFAULT_LOCK:
        if options not in _DEFAULT:
            _DEFAULT[options] = RolloutScorer(options)
        return _DEFAULT[options]


# --------------------------------------------------------------------------- executors
