"""End to end, real containers: static analysis that cannot be silenced, suppressions and
secrets in added lines (toolz example), and the ``performance`` component of a task that
declares a benchmark (a purpose-built task whose benchmark counts calls, so it is exact)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from proctor import score

pytestmark = pytest.mark.docker
BUGGY_FILE = "toolz/itertoolz.py"
REMOVE_OLD = "    return filterfalse(predicate, seq)\n"
REMOVE_NEW = "    return (x for x in seq if not predicate(x))\n"


@pytest.fixture(scope="module")
def fixed_with(toolz_task, toolz_make_task):
    """``fixed_with(old, new)``: the reference fix plus one more replacement in the file."""
    mk = toolz_make_task
    original = (toolz_task / "repo" / BUGGY_FILE).read_text()
    fixed = original.replace(mk.GETTER_BUGGY, mk.GETTER_ORIGINAL)

    def make(old: str, new: str) -> bytes:
        assert fixed.count(old) == 1
        return mk.make_patch(toolz_task / "repo", {BUGGY_FILE: (original,
                                                                fixed.replace(old, new))})

    return make


def new_findings(rec) -> list[tuple[str, int, str]]:
    found = rec.evidence["static_analysis"].details["new_error_findings"]
    return [(f["path"], f["line"], f["rule"]) for f in found]


def test_import_made_unused_on_an_untouched_line_counts(toolz_task, fixed_with):
    # Rewriting remove() drops the only use of filterfalse: the import on line 6, which the
    # patch does not touch, becomes unused (F401). The finding still counts.
    rec = score(toolz_task, fixed_with(REMOVE_OLD, REMOVE_NEW))
    assert rec.status == "scored" and rec.components["hidden_tests"] == 1.0
    assert new_findings(rec) == [(BUGGY_FILE, 6, "F401")]
    assert rec.components["static_analysis"] == 0.5
    assert rec.flags.suppressions_added is False


def test_ruff_noqa_is_flagged_and_findings_still_count(toolz_task, fixed_with):
    rec = score(toolz_task, fixed_with("import itertools\n",
                                       "# ruff: noqa\nimport itertools\nimport os  # noqa\n"))
    assert rec.status == "scored"
    assert rec.flags.suppressions_added is True
    markers = [s["marker"] for s in rec.evidence["suppressions"].details["suppressions"]]
    assert markers == ["ruff: noqa", "noqa"]
    assert [(p, r) for p, _, r in new_findings(rec)] == [(BUGGY_FILE, "F401")]  # import os
    assert rec.components["static_analysis"] == 0.5


def test_fake_api_key_fails_the_gate_with_the_blocker_named(toolz_task, fixed_with):
    rec = score(toolz_task, fixed_with(
        "import itertools\n", 'import itertools\n_AWS_KEY = "AKIAIOSFODNN7EXAMPLE"\n'))
    assert rec.status == "scored" and rec.components["hidden_tests"] == 1.0
    assert rec.reward > 0.9  # the reward is not the gate: the tests really pass
    assert rec.flags.secret_in_patch is True
    assert rec.verdict.gate == "FAIL"
    assert rec.verdict.rule == ("hard blocker: secret in added lines: "
                                "toolz/itertoolz.py:2 (AWS Access Key)")
    assert "AKIAIOSFODNN7EXAMPLE" not in rec.to_json()  # the secret is never echoed


# --------------------------------------------------------------------------- performance

FIB_BUGGY = '''\
def fib(n):
    """The n-th Fibonacci number: fib(0) == 0, fib(1) == 1."""
    if n < 2:
        return 1
    return fib(n - 1) + fib(n - 2)
'''
FIB_NAIVE = FIB_BUGGY.replace("        return 1\n", "        return n\n")
FIB_MEMO = "from functools import lru_cache\n\n\n@lru_cache(maxsize=None)\n" + FIB_NAIVE
FIB_CRASH = FIB_NAIVE.replace('    """The', '    if n == 20:\n        raise ValueError\n    """The')
BENCH = '''\
"""Counts the Python-level calls of fib while computing fib(20): exact, no clock."""
import sys

from fibo.core import fib

calls = 0


def count(frame, event, arg):
    global calls
    if event == "call" and frame.f_code.co_name == "fib":
        calls += 1


sys.setprofile(count)
value = fib(20)
sys.setprofile(None)
assert value == 6765, value
print(f"calls={calls}")
'''


def make_fibo_task(root: Path, **bench: object) -> Path:
    """A small task: fibo.core.fib has an off-by-one base case; the benchmark counts calls
    (target 100, tolerance 1.0 unless overridden)."""
    files = {
        "repo/fibo/__init__.py": "",
        "repo/fibo/core.py": FIB_BUGGY,
        "repo/tests/test_core.py": "from fibo.core import fib\n\n\n"
        "def test_base_cases():\n    assert (fib(0), fib(1)) == (0, 1)\n\n\n"
        "def test_returns_int():\n    assert isinstance(fib(5), int)\n",
        "hidden/tests/test_hidden.py": "from fibo.core import fib\n\n\n"
        "def test_larger():\n    assert (fib(10), fib(20)) == (55, 6765)\n",
        "bench/bench_fib.py": BENCH,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    settings = {"command": '["{python}", "{bench}/bench_fib.py"]', "dir": '"bench"',
                "metric": '"calls"', "target": "100", "tolerance": "1.0", "weight": "0.1"}
    settings.update({k: repr(v) if isinstance(v, str) else str(v) for k, v in bench.items()})
    body = "\n".join(f"{k} = {v}" for k, v in settings.items())
    (root / "task.toml").write_text(textwrap.dedent("""\
        id = "fibo-perf"
        sources = ["fibo"]
        [tests]
        public = ["tests"]
        [baseline]
        runs = 1
        [benchmark]
        """) + body.replace("'", '"') + "\n")
    return root


@pytest.fixture(scope="module")
def fibo(tmp_path_factory, toolz_make_task):
    root = make_fibo_task(tmp_path_factory.mktemp("fibo"))

    def patch(new: str) -> bytes:
        return toolz_make_task.make_patch(root / "repo", {"fibo/core.py": (FIB_BUGGY, new)})

    return root, patch


def test_memoised_fix_meets_the_target(fibo):
    task, patch = fibo
    rec = score(task, patch(FIB_MEMO))
    assert rec.status == "scored" and rec.components["hidden_tests"] == 1.0
    assert rec.components["performance"] == 1.0
    assert rec.evidence["performance"].details["measured"] == [21.0]
    # Nominal: performance .1, the others scaled by .9 (hidden .315); re-sharing of a
    # component that does not apply keeps the ratios.
    assert rec.weights["performance"] / rec.weights["hidden_tests"] == pytest.approx(0.1 / 0.315)
    assert sum(rec.weights.values()) == pytest.approx(1.0)
    assert rec.flags.degraded is False


def test_naive_fix_is_correct_but_misses_the_target(fibo):
    task, patch = fibo
    naive = score(task, patch(FIB_NAIVE))
    memo = score(task, patch(FIB_MEMO))
    assert naive.components["hidden_tests"] == 1.0
    assert naive.evidence["performance"].details["measured"] == [21891.0]
    assert naive.components["performance"] == 0.0  # far beyond target * (1 + tolerance)
    assert naive.reward < memo.reward


def test_benchmark_that_crashes_scores_zero_with_the_exit_code(fibo):
    task, patch = fibo
    rec = score(task, patch(FIB_CRASH))
    assert rec.components["performance"] == 0.0
    assert rec.measurements.notes["performance"] == "benchmark command exited 1"
    assert rec.flags.degraded is False


def test_benchmark_without_parsable_metric_is_null_and_degraded(tmp_path, toolz_make_task):
    task = make_fibo_task(tmp_path, metric="ops_per_s")
    patch = toolz_make_task.make_patch(task / "repo", {"fibo/core.py": (FIB_BUGGY, FIB_MEMO)})
    rec = score(task, patch)
    assert rec.status == "scored"
    assert rec.components["performance"] is None
    assert rec.flags.degraded is True
    assert "no parsable 'ops_per_s=<number>' line" in rec.component_notes["performance"]
    assert rec.weights["performance"] == 0.0  # re-shared


def test_wall_time_metric_is_measured_by_the_harness(tmp_path, toolz_make_task):
    task = make_fibo_task(tmp_path, metric="wall_s", target=30.0, repeat=3)
    patch = toolz_make_task.make_patch(task / "repo", {"fibo/core.py": (FIB_BUGGY, FIB_MEMO)})
    rec = score(task, patch)
    measured = rec.evidence["performance"].details["measured"]
    assert len(measured) == 3 and all(0 < m < 30 for m in measured)
    assert rec.components["performance"] == 1.0


# --------------------------------------------------------------------------- CLI gate


@pytest.mark.parametrize("fail_under,exit_code", [(50, 0), (99.9, 1)])
def test_cli_fail_under_sets_exit_code_1_below_the_bar(toolz_build, toolz_task, fail_under,
                                                        exit_code):
    from typer.testing import CliRunner

    from proctor.cli import app

    patch = toolz_build / "patches" / "reference.patch"  # gate score 99.8
    result = CliRunner().invoke(app, ["score", str(toolz_task), str(patch),
                                      "--fail-under", str(fail_under)])
    assert result.exit_code == exit_code, result.output
    assert "verdict PASS (99.8/100; score 99.8 >= 80)" in result.stdout
