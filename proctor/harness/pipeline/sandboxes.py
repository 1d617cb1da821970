"""The two sandboxes of one score, behind one context manager.

The first sandbox gets the apply, the tamper checks, the file checks and the public suite;
the second (same patch, fresh; nothing the public run started or wrote reaches it) the
hidden suite, mutation and the benchmark. With ``overlap`` the second is made at once,
alongside the first, when a second sandbox slot is free at once (else the two run one
after the other); a sandbox made but never taken (an early end, an error on the way) is
closed on the way out, as is every sandbox opened here, whatever way the score ends.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

from proctor.errors import InfraError
from proctor.harness.pipeline import cancel, slots
from proctor.harness.pipeline.deadline import Deadline
from proctor.harness.pipeline.measure import STEP_TIMEOUT_S, NoTime, harness_budget
from proctor.harness.pipeline.suites_in_sandbox import open_patched_sandbox
from proctor.harness.pipeline.workspace import ApplyResult
from proctor.sandbox import Limits, Sandbox, SandboxSpec
from proctor.suites import Baseline
from proctor.task import Task


@dataclass(frozen=True)
class Env:
    """Where the sandboxes run: the backend, the environment (image tag and digest, or
    None for backends without images), the task's baseline in it and the limits."""

    backend: str
    tag: str | None
    image_id: str | None
    baseline: Baseline
    limits: Limits
    #: read-only mounts of every sandbox (the task's compiled files: ``task_bytecode``)
    mounts: tuple[tuple[str, str], ...] = ()

    def spec(self, task: Task, rollout_id: str) -> SandboxSpec:
        """How each sandbox of ``rollout_id``'s score is made: labelled with the rollout id,
        expiring (for the sweeper) 300 s after the task's per-patch deadline."""
        ttl = task.config.timeouts.per_patch + 300  # expiry: deadline + teardown slack
        return SandboxSpec(self.tag, self.backend, self.limits, rollout_id, ttl, self.mounts)


class SandboxPair:
    """``with SandboxPair(task, spec, data, deadline, overlap) as pair:`` then
    :meth:`submit` host work, :meth:`start_second`, :meth:`open_first`, and (without
    overlap) :meth:`open_second_now`; :attr:`second` is the future of the second sandbox
    (``(sandbox, ApplyResult)``) and :attr:`taken` lists it once its steps took it. Both
    sandboxes are made as ``spec`` says, with ``task``'s repository and the patch ``data``
    applied, within ``deadline``."""

    def __init__(self, task: Task, spec: SandboxSpec, data: bytes, deadline: Deadline,
                 overlap: bool) -> None:
        self.task, self.spec, self.data = task, spec, data
        self.deadline, self.overlap = deadline, overlap
        self.second: Future | None = None
        self.taken: list = []
        self._stack = ExitStack()
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> SandboxPair:
        stack = self._stack.__enter__()
        try:
            if self.overlap:  # a second sandbox alive at once: only with a second slot free now
                try:
                    stack.enter_context(slots.acquire(timeout=0))
                except slots.SlotTimeout:
                    self.overlap = False
            self._pool = stack.enter_context(ThreadPoolExecutor(max_workers=3))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        return self._stack.__exit__(*exc)

    def submit(self, fn: Callable, *args) -> Future:
        """``fn(*args)`` on the pair's pool, in a copy of the caller's context (its cancel
        scope goes along)."""
        assert self._pool is not None, "use SandboxPair as a context manager"
        return self._pool.submit(contextvars.copy_context().run, fn, *args)

    def open(self, tree_paths: list[str] | None = None) -> tuple[Sandbox, ApplyResult]:
        """A fresh sandbox with the repository and the patch applied (and, with
        ``tree_paths``, the post-apply tree report), adopted by the cancel scope.

        Raises:
            NoTime: the deadline left too little time, and the patch's code used it.
            InfraError: the sandbox failed, or the harness used the time.
        """
        deadline = self.deadline
        given = harness_budget(deadline, "sandbox creation", STEP_TIMEOUT_S)
        try:
            opened = open_patched_sandbox(self.task, self.spec, self.data, timeout=given,
                                          tree_paths=tree_paths)
            cancel.adopt(opened[0])  # removed at once if the requester went away
            return opened
        except InfraError as exc:  # the copy and apply ran out of what the deadline left?
            if (isinstance(exc, NoTime) or deadline.can_start()
                    or not deadline.capped(STEP_TIMEOUT_S, given)):
                raise
            raise NoTime(deadline.ran_out("sandbox creation", cut=True)) from exc

    def start_second(self) -> None:
        """With ``overlap``: make the second sandbox now, alongside the first."""
        if self.overlap:
            self._second_future()

    def open_second_now(self) -> Future:
        """Without ``overlap``: make the second sandbox now (the first is closed)."""
        return self._second_future()

    def open_first(self, tree_paths: list[str]) -> tuple[Sandbox, ApplyResult]:
        """The first sandbox (closed on the way out unless closed before)."""
        sb, applied = self.open(tree_paths)
        self._stack.callback(sb.close)
        return sb, applied

    def _second_future(self) -> Future:
        self.second = self.submit(self.open)
        self._stack.callback(_close_unused, self.second, self.taken)
        return self.second


def _close_unused(future: Future, taken: list) -> None:
    """Close the prepared sandbox unless the pipeline took it (an early return or an error
    on the way leaves it unused)."""
    if taken:
        return
    try:
        sb, _ = future.result()
    except BaseException:  # noqa: BLE001 - it closed itself; the first error is the one raised
        return
    sb.close()
