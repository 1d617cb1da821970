"""Open a prepared sandbox for a task and run its public and hidden suites in it.

Shared by the baseline (base repo and reference patch) and the scoring of one patch, so
both measure tests exactly the same way.
"""

from __future__ import annotations

import contextvars
import hashlib
import random
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from proctor import cache_dirs
from proctor.errors import ProctorError, TaskConfigError
from proctor.file_lock import file_lock
from proctor.harness.pipeline import slots
from proctor.harness.pipeline.cancel import Cancelled
from proctor.harness.pipeline.install import INSTALL_TIMEOUT_S, install_repo
from proctor.harness.pipeline.workspace import (
    ApplyResult,
    kill_user_processes,
    place_hidden_tests,
    plan_hidden_tests,
    plan_hidden_upstream,
    prepare_repo,
    repo_archive,
    repo_moved,
    reset_scratch,
    restore_public_tests,
    unplace_hidden_tests,
)
from proctor.patch import parse_patch
from proctor.sandbox import (
    HARNESS_DIR,
    REPO,
    Limits,
    Sandbox,
    SandboxSpec,
    WarmKey,
    docker_can_bind,
    open_sandbox,
    take_warm,
)
from proctor.suites import (
    BYTECODE_MOUNT,
    MUTATION_BYTECODE_MOUNT,
    PASSED,
    VARIANTS,
    Baseline,
    EmbeddedTripwire,
    ReachMap,
    SuiteRun,
    build_bytecode,
    bytecode_dir,
    bytecode_enabled,
    bytecode_key,
    calibrated,
    embed_tripwire,
    install_harness,
    load_or_compute_baseline,
    run_suite,
    store_bytecode,
)
from proctor.task import Task


def open_task_sandbox(task: Task, spec: SandboxSpec) -> Sandbox:
    """A fresh sandbox made as ``spec`` says, holding the repo as a single-commit git repo
    and the harness files. The caller closes it (use ``with``)."""
    return open_patched_sandbox(task, spec, None)[0]


def open_patched_sandbox(task: Task, spec: SandboxSpec, patch: bytes | None, *,
                         timeout: float = 120.0, tree_paths: list[str] | None = None,
                         ) -> tuple[Sandbox, ApplyResult | None]:
    """Like :func:`open_task_sandbox`, with ``patch`` applied (``git apply`` and its
    fallbacks) in the same sandbox command as the copy of the repo (``timeout`` seconds):
    (sandbox, how the patch applied, None without a patch). A patch that does not apply
    leaves the pristine repo (``applied`` False); the caller closes the sandbox either way.
    ``tree_paths``: the same command also runs the post-apply tree report (see
    :func:`~proctor.harness.pipeline.workspace.prepare_repo`). The sandbox is a warm one
    when this process keeps them (:mod:`proctor.sandbox.warm_pool`: made ahead, never used
    before), else made now."""
    harness = harness_mount()
    mounts = {**(harness or {}), **{inside: Path(host) for inside, host in spec.mounts}}
    sb = take_warm(WarmKey.of(spec.backend, spec.env, spec.limits, spec.ttl_s, mounts)) or \
        open_sandbox(spec.backend, spec.env, spec.limits, spec.run_id, spec.ttl_s, mounts)
    try:
        if not harness:  # before the apply command: it may run the tree report
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
    where = cache_dirs.harness_files() / digest.hexdigest()[:32]
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


@dataclass(frozen=True)
class SuiteRequest:
    """How one suite is run: ``timeout`` (seconds for the whole suite), ``changed`` (the
    paths the patch touched; see :func:`~proctor.suites.pytest_runner.run_suite`), ``rng``
    (the run's draws: where the tripwires go; :func:`suite_rng`; default: unpredictable) and
    ``record_reach`` (see :func:`~proctor.suites.pytest_runner.run_suite`: the baseline's
    reach run); a differential run's ``only`` (the test ids to run again; None: every
    test) and ``variant`` (:data:`proctor.suites.variants.VARIANTS` names). ``repo``: where
    the repository is while the suite runs: :data:`~proctor.sandbox.layout.REPO`, or with
    the ``path`` variant a fresh unpredictable directory beside it (the default, "", picks
    one of the two)."""

    timeout: float
    changed: list[str] | None = None
    rng: random.Random | None = None
    record_reach: bool = False
    only: list[str] | None = None
    variant: tuple[str, ...] = ()
    repo: str = ""

    def __post_init__(self) -> None:
        if not self.repo:
            where = f"/work/{secrets.token_hex(6)}" if "path" in self.variant else REPO
            object.__setattr__(self, "repo", where)

    def run_suite_args(self, task: Task) -> dict:
        """The keyword arguments of :func:`~proctor.suites.pytest_runner.run_suite` this
        request and ``task`` give, whichever suite runs."""
        return dict(repo=self.repo, per_test_timeout=task.config.timeouts.per_test,
                    suite_timeout=self.timeout, changed=self.changed, rng=self.rng,
                    pythonpath=task.pythonpath_in(self.repo), record_reach=self.record_reach,
                    only=self.only, variant=self.variant)


def run_public(sb: Sandbox, task: Task, req: SuiteRequest, *,
               restored: bool = False) -> SuiteRun:
    """Restore the pristine public tests, then run them as ``req`` says (rootdir = the
    repo, at ``req.repo``). ``restored``: the caller already put them back, in a command of
    its own that ran nothing of the patch after it (the executor's file checks end with
    it), so the restore is skipped."""
    if not restored:
        restore_public_tests(sb, task)
    with repo_moved(sb, req.repo):
        return run_suite(sb, "public", rootdir=req.repo, targets=task.config.tests.public,
                         **req.run_suite_args(task))


def run_hidden(sb: Sandbox, task: Task, req: SuiteRequest, *, fresh: bool = False) -> SuiteRun:
    """Kill what the earlier steps left running, empty /tmp and HOME, copy the hidden tests
    in now (root-owned, read-only, helper modules under random names, a must-fail tripwire
    hidden among them) and run them. Where: by default a fresh unpredictable directory
    under ``/proctor``, their rootdir; with the task's ``hidden_at_upstream_path``, the
    patched repository at their upstream paths, the repository the rootdir, in directories
    the code under test can neither rename nor add to
    (:func:`~proctor.harness.pipeline.workspace.place_hidden_tests`; the plugin re-checks each
    file's bytes and that each hidden module was imported from its own file), taken out
    again after (:func:`~proctor.harness.pipeline.workspace.unplace_hidden_tests`). The run
    itself as ``req`` says. ``fresh``: nothing of the patch ran in ``sb`` yet (only the copy
    and ``git apply``): nothing to kill, /tmp and HOME are still empty, so those two steps
    are skipped."""
    if not fresh:
        kill_user_processes(sb)
        reset_scratch(sb)
    embedded: list[EmbeddedTripwire | None] = []

    def hide_tripwire(files: dict[str, bytes]) -> dict[str, bytes]:
        files, trip = embed_tripwire(files, req.rng)
        embedded.append(trip)
        return files

    common = req.run_suite_args(task)
    if not task.config.hidden_at_upstream_path:
        hidden, files = plan_hidden_tests(task, hide_tripwire)
        # put with the run's tripwire directory: one sandbox operation for both
        with repo_moved(sb, req.repo):
            return run_suite(sb, "hidden", rootdir=hidden.root, targets=hidden.targets,
                             embedded=embedded[0], also_put={hidden.root: files}, **common)
    hidden, files = plan_hidden_upstream(task, hide_tripwire)
    placed = place_hidden_tests(sb, hidden, files)
    try:
        with repo_moved(sb, req.repo):  # the hidden tests' rootdir is the repository
            run = run_suite(sb, "hidden", rootdir=req.repo, targets=hidden.targets,
                            embedded=embedded[0], confcutdir=req.repo,
                            pristine={f"{req.repo}/{rel}": files[rel] for rel in hidden.files},
                            **common)
    except BaseException:
        unplace_hidden_tests(sb, placed)
        raise
    if run.stray_processes != 0:  # none may add to the directories while they go back
        kill_user_processes(sb)
    unplace_hidden_tests(sb, placed)
    return run


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


def _check_collected(task: Task, run: SuiteRun, state: str) -> None:
    """Every hidden test module collects with the reference patch (or, without one, on the
    base repo): one that cannot would score zero for every patch, silently.

    Raises:
        TaskConfigError: names the modules (paths relative to the run's rootdir) that did
            not collect and the first lines of their errors.
    """
    if run.collection_errors:
        raise TaskConfigError(
            f"{task.root}: hidden tests cannot be collected on {state}: "
            f"{', '.join(sorted(run.collection_errors)[:5])} (see {task.hidden}); the "
            "hidden tests must import and collect once the reference patch is applied")


def install_at_baseline(sb: Sandbox, task: Task, state: str) -> None:
    """``install = true``: pip-install the repo in ``sb`` (``state``: what it holds, "the base
    repo" or "the reference patch"), then kill the sandbox user's processes.

    Raises:
        TaskConfigError: it does not build or install: the task names and pip's last lines.
        InfraError: the sandbox failed.
    """
    res = install_repo(sb, REPO, INSTALL_TIMEOUT_S)
    kill_user_processes(sb)
    if res.ok:
        return
    why = "timed out" if res.timed_out else f"pip exited {res.exit_code}"
    missing = re.search(r"No module named '([\w.]+)'", res.output)
    hint = ("; setuptools before 70.1 builds wheels only with the 'wheel' package: add "
            "'wheel' to the task's requirements" if "invalid command 'bdist_wheel'"
            in res.output else
            f"; the build needs {missing.group(1).split('.')[0]!r}, which the sandbox image "
            "lacks: add it (with its plugins) to the task's requirements" if missing
            else "")
    last = "\n".join(res.output.strip().splitlines()[-15:])
    raise TaskConfigError(
        f"{task.root}: field 'install': {state} does not install ({why}{hint}); "
        f"pip's last lines:\n{last}")


def baseline_runner(task: Task, image: str, limits: Limits = Limits(), backend: str = "docker",
                    mounts: tuple[tuple[str, str], ...] = ()):
    """``(run_suites, record_reach)`` for
    :func:`proctor.suites.baseline.load_or_compute_baseline`.

    ``run_suites(patch, runs)``: one fresh sandbox per patch state (installed first with
    ``install = true``, as the scored runs are), every suite run ``runs`` times in it. The
    base repo's sandbox then runs each suite once more, recording which tests enter which
    functions: the base repo's own code, so nothing untrusted ran there before, and one
    sandbox (with its install) fewer than a sandbox of its own. Each run's draws (where its
    tripwire goes among the tests) come from the task's fingerprint, the state and the
    run's index (:func:`suite_rng`): on a machine that computes the baseline again, every
    run is the same run, and so is the recording, which changes with the tripwire's place
    (the toolz example: three recordings at random places, three different maps).
    ``record_reach()`` returns
    that recording: suite -> :class:`~proctor.suites.reach.ReachMap`, None for a suite whose
    run was not clean (a tampering finding or tripwire, which the base repo's own code
    cannot cause, leaves no map to trust); None before the base repo's runs.

    Raises:
        TaskConfigError: the reference patch does not apply; an empty suite or a run that
            did not collect (:func:`_check_baseline_run`); the repo does not install.
    """
    recorded: dict[str, dict[str, ReachMap | None]] = {}

    def run_suites(patch: bytes | None, runs: int) -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = {"public": [], "hidden": []}
        sb, applied = open_patched_sandbox(task, SandboxSpec(image, backend, limits,
                                                             mounts=mounts), patch)
        with sb:
            if applied is not None and not applied.applied:
                raise TaskConfigError(
                    f"{task.root}/reference.patch does not apply: {applied.output[-500:]}")
            state = "the base repo" if patch is None else "the reference patch"
            if task.config.install:
                install_at_baseline(sb, task, state)
            per_suite = task.config.timeouts.per_suite
            for i in range(runs):
                touched = [] if patch is None else list(parse_patch(
                    patch.decode("utf-8", "replace")).files)
                req = SuiteRequest(per_suite, touched, suite_rng(task.fingerprint, "baseline",
                                                                 state, str(i)))
                for run in (run_public(sb, task, req), run_hidden(sb, task, req)):
                    _check_baseline_run(task, run, state)
                    if run.suite == "hidden" and (patch is not None
                                                  or task.reference_patch is None):
                        _check_collected(task, run, state)
                    out[run.suite].append(run.outcomes)
            if patch is None:
                req = SuiteRequest(per_suite, [], suite_rng(task.fingerprint, "reach"),
                                   record_reach=True)
                traced = (run_public(sb, task, req), run_hidden(sb, task, req))
                recorded["reach"] = {r.suite: None if r.tampered or r.tripwire else r.reach
                                     for r in traced}
        return out

    def record_reach() -> dict[str, ReachMap | None] | None:
        return recorded.get("reach")

    return run_suites, record_reach


def variant_calibrator(task: Task, image: str, limits: Limits = Limits(),
                       backend: str = "docker"):
    """``calibrate(fail_to_pass)`` for :func:`proctor.suites.baseline.load_or_compute_baseline`:
    in a fresh sandbox with the reference patch applied (and installed with ``install =
    true``), each suite's FAIL_TO_PASS tests (which all pass with it) run under every
    variant at once; a suite where some test then does not pass runs them once per variant,
    to name the variants that change it. Returns suite -> variant -> the tests a variant
    made fail (sorted; empty: the variant is used for the suite).

    Raises:
        TaskConfigError: the reference patch does not apply.
    """

    def calibrate(fail_to_pass: dict[str, list[str]]) -> dict[str, dict[str, list[str]]]:
        patch = task.reference_patch.read_bytes()
        touched = list(parse_patch(patch.decode("utf-8", "replace")).files)
        every = tuple(sorted(VARIANTS))
        sb, applied = open_patched_sandbox(task, SandboxSpec(image, backend, limits), patch)
        out: dict[str, dict[str, list[str]]] = {}
        with sb:
            if not applied.applied:
                raise TaskConfigError(
                    f"{task.root}/reference.patch does not apply: {applied.output[-500:]}")
            if task.config.install:
                install_at_baseline(sb, task, "the reference patch")

            def failing(suite: str, variant: tuple[str, ...]) -> list[str]:
                ids = fail_to_pass[suite]
                run = (run_public if suite == "public" else run_hidden)(sb, task, SuiteRequest(
                    task.config.timeouts.per_suite, touched, only=ids, variant=variant))
                # any verdict but a pass drops the variant: a timeout under it too
                return sorted(t for t in ids if run.outcomes.get(t) not in PASSED)

            for suite, ids in fail_to_pass.items():
                if not ids or not failing(suite, every):
                    out[suite] = {v: [] for v in every}
                else:
                    out[suite] = {v: failing(suite, (v,)) for v in every}
        return out

    return calibrate


def task_baseline(task: Task, image: str, image_id: str, limits: Limits = Limits(),  # noqa: PLR0913
                  backend: str = "docker", refresh: bool = False,
                  mounts: tuple[tuple[str, str], ...] = ()) -> Baseline:
    """The task's baseline on the sandbox environment ``image`` (id ``image_id``): cached,
    else computed (:func:`baseline_runner`; its sandboxes with ``mounts``, e.g.
    :func:`task_bytecode`'s, which change no outcome) and cached. The one
    way every caller (scoring, batches, ``proctor task check``) gets it, so each computes
    the same thing.

    Raises:
        TaskConfigError: invalid task or baseline (no FAIL_TO_PASS test, ...).
        InfraError: a baseline sandbox failed.
    """
    run_suites, record_reach = baseline_runner(task, image, limits, backend, mounts)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return load_or_compute_baseline(task, image_id, run_suites, refresh, record_reach,
                                        partial(_alongside, pool))


def _alongside(pool: ThreadPoolExecutor, fn: Callable[[], Any]) -> Future | None:
    """``fn()`` on ``pool``, in a copy of the caller's context (its cancel scope goes
    along), holding a sandbox slot of its own until it returns; None when no slot is free
    at once (the caller then runs ``fn`` in turn, as a score without overlap does)."""
    held = ExitStack()
    try:
        held.enter_context(slots.acquire(timeout=0))
    except slots.SlotTimeout:
        return None

    def run() -> Any:
        with held:
            return fn()

    return pool.submit(contextvars.copy_context().run, run)


def task_bytecode(task: Task, image: str, image_id: str, limits: Limits = Limits(),
                  backend: str = "docker") -> tuple[tuple[str, str], ...]:
    """The mounts of the task's compiled pristine files (:mod:`proctor.suites.bytecode`),
    at the repository's place and at the mutation copy's, for every later sandbox of the
    task on ``image`` (id ``image_id``): cached, else built once in a sandbox of the
    pristine repository with the public tests put back, as a scored sandbox has them.
    ``()`` (each run compiles from source) when turned off, on a backend other than Docker
    or an engine that cannot bind-mount this host's directories, for a repository with
    little Python source (:data:`BYTECODE_MIN_SOURCE`), or when the build failed (tried
    again after :data:`BUILD_RETRY_S`). Never raises but for a cancellation: the tree only
    saves time."""
    if backend != "docker" or not bytecode_enabled():
        return ()
    try:
        key = _bytecode_key(task, image_id)
        if key is None or not docker_can_bind():
            return ()
        where = bytecode_dir(key)
        if not where.is_dir():
            failed = _BYTECODE_FAILED.get(key)
            if failed is not None and time.monotonic() - failed < BUILD_RETRY_S:
                return ()
            with file_lock(where.with_name(f"{key}.lock")):  # one build per key on the host
                if not where.is_dir() and _build_tree(task, image, limits, backend,
                                                      key) is None:
                    _BYTECODE_FAILED[key] = time.monotonic()
                    return ()
    except Cancelled:
        raise
    except (ProctorError, OSError):  # the runs compile from source, as without it
        return ()
    return ((BYTECODE_MOUNT, str(where)), (MUTATION_BYTECODE_MOUNT, str(where)))


def _build_tree(task: Task, image: str, limits: Limits, backend: str, key: str) -> Path | None:
    """Build and store ``key``'s tree (see :func:`task_bytecode`); its directory, or None."""
    with open_task_sandbox(task, SandboxSpec(image, backend, limits)) as sb:
        restore_public_tests(sb, task)
        files = build_bytecode(sb, task.config.tests.public,
                               min(task.config.timeouts.per_suite, BUILD_TIMEOUT_S),
                               _build_pythonpath(task))
    left_out = set(_left_out(task))
    kept = {rel: data for rel, data in (files or {}).items()
            if rel.split(".cpython-")[0] + ".py" not in left_out}
    return store_bytecode(key, kept) if kept else None


def _build_pythonpath(task: Task) -> list[str]:
    """The task's ``pythonpath`` in the build's sandbox (absolute, under the repo)."""
    return [f"{REPO}/{d}" for d in task.config.pythonpath]


def _left_out(task: Task) -> list[str]:
    """Repository paths whose compiled files a tree must not hold: with the hidden tests
    placed at their upstream paths, theirs (a hidden file there must compile from its own
    source, whatever size and time it has)."""
    if not task.config.hidden_at_upstream_path or not task.hidden.is_dir():
        return []
    return sorted(str(p.relative_to(task.hidden)) for p in task.hidden.rglob("*.py"))


#: Most seconds a tree's build may take (the task's ``per_suite`` when less).
BUILD_TIMEOUT_S = 120.0
#: Seconds before a tree whose build failed in this process is tried again.
BUILD_RETRY_S = 600.0
#: Key -> when this process's build of it failed (``time.monotonic``).
_BYTECODE_FAILED: dict[str, float] = {}
#: Bytes of Python source a repository needs for :func:`task_bytecode` to build its tree:
#: compiling less costs each run less than the build's extra sandbox costs once.
BYTECODE_MIN_SOURCE = 64 * 1024


def _bytecode_key(task: Task, image_id: str) -> str | None:
    """:func:`~proctor.suites.bytecode_key` of ``task`` on ``image_id``, or None when its
    repository has less Python source than :data:`BYTECODE_MIN_SOURCE`; memoized per
    task fingerprint."""
    memo = (task.fingerprint, str(task.repo), image_id, tuple(task.config.tests.public))
    if memo not in _BYTECODE_KEYS:
        source = sum(p.stat().st_size for p in task.repo.rglob("*.py") if p.is_file())
        _BYTECODE_KEYS[memo] = None if source < BYTECODE_MIN_SOURCE else bytecode_key(
            repo_archive(task), image_id, task.config.tests.public, _left_out(task),
            _build_pythonpath(task))
    return _BYTECODE_KEYS[memo]


_BYTECODE_KEYS: dict[tuple, str | None] = {}


def calibrate_task(task: Task, baseline: Baseline, image: str, limits: Limits = Limits(),
                   backend: str = "docker") -> Baseline:
    """``baseline`` with the differential runs' calibration (:func:`variant_calibrator`,
    cached with it; :func:`proctor.suites.baseline.calibrated`).

    Raises:
        TaskConfigError: the reference patch does not apply.
        InfraError: a calibration sandbox failed.
    """
    return calibrated(task, baseline, variant_calibrator(task, image, limits, backend))
