"""Open a prepared sandbox for a task and run its public and hidden suites in it.

Shared by the baseline (base repo and reference patch) and the scoring of one patch, so
both measure tests exactly the same way.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
from pathlib import Path

from proctor.errors import TaskConfigError
from proctor.harness.integrity import parse_patch
from proctor.harness.task import Task
from proctor.harness.workspace import (
    REPO,
    ApplyResult,
    kill_user_processes,
    plan_hidden_tests,
    prepare_repo,
    reset_scratch,
    restore_public_tests,
)
from proctor.sandbox.backends import open_sandbox
from proctor.sandbox.base import Limits, Sandbox
from proctor.suites.baseline import cache_dir
from proctor.suites.pytest_runner import HARNESS_DIR, SuiteRun, install_harness, run_suite
from proctor.suites.tripwires import EmbeddedTripwire, embed_tripwire


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
                         timeout: float = 120.0, tree_paths: list[str] | None = None,
                         ) -> tuple[Sandbox, ApplyResult | None]:
    """Like :func:`open_task_sandbox`, with ``patch`` applied (``git apply`` and its
    fallbacks) in the same sandbox command as the copy of the repo: (sandbox, how the
    patch applied, None without a patch). A patch that does not apply leaves the pristine
    repo (``applied`` False); the caller closes the sandbox either way. ``tree_paths``:
    the same command also runs the post-apply tree report (see
    :func:`~proctor.harness.workspace.prepare_repo`)."""
    mounts = harness_mount()
    sb = open_sandbox(backend, image, limits, run_id, ttl_s, mounts)
    try:
        if not mounts:  # before the apply command: it may run the tree report
            install_harness(sb)
        applied = prepare_repo(sb, task, timeout, patch, tree_paths)
    except BaseException:
        sb.close()
        raise
    return sb, applied


class _PutRecorder:
    """Stands in for a sandbox to record what :func:`install_harness` puts."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, dict[str, bytes], bool]] = []

    def put_files(self, dest_dir: str, files: dict[str, bytes], *,
                  read_only: bool = False) -> None:
        self.puts.append((dest_dir, dict(files), read_only))


def harness_mount() -> dict[str, Path] | None:
    """``{HARNESS_DIR: host dir}``: a host copy of exactly the files
    :func:`install_harness` puts (recorded from it), for the sandbox to show read-only from
    its creation on, instead of one copy command per sandbox. The directory is named by
    the files' sha256 under ``$PROCTOR_CACHE_DIR/harness`` (files 0444, directory 0555),
    written once, atomically. None (copy as before) when ``install_harness`` does anything
    but put read-only files into ``HARNESS_DIR`` or the directory cannot be written."""
    rec = _PutRecorder()
    try:
        install_harness(rec)
    except AttributeError:  # it used another sandbox method: not a plain copy any more
        return None
    if len(rec.puts) != 1 or rec.puts[0][0] != HARNESS_DIR or not rec.puts[0][2]:
        return None
    files = rec.puts[0][1]
    if any("/" in name or name in ("", ".", "..") for name in files):
        return None
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    where = cache_dir() / "harness" / digest.hexdigest()[:32]
    try:
        if not where.is_dir():
            _write_read_only_dir(where, files)
    except OSError:
        return None
    return {HARNESS_DIR: where}


def _write_read_only_dir(where: Path, files: dict[str, bytes]) -> None:
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=where.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
            (tmp / name).chmod(0o444)
        try:
            tmp.rename(where)
            where.chmod(0o555)
            return
        except OSError:
            if not where.is_dir():  # not a lost race with another process
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)  # lost a race: the other copy is the same


def suite_rng(*parts: str) -> random.Random:
    """A random generator seeded from ``parts`` (e.g. the patch's sha256, the task
    fingerprint and the suite name): the harness's draws that can change a run (where a
    tripwire goes) are the same for the same patch every time, and unknowable to a patch,
    which never sees the hidden tests the fingerprint covers."""
    seed = hashlib.sha256("\0".join(parts).encode()).digest()
    return random.Random(int.from_bytes(seed[:16], "big"))


def run_public(sb: Sandbox, task: Task, timeout: float,
               changed: list[str] | None = None, *, restored: bool = False,
               rng: random.Random | None = None) -> SuiteRun:
    """Restore the pristine public tests, then run them (rootdir = the repo). ``changed``:
    the paths the patch touched (see :func:`~proctor.suites.pytest_runner.run_suite`).
    ``rng``: the run's draws (:func:`suite_rng`; default: unpredictable).
    ``restored``: the caller already put them back, in a command of its own that ran
    nothing of the patch after it (the executor's file checks end with it), so the
    restore is skipped."""
    if not restored:
        restore_public_tests(sb, task)
    return run_suite(sb, "public", rootdir=REPO, repo=REPO, targets=task.config.tests.public,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout,
                     changed=changed, rng=rng)


def run_hidden(sb: Sandbox, task: Task, timeout: float,
               changed: list[str] | None = None, *, fresh: bool = False,
               rng: random.Random | None = None) -> SuiteRun:
    """Kill what the earlier steps left running, empty /tmp and HOME, copy the hidden tests
    in now (read-only, to an unpredictable dir, helper modules under random names, a must-fail
    tripwire hidden among them) and run them there. ``changed``: the paths the patch touched
    (see :func:`~proctor.suites.pytest_runner.run_suite`). ``fresh``: nothing of the patch
    ran in ``sb`` yet (only the copy and ``git apply``): nothing to kill, /tmp and HOME are
    still empty, so those two steps are skipped. ``rng``: the run's draws (where the
    tripwires go: :func:`suite_rng`; default: unpredictable)."""
    if not fresh:
        kill_user_processes(sb)
        reset_scratch(sb)
    embedded: list[EmbeddedTripwire | None] = []

    def hide_tripwire(files: dict[str, bytes]) -> dict[str, bytes]:
        files, trip = embed_tripwire(files, rng)
        embedded.append(trip)
        return files

    hidden, files = plan_hidden_tests(task, hide_tripwire)
    # put with the run's tripwire directory: one sandbox operation for both
    return run_suite(sb, "hidden", rootdir=hidden.root, repo=REPO, targets=hidden.targets,
                     per_test_timeout=task.config.timeouts.per_test, suite_timeout=timeout,
                     embedded=embedded[0], changed=changed, also_put={hidden.root: files},
                     rng=rng)


def _check_baseline_run(task: Task, run: SuiteRun, state: str) -> None:
    """Code the task itself ships cannot be tampering: a finding on the base repo or the
    reference patch means the harness and the project do not fit (a conftest that filters
    every item it does not know, say), which no patch could then be fairly scored against.

    Raises:
        TaskConfigError: the run was judged tampered with or its tripwire flipped.
    """
    why = run.tripwire or "; ".join(run.tampered[:3])
    if why:
        raise TaskConfigError(
            f"{task.root}: the {run.suite} suite on {state} looks tampered with to the "
            f"harness ({why}); the task's own code must not trip the runner's checks")


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
            state = "the base repo" if patch is None else "the reference patch"
            for _ in range(runs):
                touched = [] if patch is None else list(parse_patch(
                    patch.decode("utf-8", "replace")).files)
                for run in (run_public(sb, task, task.config.timeouts.per_suite, touched),
                            run_hidden(sb, task, task.config.timeouts.per_suite, touched)):
                    _check_baseline_run(task, run, state)
                    out[run.suite].append(run.outcomes)
        return out

    return run_suites
