"""Baseline classification and grading (pure, design.md section 1)."""

import pytest

from proctor.errors import TaskConfigError
from proctor.suites.baseline import classify, grade_run, validate

P, F = "passed", "failed"


def test_with_reference_f2p_p2p_and_quarantine_reasons():
    base = [{"a": F, "b": P, "c": F, "d": P, "e": F}] * 3
    ref = [{"a": P, "b": P, "c": F, "d": F, "e": P}] * 3
    s = classify(base, ref)
    assert s.fail_to_pass == ["a", "e"]
    assert s.pass_to_pass == ["b"]
    assert s.quarantined == {"c": "fails with the reference patch too",
                             "d": "fails with the reference patch too"}


def test_flaky_on_base_is_quarantined():
    base = [{"a": P, "b": F}, {"a": F, "b": F}, {"a": P, "b": F}]
    s = classify(base, [{"a": P, "b": P}] * 3)
    assert s.quarantined == {"a": "flaky on the base repo"}
    assert s.fail_to_pass == ["b"]


def test_flaky_with_reference_is_quarantined():
    s = classify([{"a": F}] * 2, [{"a": P}, {"a": F}])
    assert s.quarantined == {"a": "flaky with the reference patch"}


def test_without_reference_every_base_failure_is_f2p_unless_known_broken():
    base = [{"a": F, "b": "error", "c": P, "k": F}] * 3
    s = classify(base, None, known_broken={"k"})
    assert s.fail_to_pass == ["a", "b"]
    assert s.pass_to_pass == ["c"]
    assert s.quarantined == {"k": "known broken (task.toml)"}


def test_test_missing_on_base_but_passing_with_reference_is_f2p():
    # a module that fails to import on the base repo: its tests only appear with the fix
    s = classify([{"x": P}] * 2, [{"x": P, "new": P}] * 2)
    assert s.fail_to_pass == ["new"]


@pytest.mark.parametrize("outcome", ["skipped", "xfailed", "error", "timeout", "missing"])
def test_grade_run_counts_only_passed_as_passed(outcome):
    s = classify([{"a": F, "b": P}], [{"a": P, "b": P}])
    graded = grade_run(s, {"a": outcome, "b": outcome} if outcome != "missing" else {})
    assert (graded.f2p_passed, graded.f2p_total) == (0, 1)
    assert (graded.p2p_failed, graded.p2p_total) == (1, 1)
    assert graded.fail_to_pass == {"a": outcome} and graded.pass_to_pass == {"b": outcome}


def test_empty_suite_is_a_configuration_error():
    suites = {"public": classify([{}] * 3, None), "hidden": classify([{"a": F}] * 3, None)}
    with pytest.raises(TaskConfigError, match="suite 'public' collected zero tests"):
        validate(suites, has_reference=False)


def test_no_fail_to_pass_is_a_configuration_error():
    suites = {"public": classify([{"a": P}], [{"a": P}]),
              "hidden": classify([{"b": P}], [{"b": P}])}
    with pytest.raises(TaskConfigError, match="no FAIL_TO_PASS.*reference patch makes no"):
        validate(suites, has_reference=True)


def test_test_skipped_in_every_base_run_is_quarantined_not_a_target():
    # regression: a skipif(Python < 3.14) test was classified FAIL_TO_PASS without a reference
    s = classify([{"s": "skipped", "a": F}] * 3, None)
    assert s.fail_to_pass == ["a"]
    assert s.quarantined == {"s": "skipped on the base repo (cannot run here)"}
    with_ref = classify([{"s": "skipped"}] * 2, [{"s": "passed"}] * 2)
    assert with_ref.fail_to_pass == ["s"]
