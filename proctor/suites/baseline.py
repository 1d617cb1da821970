"""Baseline: per-test outcomes of the unpatched repo (several runs, to find flaky tests) and
of the reference patch, classified into FAIL_TO_PASS / PASS_TO_PASS / quarantined
(design.md section 1), cached on disk by content hash.

:func:`classify` is pure; :func:`load_or_compute_baseline` does the I/O.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from proctor import cache_dirs
from proctor.errors import TaskConfigError
from proctor.file_lock import file_lock
from proctor.record import SuiteTests
from proctor.suites.pytest_runner import harness_digest
from proctor.suites.reach import ReachMap
from proctor.task import Task
from proctor.version import __version__

SUITES = ("public", "hidden")
#: Why a test that fails on the base repo and with the reference patch is quarantined.
STILL_FAILING = "fails with the reference patch too"
#: Bumped whenever classification or the stored shape changes: part of the cache key.
#: "4": a suite goes on after a hung or fatal test in new sessions, a module that fails to
#: collect fails alone, and a failed subtest fails its test. "5": the reach maps. "6": the
#: differential runs' calibration. "7": the embedded tripwire copies no test that shares
#: module state (a copy run before such a test could make it fail: a false quarantine).
#: "8": the ``frame`` and ``modules`` variants are calibrated too. "9": and the
#: ``module_name`` and ``path`` ones.
BASELINE_FORMAT = "9"


class SuiteBaseline(BaseModel):
    """Classification of one suite. ``quarantined`` maps test id -> reason; the runs map
    test id -> outcome, one dict per run."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    quarantined: dict[str, str]
    base_runs: list[dict[str, str]]
    reference_runs: list[dict[str, str]] | None = None


class Baseline(BaseModel):
    """A task's baseline as cached on disk, under ``key`` (:func:`baseline_key`: task,
    image, version, runs and harness): each suite's classification (:class:`SuiteBaseline`)
    from ``runs`` runs on the base repo (and of the reference patch when
    ``has_reference``), computed by this ``proctor_version`` on ``image_id``."""

    key: str
    task_id: str
    proctor_version: str
    image_id: str
    runs: int
    has_reference: bool
    suites: dict[str, SuiteBaseline]
    #: suite -> which tests entered which functions on the base repo (one extra run each;
    #: :mod:`proctor.suites.reach`), or None when it could not be recorded
    reach: dict[str, ReachMap] | None = None
    #: The differential runs' calibration on the reference patch (:func:`calibrated`):
    #: suite -> variant (a name of :data:`~proctor.suites.variants.VARIANTS`) -> the
    #: FAIL_TO_PASS tests whose verdict the variant changes with the reference itself
    #: (empty: the variant is used for the suite). None: not calibrated (yet, or never: no
    #: reference patch); no variant is used.
    variant_changes: dict[str, dict[str, list[str]]] | None = None

    def usable_variants(self, suite: str) -> tuple[str, ...]:
        """The variants a differential run of ``suite`` uses: those that leave every
        FAIL_TO_PASS verdict of the reference as it is, sorted (``()``: none)."""
        per_variant = (self.variant_changes or {}).get(suite, {})
        return tuple(sorted(v for v, changed in per_variant.items() if not changed))

    @property
    def expected_ids(self) -> dict[str, list[str]]:
        """Suite -> the test ids a patched run is graded on: FAIL_TO_PASS then PASS_TO_PASS
        (quarantined tests excluded)."""
        return {s: b.fail_to_pass + b.pass_to_pass for s, b in self.suites.items()}



def _status(outcomes: list[str]) -> str:
    passed = [o == "passed" for o in outcomes]
    return "pass" if all(passed) else "fail" if not any(passed) else "flaky"


def classify(base_runs: list[dict[str, str]], reference_runs: list[dict[str, str]] | None,
             known_broken: set[str] = frozenset()) -> SuiteBaseline:
    """Classify every test id seen in any run (pure).

    A test absent from a run counts as failed in it. With a reference: FAIL_TO_PASS = fails
    in every base run and passes in every reference run; PASS_TO_PASS = passes in all runs
    of both; quarantined = flaky in either, or failing with the reference. Without one: a
    test failing in every base run is FAIL_TO_PASS unless ``known_broken`` lists it. A test
    skipped in every base run (and not passing with the reference) is quarantined: a skip
    condition of the environment is no target a patch can reach.
    """
    ids = sorted({i for run in base_runs + (reference_runs or []) for i in run})
    f2p, p2p, quarantined = [], [], {}
    for test_id in ids:
        base_outcomes = [run.get(test_id, "missing") for run in base_runs]
        base = _status(base_outcomes)
        ref = (_status([run.get(test_id, "missing") for run in reference_runs])
               if reference_runs else None)
        if test_id in known_broken:
            quarantined[test_id] = "known broken (task.toml)"
        elif set(base_outcomes) == {"skipped"} and ref != "pass":
            quarantined[test_id] = "skipped on the base repo (cannot run here)"
        elif base == "flaky":
            quarantined[test_id] = "flaky on the base repo"
        elif ref == "flaky":
            quarantined[test_id] = "flaky with the reference patch"
        elif ref == "fail":
            quarantined[test_id] = STILL_FAILING
        elif base == "fail":
            f2p.append(test_id)
        else:
            p2p.append(test_id)
    return SuiteBaseline(fail_to_pass=f2p, pass_to_pass=p2p, quarantined=quarantined,
                         base_runs=base_runs, reference_runs=reference_runs)


def validate(suites: dict[str, SuiteBaseline], has_reference: bool) -> None:
    """Raise TaskConfigError for an empty suite or a task with no FAIL_TO_PASS test."""
    for name, sb in suites.items():
        if not any(sb.base_runs) and not any(sb.reference_runs or []):
            raise TaskConfigError(f"suite '{name}' collected zero tests: check tests.public / "
                                  "tests.hidden_dir (an empty suite is never free points)")
    if not any(sb.fail_to_pass for sb in suites.values()):
        why = ("the reference patch makes no failing test pass" if has_reference
               else "no test fails on the base repo")
        still = [f"{name}: {test}" for name, sb in suites.items()
                 for test, because in sb.quarantined.items() if because == STILL_FAILING]
        if still:
            why += (f"; {len(still)} {'tests fail' if len(still) > 1 else 'test fails'} "
                    f"{STILL_FAILING.removeprefix('fails ')}: {', '.join(still[:3])}"
                    + (" ..." if len(still) > 3 else ""))
        raise TaskConfigError(f"task has no FAIL_TO_PASS test: {why}")


def check_sources_reached(task: Task, reach: dict[str, ReachMap | None] | None) -> None:
    """With ``install = true``, the tests must run the repository's copy of the sources:
    mutation writes its mutants there. When the base repo's reach maps (complete for both
    suites) show no test entering any function under ``sources``, the tests import the
    installed copy instead (a ``src/`` layout whose source root is not in ``pythonpath``),
    and every mutant would go unseen.

    Raises:
        TaskConfigError: names the fields to fix.
    """
    if not task.config.install or not reach or not all(reach.get(s) for s in SUITES):
        return
    roots = [r.rstrip("/") for r in task.config.sources]
    for m in reach.values():
        for key in m.reach:
            path = key.partition("::")[0]
            if any(path == r or path.startswith(r + "/") for r in roots):
                return
    raise TaskConfigError(
        f"{task.root}: field 'install': no test entered a function under sources "
        f"{task.config.sources} on the base repo, so the tests import the installed copy and "
        "mutation (which mutates the repository's files) could never see a mutant; put the "
        "source root on the path first with 'pythonpath' (e.g. pythonpath = [\"src\"] for a "
        "src layout)")


def baseline_key(task: Task, image_id: str) -> str:
    """Content address: task fingerprint + image id + Proctor version + baseline format +
    number of runs + the in-sandbox harness's digest (a changed runner measures anew)."""
    parts = [task.fingerprint, image_id, __version__, BASELINE_FORMAT,
             str(task.config.baseline.runs), harness_digest()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


RunSuites = Callable[[bytes | None, int], dict[str, list[dict[str, str]]]]
RecordReach = Callable[[], dict[str, ReachMap | None] | None]
#: ``alongside(fn)``: ``fn()`` started beside the caller, its future; None: run it in turn.
Alongside = Callable[[Callable[[], Any]], "Future[Any] | None"]
#: suite -> FAIL_TO_PASS ids in, suite -> variant -> ids whose reference verdict changed out.
CalibrateVariants = Callable[[dict[str, list[str]]], dict[str, dict[str, list[str]]]]


def load_or_compute_baseline(task: Task, image_id: str, run_suites: RunSuites,  # noqa: PLR0913
                             refresh: bool = False, record_reach: RecordReach | None = None,
                             alongside: Alongside | None = None) -> Baseline:
    """Return the cached baseline of ``task`` on ``image_id`` or compute and cache it.

    ``run_suites(patch_or_None, runs)`` runs every suite ``runs`` times on the base repo
    (None) or with the given patch and returns suite -> list of outcome dicts.
    ``record_reach()``, called once both states ran: which tests entered which functions
    on the base repo (suite -> map, None where it could not; None: not recorded).
    ``alongside(fn)`` starts ``fn`` beside the caller and returns its future, or None when
    it cannot (then ``fn`` runs in turn): the reference patch's runs go there while the
    base repo's run here. The outcomes, and so the baseline, are the same either way.

    Raises:
        TaskConfigError: empty suite, no FAIL_TO_PASS test, or a reference patch that fails.
    """
    key = baseline_key(task, image_id)
    path = cache_dirs.baselines() / f"{key}.json"
    if path.is_file() and not refresh:
        return Baseline.model_validate_json(path.read_text())
    # One computation per key at a time, across threads and processes: whoever waited on
    # the lock finds the file the holder wrote.
    with file_lock(path.with_suffix(".lock")):
        if path.is_file() and not refresh:
            return Baseline.model_validate_json(path.read_text())
        return _compute_baseline(task, image_id, key, path, run_suites, record_reach,
                                 alongside)


def calibrated(task: Task, baseline: Baseline, calibrate: CalibrateVariants) -> Baseline:
    """``baseline`` with the differential runs' calibration: as cached, else computed by
    ``calibrate(fail_to_pass)`` (which of each suite's FAIL_TO_PASS tests each variant
    changes with the reference patch applied) and added to the cached file. Computed once
    per baseline, when first needed (a patch with a suspicion, ``proctor task check``): a
    task whose patches are all clean never pays for it. Without a reference patch there is
    nothing to calibrate on: returned as it is."""
    if baseline.variant_changes is not None or not baseline.has_reference:
        return baseline
    path = cache_dirs.baselines() / f"{baseline.key}.json"
    with file_lock(path.with_suffix(".lock")):
        if path.is_file():
            cached = Baseline.model_validate_json(path.read_text())
            if cached.variant_changes is not None:
                return cached
        changes = calibrate({s: baseline.suites[s].fail_to_pass for s in SUITES})
        out = baseline.model_copy(update={"variant_changes": changes})
        _write(path, out)
    return out


def _write(path: Path, baseline: Baseline) -> None:
    """Write ``baseline`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(baseline.model_dump_json(indent=1))
    os.replace(tmp, path)


def _compute_baseline(task: Task, image_id: str, key: str, path: Path,  # noqa: PLR0913
                      run_suites: RunSuites, record_reach: RecordReach | None = None,
                      alongside: Alongside | None = None) -> Baseline:
    runs = task.config.baseline.runs
    ref_patch = task.reference_patch.read_bytes() if task.reference_patch else None
    beside = (alongside(lambda: run_suites(ref_patch, runs))
              if alongside is not None and ref_patch is not None else None)
    try:
        base = run_suites(None, runs)
    finally:  # the base repo's error, if any, is raised once the other state's run ended
        if beside is not None:
            wait([beside])
    if beside is not None:
        ref = beside.result()
    else:
        ref = run_suites(ref_patch, runs) if ref_patch is not None else None
    known = set(task.config.tests.known_broken)
    suites = {s: classify(base[s], ref[s] if ref else None, known) for s in SUITES}
    validate(suites, ref is not None)
    reach = record_reach() if record_reach is not None else None
    check_sources_reached(task, reach)
    baseline = Baseline(key=key, task_id=task.id, proctor_version=__version__,
                        image_id=image_id, runs=runs, has_reference=ref is not None,
                        suites=suites,
                        reach=reach if reach and all(reach.get(s) for s in SUITES) else None)
    _write(path, baseline)
    return baseline


def grade_suite(baseline: Baseline, run) -> SuiteTests:
    """:func:`grade_run` of a :class:`~proctor.suites.pytest_runner.SuiteRun` (pure): tests
    of a module that failed to collect are ``error``, other absent ones ``missing``."""
    suite = baseline.suites[run.suite]
    return grade_run(suite, run.outcomes_for(suite.fail_to_pass + suite.pass_to_pass))


def grade_run(suite: SuiteBaseline, outcomes: dict[str, str]) -> SuiteTests:
    """Per-test outcomes of a patched run in FAIL_TO_PASS / PASS_TO_PASS form (pure).
    A test absent from the run is ``missing``; only ``passed`` counts as passed."""
    f2p = {t: outcomes.get(t, "missing") for t in suite.fail_to_pass}
    p2p = {t: outcomes.get(t, "missing") for t in suite.pass_to_pass}
    return SuiteTests(
        fail_to_pass=f2p, pass_to_pass=p2p, quarantined=sorted(suite.quarantined),
        f2p_passed=sum(o == "passed" for o in f2p.values()), f2p_total=len(f2p),
        p2p_failed=sum(o != "passed" for o in p2p.values()), p2p_total=len(p2p),
    )
