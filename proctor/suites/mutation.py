"""Mutation score on the lines the patch added or changed (design.md section 2, measure).

How a mutant is made, chosen and judged, in order:

1. :func:`changed_source_lines`: the patch's added line numbers, in ``.py`` files under the
   task's ``sources``, never in test files (public, hidden, ``test_*.py``, ``*_test.py``);
   then :func:`changed_code_lines` keeps those whose statement's AST changed
   (:mod:`proctor.suites.changed_code`: reformatting, comments and moved definitions make
   no mutants), reading the base from the task's repo and the patched text as the host
   computes it (:func:`~proctor.patch.patched_text.patched_texts`; a file it cannot
   compute keeps all its added lines).
2. A throw-away copy in the sandbox, as root, at ``/proctor/mutation/repo`` (one per sandbox;
   the task's compiled pristine modules are shown for it: :mod:`proctor.suites.bytecode`):
   the pristine repo with the patch applied (same ``git apply`` strategy), public test
   paths restored, hidden tests added, then the changed files are rewritten with mutmut's
   mutants of those lines (``mutmut_adapter.py``, the only module that touches mutmut;
   ``# pragma: no mutate`` added by the patch ignored); finally the copy is made read-only.
   The mutants are made on the host by a warm generator
   (:mod:`proctor.suites.mutant_generator`) from the patched text the host computes, used
   only when its sha256 matches what ``git apply`` wrote in the copy; else (or when the
   host cannot generate) ``mutmut_adapter.py generate`` makes them there.
3. :func:`select_mutants`: at most ``max_mutants``, a seeded sample when there are more.
4. ``mutation_runner.py`` (as the sandbox user): one pytest session over the trusted tests
   (pristine public + hidden, only those that passed in this patched run and are not
   quarantined), a stats pass for durations and coverage, then one forked child per mutant.
   The stats pass leaves out the tests that cannot reach the changed code (:func:`stats_skip`
   with the baseline's reach maps, :mod:`proctor.suites.reach`: when the patch changed only
   bodies of existing functions, a test that entered none of them on the pristine repository
   cannot enter them now); ``PROCTOR_REACH_SELECTION=0`` runs every trusted test.
   An identity "control" mutant must survive, or the code under test senses mutation.
5. :func:`score_verdicts`: killed / (killed + survived); timeouts count as killed, mutants
   no killer reaches count as survived, crashes and budget overruns are dropped. A changed
   line in code no mutant can be made for (a function decorated with a compiler,
   ``__new__``: the adapter's ``unmutated``) counts as one survived mutant, so hiding code
   there never turns the measure into a null.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import secrets
import shlex
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from proctor.errors import InfraError
from proctor.patch import PatchSummary, applied_as, is_test_module, patched_texts, under
from proctor.record import Evidence, SuiteTests
from proctor.sandbox import CLEAR_PARENTS_SH, HARNESS_DIR, MUTATION_DIR, PYTHON, Sandbox
from proctor.suites import mutant_generator
from proctor.suites.baseline import Baseline
from proctor.suites.changed_code import changed_functions, changed_lines
from proctor.suites.pytest_runner import RUNNER_FLAGS, SuiteRun
from proctor.suites.reach import ReachMap, function_key, unreaching_tests
from proctor.task import Task

#: Per-mutant timeout = (FACTOR * sum of its covering tests' durations + CONSTANT) * contention.
TIMEOUT_FACTOR = 10.0
TIMEOUT_CONSTANT_S = 1.0
#: An agent test (opt-in killer) mentioning any of these is screened out: it could sense
#: mutation testing instead of testing behaviour.
SENSING = re.compile(r"environ|getenv|MUTANT_UNDER_TEST|mutmut|_getframe|\binspect\b|"
                     r"f_back|f_locals|f_globals|__code__|sys\.modules|\bgc\b|trampoline")
#: ``unmutated``: a changed line in code no mutant can be made for (``mutmut_adapter``'s
#: ``unmutated``: a function decorated with a compiler, ``__new__``, ...), one a line.
KILLED, SURVIVED = ("killed", "timeout"), ("survived", "no_tests", "unjudged", "unmutated")
#: Seconds of the step's time kept for the runner's session to start (collection, the
#: stats pass) and report, outside the mutant loop's budget.
RUNNER_MARGIN_S = 5.0
#: Exit status of the staging command when the step's copy (``MUTATION_DIR``) already
#: exists: a second step in one sandbox, an :class:`InfraError`.
COPY_EXISTS_EXIT = 97


@dataclass
class MutationResult:
    """``score`` in 0..1 or None (then ``note`` says why); ``degraded``: the tool failed,
    a person should look (never a silent 0); ``tampered``: see below."""

    score: float | None
    note: str | None
    evidence: Evidence
    degraded: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    #: The code under test wrote on the runner's verdict channel (score 0.0; a person
    #: should look: the trainer should leave the rollout out of its advantages).
    tampered: bool = False
    #: The step ran out of its time before it judged every mutant: the generation timed
    #: out, the runner was killed at its timeout, or mutants were left ``not_run``. The
    #: caller decides what that means when the per-patch deadline set that time.
    ran_out: bool = False


# --------------------------------------------------------------------------- pure core


def killer_targets(killers: list[str], killer_files: list[str], fallback: list[str]
                   ) -> list[str]:
    """The files the mutation session collects: those holding a killer (a test id's part
    before ``::``) and the agent's killer files, in a stable order; ``fallback`` (every
    suite's targets) when there are none. Modules without a killer are never imported
    there: one that fails, hangs or exits at import costs the step nothing (pure)."""
    files = sorted({k.split("::", 1)[0] for k in killers} | set(killer_files))
    return files or list(fallback)


def speculative_targets(task: Task, maps: dict[str, ReachMap] | None, skip: set[str],
                        fallback: list[str]) -> list[str]:
    """The files the mutation session collects before the killers are known: ``fallback``
    (every suite's targets and the agent's killer files) when there is no selection
    (``maps`` None); else the test files holding a test the maps do not leave out
    (``skip``), every target file the maps do not know (listed on the host: a public
    target directory's test modules), and the agent's files. In a stable order."""
    if not maps:
        return list(fallback)
    known: set[str] = set()
    keep: set[str] = set()
    for m in maps.values():
        for test_id in m.tests:
            path = test_id.split("::", 1)[0]
            known.add(path)
            if test_id not in skip:
                keep.add(path)
    out: set[str] = set()
    for target in fallback:
        where = task.repo / target
        files = ([str(p.relative_to(task.repo)) for p in sorted(where.rglob("*.py"))
                  if "__pycache__" not in p.parts and is_test_path(p.name, [])]
                 if where.is_dir() else [target])
        out |= {f for f in files if f in keep or f not in known}
    return sorted(out)


def trusted_killers(baseline: Baseline, runs: list[SuiteRun]) -> list[str]:
    """Test ids that may kill: passed in this patched run and not quarantined. Pure."""
    out = set()
    for run in runs:
        quarantined = baseline.suites[run.suite].quarantined
        out |= {t for t, o in run.outcomes.items() if o == "passed" and t not in quarantined}
    return sorted(out)


#: Why mutation is not measured when it cannot change the reward (see
#: :func:`cannot_change_reward`).
NO_PROGRESS_NOTE = ("not measured: no FAIL_TO_PASS test passes, so progress is 0 and the "
                    "quality components, which are multiplied by it (their weights kept, "
                    "not re-shared), cannot change the reward")


def cannot_change_reward(suites: dict[str, SuiteTests]) -> bool:
    """True when the mutation score cannot change the total reward (pure): no suite has a
    FAIL_TO_PASS test passing, so progress p = 0 and ``p * w_mutation * score`` is 0
    whatever the score; and with p = 0 the reward keeps a null quality component's weight
    instead of re-sharing it over the credit terms
    (:func:`~proctor.rewards.reward.compute_reward`), so a null changes nothing either,
    even when PASS_TO_PASS tests broke. The total is then bit-identical with or without
    the measurement (``tests/test_mutation.py``). False when no suite has a FAIL_TO_PASS
    test at all (a configuration error the reward reports). ``suites``: suite name ->
    graded outcomes of this patched run."""
    credit = [s for s in suites.values() if s.f2p_total > 0]
    return bool(credit) and all(s.f2p_passed == 0 for s in credit)


def is_test_path(path: str, test_paths: list[str]) -> bool:
    """What mutation leaves alone as test code: a test module, a ``conftest.py``, or a file
    at or under one of ``test_paths`` (the task's public and hidden test paths)."""
    return (is_test_module(path) or PurePosixPath(path).name == "conftest.py"
            or under(path, test_paths))


def changed_source_lines(summary: PatchSummary, sources: list[str], test_paths: list[str]
                         ) -> dict[str, list[int]]:
    """``{repo path: [line, ...]}``: lines the patch added or changed (target numbering) in
    ``.py`` files at or under a source path, excluding test files. Pure."""
    out = {}
    for path, lines in summary.added_line_numbers.items():
        if (lines and path.endswith(".py") and under(path, sources)
                and not is_test_path(path, test_paths)):
            out[path] = sorted(lines)
    return out


def changed_code_lines(added: dict[str, list[int]],
                       texts: dict[str, tuple[str | None, str | None]]
                       ) -> dict[str, list[int]]:
    """``{repo path: [line, ...]}``: of ``added`` (:func:`changed_source_lines`), the lines
    whose statement changed (:func:`proctor.suites.changed_code.changed_lines`), paths
    left with none dropped. ``texts``: path -> (base text or None for a new file, patched
    text or None when the host could not compute it: then every added line is kept, as
    for a path missing from ``texts``). Pure."""
    out = {}
    for path, lines in added.items():
        base, patched = texts.get(path, (None, None))
        kept = (sorted(changed_lines(base, patched, set(lines))) if patched is not None
                else list(lines))
        if kept:
            out[path] = kept
    return out


def source_texts(task: Task, applied: bytes, paths: list[str]
                 ) -> dict[str, tuple[str | None, str | None]]:
    """path -> (pristine text in the task's repo or None when it has none, patched text the
    host computes from ``applied`` or None when it cannot: a hunk that does not apply as
    written, a deletion, undecodable bytes). Reads ``task.repo`` only."""
    pristine: dict[str, str | None] = {}
    for p in paths:
        f = task.repo / p
        try:
            pristine[p] = (f.read_bytes().decode("utf-8") if f.is_file() and not f.is_symlink()
                           else None)
        except (OSError, UnicodeDecodeError):
            pristine[p] = None
    try:
        texts = patched_texts(applied.decode("utf-8"), pristine)
    except Exception:  # noqa: BLE001 - unreadable patch: every added line is kept
        texts = {}
    return {p: (pristine[p], texts.get(p)) for p in paths}


def stats_skip(summary: PatchSummary, texts: dict[str, tuple[str | None, str | None]],
               public: list[str], maps: dict[str, ReachMap] | None
               ) -> tuple[list[str], str | None]:
    """(test ids the stats pass may leave out, why it keeps every test or None) (pure).

    The tests that entered none of the functions the patch changed on the pristine
    repository (:mod:`proctor.suites.reach`), when every change is inside existing function
    bodies: each touched path is a public test file (restored before the run), a test
    module the patch added (no trusted test imports it), or a ``.py`` file it modified
    (not renamed, not a test module) whose :func:`changed_functions` are known, each of
    them entered by some test of the map. ``texts``: path -> (pristine, patched) text of
    the touched ``.py`` files (:func:`source_texts`)."""
    if not maps:
        return [], "no reach map in the baseline"
    if os.environ.get("PROCTOR_REACH_SELECTION", "1") == "0":
        return [], "turned off (PROCTOR_REACH_SELECTION=0)"
    keys: set[str] = set()
    for t in summary.touched:
        if under(t.path, public):
            continue
        name = PurePosixPath(t.path).name
        if (t.kind == "added" and name != "conftest.py"
                and is_test_path(t.path, [])):
            continue
        if t.kind != "modified" or not t.path.endswith(".py") or is_test_path(t.path, []):
            return [], f"{t.path}: {t.kind}, not a source module's function bodies only"
        base, patched = texts.get(t.path, (None, None))
        funcs = (changed_functions(base, patched) if base is not None and patched is not None
                 else None)
        if funcs is None:
            return [], f"{t.path}: code outside function bodies changed"
        keys |= {function_key(t.path, f) for f in funcs}
    if not keys:
        return [], "no function body changed"
    unreached = sorted(k for k in keys if not any(m.reach.get(k) for m in maps.values()))
    if unreached:
        return [], f"no test entered {unreached[0]} on the pristine repository"
    return unreaching_tests(maps, keys), None


def applied_patch(patch: bytes, strategy: str | None) -> tuple[list[str], bytes]:
    """(``git apply`` flags, patch bytes) of the ``apply_strategy`` that applied ``patch``."""
    return applied_as(patch, strategy)


def agent_test_files(summary: PatchSummary, test_paths: list[str]) -> list[str]:
    """Test files the patch added or edited outside the trusted test paths. Pure."""
    kinds = {"modified", "added", "rename_to", "copy_to"}
    out = {t.path for t in summary.touched if t.kind in kinds and t.path.endswith(".py")
           and is_test_path(t.path, []) and not under(t.path, test_paths)
           and PurePosixPath(t.path).name != "conftest.py"}
    return sorted(out)


def select_mutants(mutants: list[dict], k: int, seed: int) -> list[dict]:
    """At most ``k`` mutants: all of them when there are ``k`` or fewer, else a sample drawn
    with ``random.Random(seed)`` over the mutants sorted by name, kept in generation order.
    Same mutants and seed -> same choice."""
    if len(mutants) <= k:
        return list(mutants)
    names = sorted(m["name"] for m in mutants)
    chosen = set(random.Random(seed).sample(names, k))
    return [m for m in mutants if m["name"] in chosen]


def control_rng(patch_sha256: str, task_fingerprint: str) -> random.Random:
    """The generator of the mutation step's choices that can change its outcome (the
    control's function and its position among the mutants): seeded from the patch's
    sha256 and the task fingerprint, so the same patch gets the same record every time.
    The fingerprint covers the hidden tests, which the agent never sees, so the code under
    test cannot predict the choice (count forks to reach the control, say). Nonces and
    names stay fresh OS randomness. Pure."""
    digest = hashlib.sha256(f"proctor-mutation-control\0{task_fingerprint}\0"
                            f"{patch_sha256}".encode()).digest()
    return random.Random(int.from_bytes(digest, "big"))


def control_position(n_mutants: int, rng: random.Random) -> int:
    """Where the control goes among ``n_mutants`` mutants: uniform in ``0..n_mutants``,
    drawn from ``rng`` (:func:`control_rng`)."""
    return rng.randrange(n_mutants + 1)


def score_verdicts(verdicts: dict[str, str]) -> tuple[float | None, dict[str, int]]:
    """(killed / (killed + survived), counts per verdict). ``timeout`` counts as killed,
    ``no_tests``, ``unjudged`` (the runner died before reaching it) and ``unmutated`` (a
    changed line no mutant can be made for) as survived;
    ``crashed`` and ``not_run`` (budget spent) are dropped. None when nothing was judged.
    Pure."""
    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    killed = sum(counts.get(v, 0) for v in KILLED)
    survived = sum(counts.get(v, 0) for v in SURVIVED)
    return (killed / (killed + survived) if killed + survived else None), counts


def contention(workers: int, cpus: float) -> float:
    """Slow-down factor of each worker when ``workers`` share ``cpus`` (>= 1.0)."""
    return max(1.0, workers / max(cpus, 1e-3))


#: Keys of the runner's own lines (each must carry the run's nonce).
_RUNNER_KEYS = ("stats", "mutant", "control", "done", "output")


def parse_runner_output(text: str, nonce: str | None = None
                        ) -> tuple[dict, dict[str, dict], dict | None, bool, dict | None, str,
                                   int]:
    """The runner's JSONL: (stats, mutant name -> verdict line, control line or None,
    started, done line or None, the session's output tail, forged). With ``nonce``, a
    line holding one of the runner's keys without ``"n": nonce`` is not the runner's: it is
    left out and counted in ``forged``. Other lines are ignored."""
    stats, verdicts, control, started, done, output, forged = {}, {}, None, False, None, "", 0
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if nonce is not None and any(k in obj for k in _RUNNER_KEYS) and obj.get("n") != nonce:
            forged += 1
            continue
        if "started" in obj:
            started = True
        elif "stats" in obj:
            stats = obj["stats"]
        elif "mutant" in obj:
            verdicts[obj["mutant"]] = obj
        elif "control" in obj and not obj.get("retrying"):  # a first try of two: no verdict
            control = obj
        elif "done" in obj:
            done = obj["done"]
        elif "output" in obj:
            output = obj["output"]
    return stats, verdicts, control, started, done, output, forged


# --------------------------------------------------------------------------- sandbox shell


def run_mutation(sb: Sandbox, task: Task, patch: bytes, strategy: str | None,  # noqa: PLR0913
                 summary: PatchSummary, killers: list[str] | Callable[[], list[str]], *,
                 workers: int = 1, cpus: float = 1.0, timeout: float = 120.0,
                 killers_wait_s: float = 0.0,
                 reach: dict[str, ReachMap] | None = None,
                 never_kill: list[str] = ()) -> MutationResult:
    """Measure the mutation score of one applied patch in ``sb`` (see the module docstring).

    Args:
        patch: the diff as applied; ``strategy``: the ``apply_strategy`` that applied it.
        killers: trusted test ids allowed to kill (passed in this run, not quarantined), or
            a function returning them, called once the mutants are generated: the copy,
            the generation and the runner's start overlap with whatever produces them
            (the public suite in the other sandbox). If it raises, the runner is told to
            stop and the exception propagates.
        workers: mutants run in parallel; ``cpus``: CPUs of the sandbox (timeouts scale by
            ``workers / cpus``); ``timeout``: budget of the step (s), not counting the wait
            for ``killers``, which may take up to ``killers_wait_s`` more seconds. The
            runner's whole time, and so the step's, ends ``timeout + killers_wait_s``
            seconds after it starts: the mutant loop's budget is what is left of that once
            the killers are known (less a margin for the runner's session to start and
            report), never more than ``timeout`` less the generation's time.
        reach: the baseline's reach maps (suite -> :class:`ReachMap`): the stats pass runs
            only the killers that can reach the changed code (:func:`stats_skip`); None:
            every killer.
        never_kill: test ids that may never kill (the baseline's quarantined tests), left
            out before ``killers`` is known.

    Never raises for the patch's faults; InfraError (from the sandbox) when the container
    fails. mutmut failing to start gives ``score=None`` and ``degraded=True``.
    """
    test_paths = [*task.config.tests.public, *task.hidden_files]
    added = changed_source_lines(summary, task.config.sources, test_paths)
    texts = source_texts(task, applied_patch(patch, strategy)[1], sorted(added))
    lines = changed_code_lines(added, texts)
    ev = Evidence(command="mutmut (changed lines)",
                  details={"changed_lines": lines, "added_lines": added})
    if not added:
        return MutationResult(None, "no source line added or changed in the task's sources",
                              ev)
    if not lines:
        return MutationResult(None, "no statement changed on the added source lines "
                              "(reformatting, comments or moved code only)", ev)
    touched_py = sorted({t.path for t in summary.touched if t.path.endswith(".py")})
    selection = stats_skip(summary, source_texts(task, applied_patch(patch, strategy)[1],
                                                 touched_py),
                           task.config.tests.public, reach)
    m = MUTATION_DIR  # once per sandbox (made by _prepare_copy, which fails if it exists)
    t0 = time.monotonic()
    runner_end = t0 + timeout + killers_wait_s
    first: Future = Future()
    second: Future = Future()
    waited, allowed, result, chosen, generated, targets = 0.0, [], None, [], {}, []
    unmutated: list[dict] = []
    # The runner starts now (interpreter, pytest, mutmut's trampoline) and blocks on its
    # stdin while the generation runs as root: the two overlap on the sandbox's CPUs. Its
    # first spec comes once the mutants are made: it collects, runs the stats pass and
    # judges every mutant while the killers are still being decided (the public suite in
    # the other sandbox); its second brings them (see ``mutation_runner.speculate``).
    with ThreadPoolExecutor(max_workers=1) as pool:
        runner = pool.submit(_run_runner, sb, runner_end, first, second)
        try:
            result, chosen, generated = _generate(sb, task, patch, strategy, summary, lines, m,
                                                  ev, workers, cpus, timeout, texts)
            if result is not None:
                first.set_result(generated)
            else:
                skip = set(selection[0])
                targets = generated.pop("targets")
                unmutated = generated.pop("unmutated")
                first.set_result(generated | {
                    "killers": None, "killers_later": True, "stats_skip": sorted(skip),
                    "exclude": sorted(never_kill),
                    "pytest_args": generated["pytest_args"] + speculative_targets(
                        task, reach if selection[1] is None else None, skip, targets)})
                t_wait = time.monotonic()
                allowed = killers() if callable(killers) else list(killers)
                waited = time.monotonic() - t_wait
                ev.details["stats_selection"] = {
                    "left_out": sum(k in skip for k in allowed), "of": len(allowed),
                    "why_all": selection[1]}
                allowed = [k for k in allowed if k not in skip]
                budget = min(generated["budget_s"], runner_end - time.monotonic()
                             - RUNNER_MARGIN_S)
                second.set_result({"killers": allowed, "budget_s": max(1.0, budget)})
        finally:  # the runner waits for its specs: always give them, even to abort
            for spec in (first, second):
                if not spec.done():
                    spec.set_result({"abort": "harness error"})
        res = runner.result()
    if result is not None:
        return result
    if _never_judged(res, generated.get("nonce")) and runner_end - time.monotonic() > \
            RUNNER_MARGIN_S + 1.0:
        # The session ended in its collection (a test module whose import exits: the code
        # under test): once more the way that collects only the killers' modules.
        budget = min(generated["budget_s"], runner_end - time.monotonic() - RUNNER_MARGIN_S)
        again: Future = Future()
        again.set_result(generated | {
            "killers": allowed, "budget_s": max(1.0, budget),
            "pytest_args": generated["pytest_args"] + killer_targets(
                allowed, generated["killer_files"], targets)})
        res = _run_runner(sb, runner_end, again, None)
        ev.details["collection_retry"] = True
    ev.details["timing"]["killers_wait_s"] = round(waited, 3)
    return _judge(res.output, res, chosen, ev, time.monotonic() - t0 - waited,
                  generated.get("nonce"), allowed, generated.get("killer_files", []),
                  unmutated)


def _run_runner(sb: Sandbox, end: float, first: Future, second: Future | None):
    """One run of ``mutation_runner.py`` until ``end`` (monotonic seconds), its spec lines
    written to its stdin as the futures give them."""

    def spec_input():
        yield (json.dumps(first.result()) + "\n").encode()
        if second is not None:
            yield (json.dumps(second.result()) + "\n").encode()

    return sb.run([PYTHON, *RUNNER_FLAGS, f"{HARNESS_DIR}/mutation_runner.py", "-"],
                  timeout=max(1.0, end - time.monotonic()), cwd="/", stdin=spec_input())


def _never_judged(res, nonce: str | None) -> bool:
    """The runner started but its session never reached the stats pass, in its own time."""
    stats, _, _, started, done, _, forged = parse_runner_output(res.output, nonce)
    return started and not stats and done is None and not forged and not res.timed_out


def _generate(sb: Sandbox, task: Task, patch: bytes, strategy: str | None,  # noqa: PLR0913
              summary: PatchSummary, lines: dict[str, list[int]], m: str,
              ev: Evidence, workers: int, cpus: float, timeout: float,
              texts: dict[str, tuple[str | None, str | None]]
              ) -> tuple[MutationResult | None, list[dict], dict]:
    """Copy, generate, choose. Returns (a final result when there is nothing to run, the
    chosen mutants, the runner's spec without its ``killers``, or ``{"abort": why}``)."""
    cfg = task.config.mutation
    test_paths = [*task.config.tests.public, *task.hidden_files]
    prep = _prepare_copy(sb, task, patch, strategy, lines, m, timeout, texts)
    if prep[1] == COPY_EXISTS_EXIT:  # the harness's fault, never the patch's (a null)
        raise InfraError(f"{m} already exists in this sandbox: the mutation step runs once "
                         "per sandbox")
    ev.command, ev.exit_code, ev.duration_s = prep[0], prep[1], prep[2]
    ev.details["timing"] = {"prepare_and_generate_s": round(prep[2], 3)}
    generated = _generated(sb, prep[3], m)
    if prep[4] and generated is None:  # the patch's code outgrew the step's time
        ev.output = prep[3][-4000:]
        why = ("mutant generation ran out of time on the patch's code (scored 0.0: a null "
               "would re-share the weight and raise the reward)")
        return MutationResult(0.0, why, ev, ran_out=True), [], {"abort": why}
    if prep[1] != 0 or generated is None:
        ev.output = prep[3][-4000:]
        why = f"mutmut failed to start: {prep[3][-300:].strip()}"
        return MutationResult(None, why, ev, degraded=True), [], {"abort": why}
    mutants = generated["mutants"]
    unmutated = generated.get("unmutated", [])
    ev.details["generation_errors"] = generated["errors"]
    ev.details["generated_on"] = generated.get("generated_on", "sandbox")
    if unmutated:
        ev.details["unmutated"] = unmutated
    if not mutants and unmutated:
        # changed code the tool cannot mutate is not "nothing to measure": a null would
        # re-share the weight and raise the reward of code hidden where no mutant goes
        why = (f"no mutants on the changed lines: {len(unmutated)} changed line(s) no "
               f"mutant can be made for count as survived ({unmutated[0]['why']})")
        ev.details["verdicts"] = {"unmutated": len(unmutated)}
        ev.details["survivors"] = _unmutated_survivors(unmutated)
        return (MutationResult(0.0, why, ev, counts={"unmutated": len(unmutated)}), [],
                {"abort": why})
    if not mutants:
        why = "; ".join(generated["errors"]) or "module-level code, deletions or unmutable lines"
        why = f"no mutants on the changed lines ({why})"
        return MutationResult(None, why, ev), [], {"abort": why}
    chosen = select_mutants(mutants, cfg.max_mutants, cfg.seed)
    agent = agent_test_files(summary, test_paths) if "agent" in cfg.killers else []
    agent_ok, screened = _screen_agent_tests(sb, f"{m}/repo", agent)
    ev.details.update(mutants_generated=len(mutants), mutants_selected=len(chosen),
                      agent_tests=agent_ok, agent_tests_screened_out=screened)
    rng = control_rng(hashlib.sha256(patch).hexdigest(), task.fingerprint)
    control = f"{rng.choice(chosen)['function']}__mutmut_c{secrets.token_hex(4)}"
    spec = {
        "root": f"{m}/repo", "killers": [], "killer_files": agent_ok,  # set by the caller
        "pythonpath": task.pythonpath_in(f"{m}/repo"),
        "pytest_args": ["-c", f"{HARNESS_DIR}/pytest.ini", f"--rootdir={m}/repo",
                        "-p", "pytest_timeout", "-p", "no:cacheprovider",
                        f"--timeout={task.config.timeouts.per_test:g}",
                        "--import-mode=prepend", "--continue-on-collection-errors",
                        "-q", "-s", "--no-header", "--color=no",
                        # verdicts need no assertion introspection; and pytest's cached
                        # rewrites in the task's bytecode tree, checked by time and size
                        # only, are never read for this copy (proctor.suites.bytecode)
                        "--assert=plain"],
        # the caller collects only the killers' modules (:func:`killer_targets`)
        "targets": [*task.config.tests.public, *task.hidden_files, *agent_ok],
        "unmutated": unmutated,  # scored by the caller (:func:`_judge`), not the runner's
        "mutants": [{"name": x["name"], "function": x["function"]} for x in chosen],
        "control": control, "control_at": control_position(len(chosen), rng),
        "nonce": secrets.token_hex(16), "workers": workers,
        "timeout_factor": TIMEOUT_FACTOR,
        "timeout_constant": TIMEOUT_CONSTANT_S, "contention": contention(workers, cpus),
        "budget_s": max(1.0, timeout - prep[2] - RUNNER_MARGIN_S),
    }
    return None, chosen, spec


def _prepare_copy(sb: Sandbox, task: Task, patch: bytes, strategy: str | None,  # noqa: PLR0913
                  lines: dict[str, list[int]], m: str, timeout: float,
                  texts: dict[str, tuple[str | None, str | None]]
                  ) -> tuple[str, int, float, str, bool]:
    """Stage the pristine repo, hidden tests, patch and generation spec read-only (one
    archive, on the command's stdin), then (root) build ``m/repo`` and generate mutants
    into it, all in one sandbox command. Returns (command, exit code, seconds, output,
    timed out)."""
    t0 = time.monotonic()
    flags, applied = applied_patch(patch, strategy)
    cfg = task.config.mutation
    spec = {"root": f"{m}/repo", "files": lines, "max_mutants": cfg.max_mutants,
            "seed": cfg.seed, "import_roots": task.config.pythonpath}
    staging = _staging_tar(task, {"patch.diff": applied, "gen.json": json.dumps(spec).encode(),
                                  **_host_generated(sb, task, texts, lines, timeout)})
    generate = (f"{PYTHON} -I -B {HARNESS_DIR}/mutmut_adapter.py generate {m}/in/gen.json"
                f" > {m}/gen.json")
    public = " ".join(shlex.quote(p) for p in task.config.tests.public)
    script = "\n".join([
        # what put_archive(as_root=True) does: root owns it, then nobody may write
        "set -e", "umask 022", f"! test -e {m} || exit {COPY_EXISTS_EXIT}", f"mkdir {m}",
        f"tar -x --no-same-permissions --no-overwrite-dir -C {m} -f -", f"chmod -R a-w {m}",
        f"chmod u+w {m}", f"cp -a {m}/base {m}/repo",
        f"chmod -R u+w {m}/repo", f"cd {m}/repo",
        f"git apply --whitespace=nowarn {' '.join(flags)} {m}/in/patch.diff",
        f"set -- {public}", CLEAR_PARENTS_SH,
        f"rm -rf -- {public}", f"(cd {m}/base && cp -a --parents -- {public} {m}/repo)",
        f"chmod -R u+w {m}/repo",  # the copies keep base's read-only modes
        f"cp -a {m}/hidden/. {m}/repo/", f"chmod -R u+w {m}/repo",
        # mutants made on the host from the very text git apply wrote, else made here
        f"if [ -f {m}/in/host/expect.sha256 ] && (cd {m}/repo && "
        f"sha256sum --status --strict -c {m}/in/host/expect.sha256); then",
        f"  if [ -d {m}/in/host/files ]; then cp -R {m}/in/host/files/. {m}/repo/; fi",
        f"  cp {m}/in/host/gen.json {m}/gen.json",
        f"else {generate}; fi",
        f"chmod -R a-w {m}/repo", f"cat {m}/gen.json",
    ])
    # the step's time less what the host generation took
    res = sb.run(["sh", "-c", script], timeout=min(timeout - (time.monotonic() - t0), 120.0),
                 cwd="/", user="0:0", stdin=staging)
    return ("mutmut_adapter.py generate", res.exit_code, res.duration_s, res.output,
            res.timed_out)


def _host_generated(sb: Sandbox, task: Task,
                    sources: dict[str, tuple[str | None, str | None]],
                    lines: dict[str, list[int]],
                    timeout: float = mutant_generator.REQUEST_TIMEOUT_S) -> dict[str, bytes]:
    """Staging files (under ``in/``) with the mutants made on the host
    (:mod:`proctor.suites.mutant_generator`) from the patched text the host computes
    (``sources``: :func:`source_texts`):
    ``host/expect.sha256`` (that text's digests; the staging script checks them against
    what ``git apply`` wrote and generates in the sandbox on any difference),
    ``host/gen.json`` (the generator's JSON) and ``host/files/<path>`` (rewritten sources).
    Empty when the host cannot generate. ``timeout``: the step's (the request gets at most
    half of it, never more than its own limit)."""
    # only a shortcut: any doubt (a hunk shorter than its header, applied with --recount,
    # say), the sandbox generates
    texts = {p: sources.get(p, (None, None))[1] for p in lines}
    if any(t is None for t in texts.values()):
        return {}
    cfg = task.config.mutation
    answer = mutant_generator.generate(
        sb, {p: (texts[p], n) for p, n in lines.items()}, max_mutants=cfg.max_mutants,
        seed=cfg.seed, timeout=min(mutant_generator.REQUEST_TIMEOUT_S, timeout / 2),
        import_roots=task.config.pythonpath)
    if answer is None:
        return {}
    out = {"host/gen.json": json.dumps({"mutants": answer["mutants"], "errors":
                                        answer["errors"], "generated_on": "host",
                                        "unmutated": answer.get("unmutated", [])}).encode(),
           "host/expect.sha256": "".join(
               f"{hashlib.sha256(texts[p].encode()).hexdigest()}  {p}\n"
               for p in sorted(lines)).encode()}
    for path, code in answer["files"].items():
        out[f"host/files/{path}"] = code.encode()
    return out


def _generated(sb: Sandbox, output: str, m: str) -> dict | None:
    """The generator's JSON: the last line of the root script's output (no extra round
    trip), or the file it wrote when the output was cut at the cap; None if unreadable."""
    for text in (output.rstrip().rpartition("\n")[2], None):
        if text is None:
            raw = sb.get_file(f"{m}/gen.json")
            text = raw.decode("utf-8", "replace") if raw else ""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "mutants" in data:
            return data
    return None


def _staging_tar(task: Task, files: dict[str, bytes]) -> bytes:
    """One uncompressed tar to extract into the step's root-owned dir: ``base`` (repo/),
    ``hidden``, ``in/<files>``; root-owned, no ``__pycache__``. Modes are writable while
    extracting (root has no CAP_DAC_OVERRIDE in the sandbox); ``put_archive(as_root=True)``
    then removes every write bit (files 0444, directories 0555)."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name.split("/") or info.name.endswith((".pyc", ".pyo")):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for arc, src in (("in", None), ("base", task.repo), ("hidden", task.hidden)):
            if src is None:
                info = tarfile.TarInfo(arc)
                info.type = tarfile.DIRTYPE
                tar.addfile(owned(info))
            else:
                tar.add(src, arcname=arc, filter=owned)
        for rel, data in sorted(files.items()):
            info = tarfile.TarInfo(f"in/{rel}")
            info.size = len(data)
            tar.addfile(owned(info), io.BytesIO(data))
    return buf.getvalue()


def _screen_agent_tests(sb: Sandbox, repo: str, files: list[str]
                        ) -> tuple[list[str], dict[str, str]]:
    """Agent test files that may kill (opt-in) and, for the others, why they may not."""
    ok, out = [], {}
    for path in files:
        raw = sb.get_file(f"{repo}/{path}")
        hit = SENSING.search(raw.decode("utf-8", "replace")) if raw is not None else None
        if raw is None:
            out[path] = "missing after the patch"
        elif hit:
            out[path] = f"mentions {hit.group(0)!r}"
        else:
            ok.append(path)
    return ok, out


def _unmutated_survivors(unmutated: list[dict]) -> list[dict]:
    """The survivors' entries of the changed lines no mutant can be made for."""
    return [{"name": f"{u['function']} (line {u['line']})", "path": u["path"],
             "line": u["line"], "diff": "", "verdict": "unmutated", "why": u["why"]}
            for u in unmutated]


def _judge(text: str, res, chosen: list[dict], ev: Evidence, step_s: float,  # noqa: PLR0913
           nonce: str | None = None, killers: list[str] | None = None,
           killer_files: list[str] = (), unmutated: list[dict] = ()) -> MutationResult:
    """The step's result from the runner's output. ``killers`` / ``killer_files``: the
    tests that may kill; a kill by any other test is a line the runner never writes
    (counted as forged). ``unmutated``: changed lines no mutant can be made for
    (``mutmut_adapter``), each counted as one survived mutant (verdict ``unmutated``):
    all of them, whatever sample of the mutants ``max_mutants`` drew."""
    stats, lines, control, started, done, output, forged = parse_runner_output(text, nonce)
    if killers is not None:
        allowed, files = set(killers), set(killer_files)
        for line in [*lines.values(), *([control] if control else [])]:
            killer = line.get("killer")
            if line.get("verdict") == "killed" and not (
                    killer in allowed or str(killer).split("::", 1)[0] in files):
                forged += 1
    ev.command = res.command
    ev.exit_code, ev.duration_s = res.exit_code, round(step_s, 3)
    ev.output = output or res.output[-4000:]
    ev.details.update(stats=stats, control=control)
    if not started:  # mutmut broken, or no time left to start it
        return MutationResult(None, f"the mutation runner failed to start: "
                              f"{res.output[-300:].strip()}", ev, degraded=True,
                              ran_out=res.timed_out)
    ev.details["timing"].update(runner_s=round(res.duration_s, 3),
                                mutants_s=done["duration_s"] if done else None)
    ran_out = res.timed_out  # killed at the step's time: what it did not judge is not judged
    if forged or res.truncated:
        # lines without the run's nonce, or a flood that cut the runner's own (its lines
        # are small; pytest's output goes to a side file): only the code under test writes
        # there. Scored as the patch's failure, and flagged.
        ev.details["forged_lines"] = forged
        note = ("the mutation runner's verdict channel carried lines it did not write "
                f"({forged} forged{', output cut at its cap' if res.truncated else ''})")
        return MutationResult(0.0, note, ev, tampered=True)
    if done is None and not lines:
        # mutmut loaded and configured, then the session died: the code under test did it
        # (os._exit at import, say), so it is the patch's failure, scored, not degraded.
        note = "the mutation runner died after it started (killed by the code under test?)"
        return MutationResult(0.0, note, ev, ran_out=ran_out)
    if control is not None and control["verdict"] in KILLED:
        note = ("the control mutant (the original code) was killed: the code under test "
                "behaves differently under mutation testing")
        return MutationResult(0.0, note, ev)  # a verdict, however the step ended
    if control is not None and control["verdict"] == "crashed":
        # The original code's own test process died without a verdict: what ended it is
        # the code under test (it closed the runner's pipes, exited, killed its process
        # group), so the step is the patch's failure, never a null that re-shares the
        # weight (which would score like killing every mutant).
        note = ("the control mutant (the original code) crashed: the code under test ends "
                "the processes that judge the mutants")
        return MutationResult(0.0, note, ev)
    verdicts = {name: line["verdict"] for name, line in lines.items()}
    if done is None:  # the session died midway: what it did not judge is not killed
        verdicts |= {x["name"]: "unjudged" for x in chosen if x["name"] not in verdicts}
    extra = _unmutated_survivors(list(unmutated))
    verdicts |= {u["name"]: u["verdict"] for u in extra}
    score, counts = score_verdicts(verdicts)
    ran_out = ran_out or "not_run" in counts
    by_name = {x["name"]: x for x in chosen}
    ev.details["verdicts"] = counts
    ev.details["survivors"] = [
        {k: by_name[n][k] for k in ("name", "path", "line", "diff")}
        | {"verdict": v} for n, v in verdicts.items() if v in SURVIVED and n in by_name] + extra
    ev.details["dropped"] = {n: v for n, v in verdicts.items() if v not in KILLED + SURVIVED}
    if score is None:
        return MutationResult(None, f"no mutant could be judged ({counts})", ev, counts=counts,
                              ran_out=ran_out)
    note = None if done else "the mutation runner died midway: unjudged mutants survive"
    return MutationResult(score, note, ev, counts=counts, ran_out=ran_out)
