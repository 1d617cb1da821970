"""Open a prepared sandbox for a task and run its public and hidden suites in it.

Shared by the baseline (base repo and reference patch) and the scoring of one patch, so
both measure tests exactly the same way.
"""

from __future__ import annotations

from proctor.errors import TaskConfigError
from proctor.harness.integrity import parse_patch
from proctor.harness.task import Task
from proctor.harness.workspace import (
    REPO,
    apply_patch,
    kill_user_processes,
    place_hidden_tests,
    prepare_repo,
    reset_scratch,
    restore_public_tests,
)
from proctor.sandbox.backends import open_sandbox
from proctor.sandbox.base import Limits, Sandbox
from proctor.suites.pytest_runner import SuiteRun, install_harness, run_suite
from proctor.suites.tripwires import EmbeddedTripwire, embed_tripwire


def open_task_sandbox(task: Task, image: str, limits: Limits = Limits(),
                      run_id: str | None = None, *, backend: str = "docker",
                      ttl_s: float = 3600.0) -> Sandbox:
    """A fresh sandbox of ``backend`` (from ``image``: the environment
    :func:`proctor.sandbox.backends.resolve_env` gave) holding the repo as a single-commit
    git repo and the harness files. The caller closes it (use ``with``)."""
    sb = open_sandbox(backend, image, limits, run_id, ttl_s)
    try:
        prepare_repo(sb, task)
        install_harness(sb)
    except BaseException:
        sb.close()
        raise
    return sb


def run_public(sb: Sandbox, task: Task, timeout: float,
               changed: list[str] | None = None) -> SuiteRun:
    """Restore the pristine public tests, then run them (rootdir = the repo). ``changed``:
    the paths the patch touched (see :func:`~proctor.suites.pytest_runner.run_suite`)."""
    restore_public_tests(sb, task)
    return run_suite(sb, "public", rootdir=REPO, repo=REPO, targets=task.config.tests.public,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout,
                     changed=changed)


def run_hidden(sb: Sandbox, task: Task, timeout: float,
               changed: list[str] | None = None) -> SuiteRun:
    """Kill what the earlier steps left running, empty /tmp and HOME, copy the hidden tests
    in now (read-only, to an unpredictable dir, helper modules under random names, a must-fail
    tripwire hidden among them) and run them there."""
    kill_user_processes(sb)
    reset_scratch(sb)
    embedded: list[EmbeddedTripwire | None] = []

    def hide_tripwire(files: dict[str, bytes]) -> dict[str, bytes]:
        files, trip = embed_tripwire(files)
        embedded.append(trip)
        return files

    hidden = place_hidden_tests(sb, task, hide_tripwire)
    return run_suite(sb, "hidden", rootdir=hidden.root, repo=REPO, targets=hidden.targets,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout,
                     embedded=embedded[0], changed=changed)


def baseline_runner(task: Task, image: str, limits: Limits = Limits(), backend: str = "docker"):
    """``run_suites(patch, runs)`` for :func:`proctor.suites.baseline.load_or_compute_baseline`:
    one fresh sandbox per patch state, every suite run ``runs`` times in it.

    Raises:
        TaskConfigError: the reference patch does not apply.
    """

    def run_suites(patch: bytes | None, runs: int) -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = {"public": [], "hidden": []}
        with open_task_sandbox(task, image, limits, backend=backend) as sb:
            if patch is not None:
                applied = apply_patch(sb, patch)
                if not applied.applied:
                    raise TaskConfigError(
                        f"{task.root}/reference.patch does not apply: {applied.output[-500:]}")
            for _ in range(runs):
                touched = [] if patch is None else list(parse_patch(
                    patch.decode("utf-8", "replace")).files)
                out["public"].append(run_public(sb, task, task.config.timeouts.per_suite,
                                                touched).outcomes)
                out["hidden"].append(run_hidden(sb, task, task.config.timeouts.per_suite,
                                                touched).outcomes)
        return out

    return run_suites
