"""The per-patch deadline (proctor/harness/pipeline/deadline.py) and how the executor's steps
use it: pure arithmetic on a fake clock, no sandbox."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from proctor.errors import InfraError
from proctor.harness.pipeline import NOT_RUN_NOTE, Deadline, measure
from proctor.harness.pipeline.deadline import (
    MIN_STEP_S,
    file_check_budgets,
    mutation_budgets,
)
from proctor.record import Measurements
from proctor.sandbox import KILLERS_WAIT_SLACK_S
from proctor.suites import SuiteRun


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_budget_is_the_steps_own_timeout_capped_by_what_is_left(clock):
    d = Deadline(40, clock=clock)
    assert d.budget(30) == 30 and d.left() == 40
    clock.tick(27)
    assert d.budget(30) == pytest.approx(13) and d.capped(30, d.budget(30))
    assert not d.capped(5, d.budget(5))
    clock.tick(12.5)
    assert d.budget(30) == pytest.approx(0.5) and not d.can_start()
    clock.tick(100)
    # no floor: after the deadline a step gets nothing (it used to get 1 s each)
    assert d.budget(30) == 0.0 and d.left() == 0.0 and not d.can_start()


def test_can_start_needs_a_second(clock):
    d = Deadline(10, clock=clock)
    clock.tick(10 - MIN_STEP_S)
    assert d.can_start()
    clock.tick(0.01)
    assert not d.can_start()


def test_task_preparation_is_not_counted(clock):
    d = Deadline(40, clock=clock)
    clock.tick(1.0)  # integrity
    clock.tick(300.0)  # the baseline, computed once per task
    d.exclude(300.0)
    assert d.left() == pytest.approx(39.0)
    assert d.shares() == (0.0, pytest.approx(1.0))


def test_patch_code_time_is_the_union_of_its_steps(clock):
    d = Deadline(100, clock=clock)
    clock.tick(2)  # harness: sandbox creation
    with d.patch_code():  # public suite ...
        clock.tick(3)
        with d.patch_code():  # ... and, alongside, the hidden suite: counted once
            clock.tick(4)
        clock.tick(1)
        assert d.shares() == (pytest.approx(8), pytest.approx(2))  # an open interval counts
    clock.tick(5)  # harness: teardown, host work
    assert d.shares() == (pytest.approx(8), pytest.approx(7))


def test_patch_code_from_two_threads(clock):
    d = Deadline(100, clock=clock)
    inside, release = threading.Barrier(2), threading.Event()

    def other():
        with d.patch_code():
            inside.wait()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait()
    clock.tick(3)
    with d.patch_code():
        clock.tick(2)
    release.set()
    t.join()
    clock.tick(1)
    assert d.shares() == (pytest.approx(5), pytest.approx(1))


def test_the_patchs_hung_tests_are_its_failure(clock):
    d = Deadline(40, clock=clock)
    clock.tick(1.5)
    with d.patch_code():
        clock.tick(37.0)  # public 27 s, hidden cut at the deadline
    note = d.ran_out("the mutation step")
    assert note.startswith(NOT_RUN_NOTE) and "not started" in note
    assert "cut short" in d.ran_out("the hidden tests", cut=True)


def test_slow_harness_operations_are_an_infrastructure_error(clock):
    d = Deadline(40, clock=clock)
    clock.tick(35)  # sandbox creation on an overloaded engine
    with d.patch_code():
        clock.tick(4)
    with pytest.raises(InfraError) as exc:
        d.ran_out("the hidden tests", cut=True)
    assert exc.value.retryable and "harness's own operations" in str(exc.value)


def test_mutation_budgets_end_within_what_is_left():
    assert mutation_budgets(900, 120, 300) == (120, 300 + KILLERS_WAIT_SLACK_S)
    assert mutation_budgets(200, 120, 300) == (120, 80)
    assert mutation_budgets(12.5, 120, 30) == (12.5, 0.0)
    assert mutation_budgets(0.0, 120, 30) == (0.0, 0.0)
    for left in (0.0, 3.0, 60.0, 149.0, 151.0, 500.0):
        timeout, wait = mutation_budgets(left, 120, 30)
        assert 0 <= timeout <= 120 and 0 <= wait <= 60 and timeout + wait <= left + 1e-9


def test_file_check_budgets_end_within_what_is_left():
    assert file_check_budgets(898, 120, 120, 60) == (120, 120, 60)
    budgets = file_check_budgets(38, 120, 120, 60)
    assert budgets == pytest.approx((15.2, 15.2, 7.6)) and sum(budgets) <= 38


# ------------------------------------------------------------ the executor's suite step


def _run(seconds: float, *, clock: Clock, timed_out: bool = False):
    def run(timeout: float) -> SuiteRun:
        clock.tick(min(seconds, timeout))
        return SuiteRun(suite="hidden", outcomes={"t::a": "passed"}, command="pytest",
                        exit_code=1, duration_s=seconds, output="",
                        timed_out=timed_out or seconds >= timeout)
    return run


def test_a_suite_with_no_time_left_is_not_run_and_fails(clock):
    d, m = Deadline(40, clock=clock), Measurements()
    with d.patch_code():
        clock.tick(39.5)
    res = measure.suite_within(m, d, "hidden", 30, _run(1, clock=clock))
    assert res.outcomes == {} and res.timed_out and res.duration_s == 0.0
    assert m.notes["hidden_tests"].startswith(NOT_RUN_NOTE)
    assert clock.now == pytest.approx(1039.5)  # nothing ran


def test_a_suite_the_deadline_cuts_short_keeps_its_verdicts_and_says_why(clock):
    d, m = Deadline(40, clock=clock), Measurements()
    with d.patch_code():
        clock.tick(28)
    res = measure.suite_within(m, d, "hidden", 30, _run(100, clock=clock))
    assert res.outcomes == {"t::a": "passed"} and clock.now == pytest.approx(1040)
    assert "cut short" in m.notes["hidden_tests"]


def test_a_suite_timing_out_on_its_own_budget_gets_no_deadline_note(clock):
    d, m = Deadline(900, clock=clock), Measurements()
    res = measure.suite_within(m, d, "public", 30, _run(100, clock=clock))
    assert res.timed_out and "public_tests" not in m.notes


def test_a_runner_the_deadline_left_no_time_to_start_is_not_an_infra_error(clock):
    d, m = Deadline(40, clock=clock), Measurements()
    with d.patch_code():
        clock.tick(38)

    def run(timeout):
        clock.tick(timeout)
        raise InfraError("the harness's pytest plugin did not start (exit -9)")

    res = measure.suite_within(m, d, "hidden", 30, run)
    assert res.outcomes == {} and "cut short" in m.notes["hidden_tests"]
    # with time to spare, the same failure is the harness's
    d = Deadline(900, clock=clock)
    with pytest.raises(InfraError, match="plugin did not start"):
        measure.suite_within(Measurements(), d, "hidden", 30, run)


def test_a_suite_cut_after_slow_harness_operations_is_an_infra_error(clock):
    d = Deadline(40, clock=clock)
    clock.tick(36)  # sandbox creation
    with pytest.raises(InfraError, match="harness's own operations"):
        measure.suite_within(Measurements(), d, "public", 30, _run(100, clock=clock))


# ------------------------------------------------------- the mutation step and benchmark


def _fake_task(benchmark=None):

    return SimpleNamespace(config=SimpleNamespace(
        mutation=SimpleNamespace(timeout_s=120.0),
        timeouts=SimpleNamespace(per_suite=30.0), benchmark=benchmark),
        pythonpath_in=lambda repo: [])


def _trace():
    from proctor.harness.pipeline.outcomes import Trace
    from proctor.record import EnvInfo

    return Trace(env=EnvInfo(proctor_version="x"))


def _mutation_step(monkeypatch, clock, deadline, result, seconds):
    """Run the executor's mutation step with a fake ``run_mutation`` that takes
    ``seconds`` (at most its whole time) and returns ``result``; returns (m, trace, its
    timeout and killers wait, or None when it was not called)."""
    from proctor.sandbox import Limits

    called = []

    def fake_run_mutation(sb, task, data, strategy, summary, killers, *, workers, cpus,
                          timeout, killers_wait_s, reach=None, never_kill=()):
        called.append((timeout, killers_wait_s))
        clock.tick(min(seconds, timeout + killers_wait_s))
        return result

    monkeypatch.setattr(measure, "run_mutation", fake_run_mutation)
    m, trace = Measurements(), _trace()
    hidden = SuiteRun(suite="hidden", outcomes={}, command="", exit_code=1, duration_s=0,
                      output="", stray_processes=0)
    baseline = SimpleNamespace(reach=None, suites={})  # no reach maps, nothing quarantined
    ctx = measure.Measuring(trace, m, _fake_task(), b"", None, None, baseline, Limits(),
                            deadline)
    measure.measure_mutation(ctx, None, None, hidden)
    return m, trace, (called[0] if called else None)


def _mutation(score, ran_out=False, note=None):
    from proctor.record import Evidence
    from proctor.suites import MutationResult

    return MutationResult(score, note, Evidence(command="mutmut"), ran_out=ran_out)


def test_mutation_gets_what_is_left_and_keeps_a_finished_score(monkeypatch, clock):
    d = Deadline(40, clock=clock)
    with d.patch_code():
        clock.tick(26)  # the hidden suite hung
    m, trace, budgets = _mutation_step(monkeypatch, clock, d, _mutation(0.5), 5)
    assert budgets == (pytest.approx(14), 0.0)  # not 120 + 60
    assert m.mutation_score == 0.5 and "mutation_score" not in m.notes
    assert trace.evidence["mutation"].command == "mutmut"


def test_mutation_cut_short_by_the_deadline_is_zero_never_partial(monkeypatch, clock):
    d = Deadline(40, clock=clock)
    with d.patch_code():
        clock.tick(30)
    m, _, budgets = _mutation_step(monkeypatch, clock, d, _mutation(0.8, ran_out=True), 99)
    assert budgets == (pytest.approx(10), 0.0) and clock.now == pytest.approx(1040)
    assert m.mutation_score == 0.0
    assert m.notes["mutation_score"].startswith(NOT_RUN_NOTE)
    assert "cut short" in m.notes["mutation_score"]


def test_mutation_running_out_of_its_own_budget_keeps_its_rules(monkeypatch, clock):
    d = Deadline(900, clock=clock)  # the step's own 120 s + 60 s are not capped
    m, _, budgets = _mutation_step(monkeypatch, clock, d,
                                   _mutation(0.8, ran_out=True, note="budget spent"), 500)
    assert budgets == (120, 60)
    assert m.mutation_score == 0.8 and m.notes["mutation_score"] == "budget spent"


def test_mutation_with_no_time_left_is_zero_and_not_started(monkeypatch, clock):
    d = Deadline(40, clock=clock)
    with d.patch_code():
        clock.tick(39.5)
    m, _, budgets = _mutation_step(monkeypatch, clock, d, _mutation(1.0), 1)
    assert budgets is None
    assert m.mutation_score == 0.0 and m.notes["mutation_score"].startswith(NOT_RUN_NOTE)


def test_mutation_kept_from_running_by_slow_harness_operations_is_an_infra_error(
        monkeypatch, clock):
    d = Deadline(40, clock=clock)
    clock.tick(39.5)
    with pytest.raises(InfraError):
        _mutation_step(monkeypatch, clock, d, _mutation(1.0), 1)


class _BenchSandbox:
    """Answers the benchmark wrapper: each run takes ``seconds`` (at most its timeout) of
    ``clock`` and prints a result; a run cut at its timeout is ``timed_out``."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds, self.timeouts = clock, seconds, []

    def run(self, argv, *, timeout, cwd=None):
        import json

        from proctor.sandbox import ExecResult

        self.timeouts.append(timeout)
        took = min(self.seconds, timeout)
        self.clock.tick(took)
        out = json.dumps({"output": "", "exit_code": 0, "wall_s": took, "max_rss_mib": 9.0})
        return ExecResult(tuple(argv), 0, out, took, timed_out=self.seconds >= timeout)


def test_benchmark_runs_share_their_time_and_say_when_it_ran_out(monkeypatch, clock):
    from proctor.suites import benchmark
    from proctor.task import BenchmarkConfig

    monkeypatch.setattr(benchmark.time, "monotonic", clock)
    cfg = BenchmarkConfig(command=["x"], target=1.0, timeout_s=10, repeat=3)
    sb = _BenchSandbox(clock, 2.0)
    res = benchmark.run_benchmark(sb, cfg, repo="/work/repo", bench_dir=None, timeout=30)
    assert res.score == 0.0 and not res.ran_out and sb.timeouts == [10, 10, 10]  # 2 s > 1
    sb = _BenchSandbox(clock, 4.0)
    res = benchmark.run_benchmark(sb, cfg, repo="/work/repo", bench_dir=None, timeout=9)
    assert sb.timeouts == [9, 5, 1] and res.ran_out and res.score == 0.0
    sb = _BenchSandbox(clock, 4.0)
    res = benchmark.run_benchmark(sb, cfg, repo="/work/repo", bench_dir=None, timeout=8.5)
    assert sb.timeouts == [8.5, 4.5] and res.ran_out and "after 2 of 3 runs" in res.note
    sb = _BenchSandbox(clock, 20.0)  # its own timeout: no deadline involved
    res = benchmark.run_benchmark(sb, cfg, repo="/work/repo", bench_dir=None, timeout=100)
    assert res.score == 0.0 and not res.ran_out and "timed out after 10 s" in res.note


@pytest.mark.parametrize("per_patch,ran_out,expect_note", [
    (40, True, True),  # cut short by the deadline: 0.0, not the partial runs' score
    (900, True, False),  # not capped: the benchmark's own rules
    (40, False, False),  # finished in what was left
])
def test_benchmark_step_under_the_deadline(monkeypatch, clock, per_patch, ran_out,
                                           expect_note):
    from proctor.record import Evidence
    from proctor.suites import BenchmarkResult
    from proctor.task import BenchmarkConfig

    cfg = BenchmarkConfig(command=["x"], target=1.0, timeout_s=10, repeat=3)
    given = []

    def fake(sb, cfg, *, repo, bench_dir, timeout, pythonpath=()):
        given.append(timeout)
        clock.tick(timeout if ran_out else 1)
        return BenchmarkResult(0.7, [1.0], "wall_s median 1", False, Evidence(),
                               ran_out=ran_out)

    monkeypatch.setattr(measure, "run_benchmark", fake)
    monkeypatch.setattr(measure, "kill_user_processes", lambda sb: None)
    monkeypatch.setattr(measure, "place_bench_dir", lambda sb, task: None)
    d = Deadline(per_patch, clock=clock)
    with d.patch_code():
        clock.tick(25)
    m, trace = Measurements(), _trace()
    measure.measure_performance(
        measure.Measuring(trace, m, _fake_task(cfg), b"", None, None, None, None, d), None)
    assert given == [pytest.approx(min(30, per_patch - 25))]
    if expect_note:
        assert m.performance == 0.0 and m.notes["performance"].startswith(NOT_RUN_NOTE)
    else:
        assert m.performance == 0.7 and m.notes["performance"] == "wall_s median 1"
