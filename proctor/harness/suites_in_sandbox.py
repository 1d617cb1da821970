"""Open a prepared sandbox for a task and run its public and hidden suites in it.

Shared by the baseline (base repo and reference patch) and the scoring of one patch, so
both measure tests exactly the same way.
"""

from __future__ import annotations

from proctor.errors import TaskConfigError
from proctor.harness.task import Task
from proctor.harness.workspace import (
    REPO,
    ApplyResult,
    kill_user_processes,
    place_hidden_tests,
    prepare_repo,
    reset_scratch,
    restore_public_tests,
)
from proctor.sandbox.backends import open_sandbox
from proctor.sandbox.base import Limits, Sandbox
from proctor.suites.pytest_runner import SuiteRun, install_harness, run_suite


def open_task_sandbox(task: Task, image: str, limits: Limits = Limits(),
                      run_id: str | None = None, *, backend: str = "docker",
                      ttl_s: float = 3600.0) -> Sandbox:
    """A fresh sandbox of ``backend`` (from ``image``: the environment
    :func:`proctor.sandbox.backends.resolve_env` gave) holding the repo as a single-commit
    git repo and the harness files. The caller closes it (use ``with``)."""
    return open_patched_sandbox(task, image, None, limits, run_id, backend=backend,
                                ttl_s=ttl_s)[0]


def open_patched_sandbox(task: Task, image: str, patch: bytes | None,
                         limits: Limits = Limits(), run_id: str | None = None, *,
                         backend: str = "docker", ttl_s: float = 3600.0,
                         timeout: float = 120.0) -> tuple[Sandbox, ApplyResult | None]:
    """Like :func:`open_task_sandbox`, with ``patch`` applied (``git apply`` and its
    fallbacks) in the same sandbox command as the copy of the repo: (sandbox, how the
    patch applied, None without a patch). A patch that does not apply leaves the pristine
    repo (``applied`` False); the caller closes the sandbox either way."""
    sb = open_sandbox(backend, image, limits, run_id, ttl_s)
    try:
        applied = prepare_repo(sb, task, timeout, patch)
        install_harness(sb)
    except BaseException:
        sb.close()
        raise
    return sb, applied


def run_public(sb: Sandbox, task: Task, timeout: float) -> SuiteRun:
    """Restore the pristine public tests, then run them (rootdir = the repo)."""
    restore_public_tests(sb, task)
    return run_suite(sb, "public", rootdir=REPO, repo=REPO, targets=task.config.tests.public,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout)


def run_hidden(sb: Sandbox, task: Task, timeout: float, *, fresh: bool = False) -> SuiteRun:
    """Kill what the earlier steps left running, empty /tmp and HOME, copy the hidden tests
    in now (read-only, to an unpredictable dir) and run them there. ``fresh``: nothing of
    the patch ran in ``sb`` yet (only the copy and ``git apply``): nothing to kill, /tmp and
    HOME are still empty, so those two steps are skipped."""
    if not fresh:
        kill_user_processes(sb)
        reset_scratch(sb)
    root = place_hidden_tests(sb, task)
    return run_suite(sb, "hidden", rootdir=root, repo=REPO, targets=task.hidden_files,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout)


def baseline_runner(task: Task, image: str, limits: Limits = Limits(), backend: str = "docker"):
    """``run_suites(patch, runs)`` for :func:`proctor.suites.baseline.load_or_compute_baseline`:
    one fresh sandbox per patch state, every suite run ``runs`` times in it.

    Raises:
        TaskConfigError: the reference patch does not apply.
    """

    def run_suites(patch: bytes | None, runs: int) -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = {"public": [], "hidden": []}
        sb, applied = open_patched_sandbox(task, image, patch, limits, backend=backend)
        with sb:
            if applied is not None and not applied.applied:
                raise TaskConfigError(
                    f"{task.root}/reference.patch does not apply: {applied.output[-500:]}")
            for _ in range(runs):
                out["public"].append(run_public(sb, task, task.config.timeouts.per_suite).outcomes)
                out["hidden"].append(run_hidden(sb, task, task.config.timeouts.per_suite).outcomes)
        return out

    return run_suites
