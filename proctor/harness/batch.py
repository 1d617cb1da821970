"""Batch scoring: many rollouts, parallel workers, one baseline per task, a result cache,
retries of infrastructure errors. The library behind ``proctor batch`` and the trainers.

Per rollout (:class:`RolloutScorer`, the same code in every executor)::

    prepare the task once per process   load, resolve the image, baseline (file-locked:
                                        no two workers on the host compute the same one)
    result cache lookup                 (patch sha256, task fingerprint, image, version)
    proctor.score                       the pipeline of DESIGN section 2
    retry                               infrastructure errors only, then kind ``blocked``

Executors (one interface, :func:`iter_batch`): ``local`` (a thread pool: the work happens in
containers, the host threads mostly wait on Docker) and ``ray`` (one Ray task per group, see
:mod:`proctor.harness.ray_executor`).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from proctor.errors import ProctorError, TaskConfigError
from proctor.harness import cancel, slots
from proctor.harness.executor import score
from proctor.harness.result_cache import ResultCache, relabel, result_key
from proctor.harness.retry import RetryPolicy, with_retries
from proctor.harness.rollout_io import (
    BAD_INPUT,
    BatchItem,
    Rollout,
    bad_input_record,
    error_record,
    item_from_obj,
)
from proctor.harness.task import Task, load_task
from proctor.record import RewardRecord

EXECUTORS = ("local", "ray")


class BatchConfigError(ProctorError):
    """The batch itself is misconfigured (unknown executor or sandbox backend, Ray missing).
    Raised before anything runs; exit code 2 on the CLI."""

    kind = "batch_config"


@dataclass(frozen=True)
class BatchOptions:
    """How to run a batch. ``workers``: concurrent rollouts (containers) per host, default
    the number of cores; ``image``: sandbox image tag (default: the built one); ``cache``:
    use the result cache; ``retry``: policy for infrastructure errors; ``overlap``: each
    rollout's two sandboxes work side by side (see :func:`proctor.score`); None (auto):
    only when there are fewer workers than cores. Parallelism then comes from within a
    rollout, which fills cores the workers leave idle (1 worker on 2 cores: 54.7 vs 39.0
    rollouts/min); with a worker per core it only adds contention and the speculative
    second sandbox of patches that end early (2 workers on 2 cores: 53.5 vs 56.8)."""

    workers: int | None = None
    executor: str = "local"
    sandbox: str = "docker"
    image: str | None = None
    cache: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    overlap: bool | None = None

    @property
    def n_workers(self) -> int:
        return max(1, self.workers or os.cpu_count() or 1)

    @property
    def overlapped(self) -> bool:
        """Whether rollouts run with ``overlap`` (None: fewer workers than cores)."""
        if self.overlap is not None:
            return self.overlap
        return self.n_workers < (os.cpu_count() or 1)


# --------------------------------------------------------------------------- sandbox choice


def check_options(options: BatchOptions) -> None:
    """Raise :class:`BatchConfigError` for an unknown executor or sandbox backend."""
    from proctor.sandbox.base import BACKENDS

    if options.executor not in EXECUTORS:
        raise BatchConfigError(f"unknown executor {options.executor!r}; choose one of "
                               f"{', '.join(EXECUTORS)}")
    if options.sandbox not in BACKENDS:
        raise BatchConfigError(f"unknown sandbox backend {options.sandbox!r}; choose one of "
                               f"{', '.join(sorted(BACKENDS))}")


# --------------------------------------------------------------------------- tasks


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
    from proctor.harness.suites_in_sandbox import task_baseline
    from proctor.sandbox.backends import resolve_env

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
                         sandbox=self.options.sandbox)
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
                           sandbox=self.options.sandbox)


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


def iter_batch(items: list[BatchItem], options: BatchOptions | None = None, *,
               rollout_scorer: RolloutScorer | None = None
               ) -> Iterator[tuple[int, RewardRecord]]:
    """Score ``items``; yields ``(item.index, record)`` as each finishes (completion order).
    Bad input is yielded first, at once.

    Raises:
        BatchConfigError: unknown executor or sandbox (before anything runs).
    """
    options = options or BatchOptions()
    check_options(options)
    good = []
    for it in items:
        if it.rollout is None:
            yield it.index, bad_input_record(it)
        else:
            good.append(it)
    if not good:
        return
    if options.executor == "ray":
        from proctor.harness.ray_executor import run_on_ray

        yield from run_on_ray(good, options)
    else:
        yield from _run_local(good, options, rollout_scorer or RolloutScorer(options))


def _run_local(items: list[BatchItem], options: BatchOptions,
               rs: RolloutScorer) -> Iterator[tuple[int, RewardRecord]]:
    """Thread pool of ``options.n_workers``; each task is prepared by the first rollout
    that needs it while the others of that task wait (see :class:`TaskPreparer`)."""
    pool = ThreadPoolExecutor(max_workers=options.n_workers, thread_name_prefix="proctor")
    try:
        futures = {pool.submit(contextvars.copy_context().run, rs.score_item, it): it.index
                   for it in items}  # each in the caller's context (its cancel scope)
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    finally:  # on early exit (Ctrl-C, a consumer error) drop what has not started
        pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- public API


def score_batch(rollouts: Iterable[Rollout | dict], *, workers: int | None = None,
                executor: str = "local", sandbox: str = "docker", image: str | None = None,
                cache: bool = True, retries: int = 3,
                on_record: Callable[[RewardRecord], None] | None = None,
                overlap: bool | None = None) -> list[RewardRecord]:
    """Score many rollouts; returns one record per input, **in input order**.

    Args:
        rollouts: :class:`Rollout` objects or dicts with the JSONL fields (``task``,
            ``patch`` or ``patch_file``, ``rollout_id``, optional ``group_id``,
            ``sample_index``, ``message``, ``metadata``). An invalid one becomes an
            ``error`` record of kind ``bad_input`` naming its position.
        workers: concurrent rollouts (default: cores). ``executor``: ``local`` or ``ray``.
        cache: reuse results of identical patches (see :mod:`proctor.harness.result_cache`).
        retries: extra attempts for infrastructure errors, then kind ``blocked``.
        on_record: called with each record as it finishes (completion order).
        overlap: each rollout's two sandboxes side by side (see :func:`proctor.score`);
            None: when ``workers`` is below the number of cores (see :class:`BatchOptions`).

    Raises:
        BatchConfigError: unknown executor or sandbox backend, or Ray not installed.
    """
    items = [item_from_obj(i, r) for i, r in enumerate(rollouts)]
    options = BatchOptions(workers=workers, executor=executor, sandbox=sandbox, image=image,
                           cache=cache, retry=RetryPolicy(retries=retries), overlap=overlap)
    out: list[RewardRecord | None] = [None] * len(items)
    for index, rec in iter_batch(items, options):
        out[index] = rec
        if on_record is not None:
            on_record(rec)
    return out  # type: ignore[return-value]


async def ascore(task: Task | str | Path, patch: bytes | str, **options) -> RewardRecord:
    """``await`` form of :func:`proctor.score` (same arguments, same record); runs in a
    worker thread so the event loop keeps serving while the container works."""
    return await asyncio.to_thread(score, task, patch, **options)
