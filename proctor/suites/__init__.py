"""Part 3 of the design, the suites: what is measured inside a sandbox. The pytest runner
and its report channel, the cached baseline (FAIL_TO_PASS / PASS_TO_PASS), the file checks
(compiled, static analysis, snapshot), mutation on the changed lines, the task benchmark,
and the tripwires. Each returns measurements; none decides a reward."""

from __future__ import annotations

from proctor.suites.baseline import Baseline, calibrated, grade_suite, load_or_compute_baseline
from proctor.suites.benchmark import BenchmarkResult, run_benchmark
from proctor.suites.bytecode import (
    BYTECODE_ENV,
    BYTECODE_MOUNT,
    MUTATION_BYTECODE_MOUNT,
    build_bytecode,
    bytecode_dir,
    bytecode_enabled,
    bytecode_key,
    store_bytecode,
)
from proctor.suites.file_checks import run_file_checks
from proctor.suites.mutation import (
    NO_PROGRESS_NOTE,
    MutationResult,
    cannot_change_reward,
    run_mutation,
    select_mutants,
    trusted_killers,
)
from proctor.suites.pytest_runner import INCONTAINER, SuiteRun, install_harness, run_suite
from proctor.suites.reach import ReachMap
from proctor.suites.snapshot import snapshot_step
from proctor.suites.tripwires import EmbeddedTripwire, embed_tripwire
from proctor.suites.variants import (
    PASSED,
    STATE_REPEATS,
    VARIANTS,
    changed_verdicts,
    check_variants,
    undecided_verdicts,
)

__all__ = [
    "BYTECODE_ENV", "BYTECODE_MOUNT", "Baseline", "BenchmarkResult", "EmbeddedTripwire",
    "INCONTAINER", "MUTATION_BYTECODE_MOUNT", "MutationResult", "NO_PROGRESS_NOTE", "PASSED",
    "ReachMap", "STATE_REPEATS",
    "SuiteRun", "VARIANTS", "build_bytecode", "bytecode_dir", "bytecode_enabled",
    "bytecode_key", "calibrated", "cannot_change_reward", "changed_verdicts", "check_variants",
    "embed_tripwire", "grade_suite", "install_harness", "load_or_compute_baseline",
    "run_benchmark", "run_file_checks", "run_mutation", "run_suite", "select_mutants",
    "snapshot_step", "store_bytecode", "trusted_killers", "undecided_verdicts"
]
