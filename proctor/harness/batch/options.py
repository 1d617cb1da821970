"""How a batch runs (:class:`BatchOptions`) and the error for a misconfigured one.
Checked before anything runs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from proctor.errors import ProctorError
from proctor.harness.batch.retry import RetryPolicy
from proctor.harness.judge import Judge

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
    second sandbox of patches that end early (2 workers on 2 cores: 53.5 vs 56.8).
    ``judge``: a judge that may only veto, called for every rollout whose gate is not FAIL
    (:mod:`proctor.harness.judge`); the result cache keys on it. ``warm``: sandboxes made
    ahead and kept waiting during the batch (:meth:`n_warm`; 0: none)."""

    workers: int | None = None
    executor: str = "local"
    sandbox: str = "docker"
    image: str | None = None
    cache: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    overlap: bool | None = None
    judge: Judge | None = None
    warm: int | None = None

    def n_warm(self, rollouts: int) -> int:
        """Sandboxes kept waiting per kind while the local executor scores ``rollouts``
        (:mod:`proctor.sandbox.warm_pool`): ``warm`` when set; else, while there are fewer
        workers than cores, two a worker (a rollout opens two), but no more than the
        rollouts after the workers' first ones can use. With a worker per core, none: the
        cores are busy, and a sandbox made ahead takes the CPU its rollout's neighbours
        need (2 workers on 2 cores: 43.5 rollouts/min with them, 45.2 without; 1 worker:
        30.0 with, 27.7 without; ``bench/batch.py --n 24``)."""
        if self.warm is not None:
            return max(0, self.warm)
        if self.n_workers >= (os.cpu_count() or 1):
            return 0
        return 2 * min(self.n_workers, max(0, rollouts - self.n_workers))

    @property
    def n_workers(self) -> int:
        """``workers``, or the number of cores when unset; at least 1."""
        return max(1, self.workers or os.cpu_count() or 1)

    @property
    def overlapped(self) -> bool:
        """Whether rollouts run with ``overlap`` (None: fewer workers than cores)."""
        if self.overlap is not None:
            return self.overlap
        return self.n_workers < (os.cpu_count() or 1)


def check_options(options: BatchOptions) -> None:
    """Raise :class:`BatchConfigError` for an unknown executor or sandbox backend."""
    from proctor.sandbox import BACKENDS

    if options.executor not in EXECUTORS:
        raise BatchConfigError(f"unknown executor {options.executor!r}; choose one of "
                               f"{', '.join(EXECUTORS)}")
    if options.sandbox not in BACKENDS:
        raise BatchConfigError(f"unknown sandbox backend {options.sandbox!r}; choose one of "
                               f"{', '.join(sorted(BACKENDS))}")
