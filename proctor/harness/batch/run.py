"""Batch scoring: many rollouts, parallel workers, one baseline per task, a result cache,
retries of infrastructure errors. The library behind ``proctor batch`` and the trainers.

Per rollout (:class:`RolloutScorer`, the same code in every executor)::

    prepare the task once per process   load, resolve the image, baseline (file-locked:
                                        no two workers on the host compute the same one)
    result cache lookup                 (patch sha256, task fingerprint, image, version)
    proctor.score                       the pipeline of design.md section 2
    retry                               infrastructure errors only, then kind ``blocked``

Executors (one interface, :func:`iter_batch`): ``local`` (a thread pool: the work happens in
containers, the host threads mostly wait on Docker) and ``ray`` (one Ray task per group, see
:mod:`proctor.harness.batch.ray_executor`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from proctor.harness.batch.options import BatchOptions, check_options
from proctor.harness.batch.retry import RetryPolicy
from proctor.harness.batch.rollout import (
    RolloutScorer,
)
from proctor.harness.batch.rollout_io import (
    BatchItem,
    Rollout,
    bad_input_record,
    item_from_obj,
)
from proctor.harness.pipeline.score import score
from proctor.record import RewardRecord
from proctor.sandbox import warm_sandboxes
from proctor.task import Task


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
        from proctor.harness.batch.ray_executor import run_on_ray

        yield from run_on_ray(good, options)
    else:
        yield from _run_local(good, options, rollout_scorer or RolloutScorer(options))


def _run_local(items: list[BatchItem], options: BatchOptions,
               rs: RolloutScorer) -> Iterator[tuple[int, RewardRecord]]:
    """Thread pool of ``options.n_workers``; each task is prepared by the first rollout
    that needs it while the others of that task wait (see :class:`TaskPreparer`). Warm
    sandboxes (``options.n_warm``) are made ahead while it runs, and closed at its end."""
    pool = ThreadPoolExecutor(max_workers=options.n_workers, thread_name_prefix="proctor")
    with warm_sandboxes(options.n_warm(len(items))):  # what waits is closed at the end
        try:
            futures = {pool.submit(contextvars.copy_context().run, rs.score_item, it): it.index
                       for it in items}  # each in the caller's context (its cancel scope)
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:  # on early exit (Ctrl-C, a consumer error) drop what has not started
            pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- public API


def score_batch(rollouts: Iterable[Rollout | dict], *, workers: int | None = None,  # noqa: PLR0913
                executor: str = "local", sandbox: str = "docker", image: str | None = None,
                cache: bool = True, retries: int = 3,
                on_record: Callable[[RewardRecord], None] | None = None,
                overlap: bool | None = None, warm: int | None = None) -> list[RewardRecord]:
    """Score many rollouts; returns one record per input, **in input order**.

    Args:
        rollouts: :class:`Rollout` objects or dicts with the JSONL fields (``task``,
            ``patch`` or ``patch_file``, ``rollout_id``, optional ``group_id``,
            ``sample_index``, ``message``, ``metadata``). An invalid one becomes an
            ``error`` record of kind ``bad_input`` naming its position.
        workers: concurrent rollouts (default: cores). ``executor``: ``local`` or ``ray``.
        cache: reuse results of identical patches (see :mod:`proctor.harness.batch.result_cache`).
        retries: extra attempts for infrastructure errors, then kind ``blocked``.
        on_record: called with each record as it finishes (completion order).
        overlap: each rollout's two sandboxes side by side (see :func:`proctor.score`);
            None: when ``workers`` is below the number of cores (see :class:`BatchOptions`).
        warm: sandboxes made ahead and kept waiting during the batch (0: none; None: two
            per worker while there are fewer workers than cores; :meth:`BatchOptions.n_warm`).

    Raises:
        BatchConfigError: unknown executor or sandbox backend, or Ray not installed.
    """
    items = [item_from_obj(i, r) for i, r in enumerate(rollouts)]
    options = BatchOptions(workers=workers, executor=executor, sandbox=sandbox, image=image,
                           cache=cache, retry=RetryPolicy(retries=retries), overlap=overlap,
                           warm=warm)
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
