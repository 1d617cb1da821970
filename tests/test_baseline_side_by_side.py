"""The baseline's two patch states side by side: the reference patch's runs on a thread of
their own (a second sandbox slot permitting) while the base repo's run, and the reach
recording in the base repo's sandbox after its runs. The baseline is the same either way.

Fast tests with fake suites (the contract of ``load_or_compute_baseline``), then one end to
end on Docker (the toolz example with one run per state).
"""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from proctor import load_task
from proctor.errors import TaskConfigError
from proctor.suites import load_or_compute_baseline

REF = b"--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


@pytest.fixture
def ref_task(tmp_path):
    """A task with a reference patch: FAIL_TO_PASS test_a (fails on the base repo)."""
    root = tmp_path / "ref"
    (root / "repo" / "pkg").mkdir(parents=True)
    (root / "repo" / "pkg" / "m.py").write_text("x = 1\n")
    (root / "repo" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (root / "hidden").mkdir()
    (root / "hidden" / "test_h.py").write_text("def test_h():\n    assert True\n")
    (root / "reference.patch").write_bytes(REF)
    (root / "task.toml").write_text(
        'id = "ref"\nsources = ["pkg"]\n[tests]\npublic = ["test_a.py"]\n'
        "[baseline]\nruns = 2\n")
    return load_task(root)


def fake_suites(calls: list, fail_base: bool = False):
    """``run_suites`` that records (state, thread, start, end) and sleeps 0.3 s."""

    def run_suites(patch, runs):
        start = time.monotonic()
        time.sleep(0.3)
        calls.append(("ref" if patch else "base", threading.get_ident(), start,
                      time.monotonic()))
        if fail_base and patch is None:
            raise TaskConfigError("the base repo's suite collected nothing")
        verdict = "passed" if patch else "failed"
        return {"public": [{"test_a.py::test_a": verdict}] * runs,
                "hidden": [{"test_h.py::test_h": "passed"}] * runs}

    return run_suites


def reached(reach) -> dict[str, dict[str, list[str]]]:
    """suite -> function -> the tests that entered it, the tripwires left out (their names
    are drawn anew for each run: ``::test_<hex>``)."""
    return {suite: {fn: sorted(m.tests[i] for i in ids if not m.tests[i].startswith("::"))
                    for fn, ids in m.reach.items()} for suite, m in reach.items()}


def pool_alongside(pool):
    return lambda fn: pool.submit(fn)


def test_the_reference_runs_beside_the_base_repo_and_the_baseline_is_the_same(
        ref_task, tmp_path, monkeypatch):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "turn"))
    calls_turn: list = []
    in_turn = load_or_compute_baseline(ref_task, "sha256:img", fake_suites(calls_turn))
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "beside"))
    calls: list = []
    with ThreadPoolExecutor(1) as pool:
        beside = load_or_compute_baseline(ref_task, "sha256:img", fake_suites(calls),
                                          alongside=pool_alongside(pool))
    assert [c[0] for c in calls_turn] == ["base", "ref"]
    (base,) = [c for c in calls if c[0] == "base"]
    (ref,) = [c for c in calls if c[0] == "ref"]
    assert base[1] == threading.get_ident() and ref[1] != base[1]
    assert ref[2] < base[3] and base[2] < ref[3]  # the two runs overlapped in time
    assert beside.suites == in_turn.suites
    assert beside.suites["public"].fail_to_pass == ["test_a.py::test_a"]


def test_no_second_slot_runs_the_reference_in_turn(ref_task, tmp_path, monkeypatch):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "c"))
    calls: list = []
    baseline = load_or_compute_baseline(ref_task, "sha256:img", fake_suites(calls),
                                        alongside=lambda fn: None)
    assert [(c[0], c[1]) for c in calls] == [("base", threading.get_ident()),
                                             ("ref", threading.get_ident())]
    assert baseline.suites["public"].fail_to_pass == ["test_a.py::test_a"]


def test_the_base_repos_error_is_raised_once_the_reference_run_ended(
        ref_task, tmp_path, monkeypatch):
    """Nothing of the baseline outlives the call: its sandboxes are closed when it raises."""
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "c"))
    calls: list = []
    with ThreadPoolExecutor(1) as pool:
        futures = []

        def alongside(fn):
            futures.append(pool.submit(lambda: (time.sleep(0.5), fn())[1]))
            return futures[-1]

        with pytest.raises(TaskConfigError, match="collected nothing"):
            load_or_compute_baseline(ref_task, "sha256:img", fake_suites(calls, True),
                                     alongside=alongside)
        assert futures[0].done()  # before the error reached the caller
    assert not (tmp_path / "c" / "baselines").exists() or not list(
        (tmp_path / "c" / "baselines").glob("*.json"))


@pytest.fixture
def toolz_one_run(toolz_task, tmp_path):
    """The toolz example with one run per state (a task of its own: a fresh baseline)."""
    root = tmp_path / "toolz1"
    shutil.copytree(toolz_task, root, symlinks=True)
    toml = (root / "task.toml").read_text()
    assert "\nruns = 3\n" in toml
    (root / "task.toml").write_text(toml.replace("\nruns = 3\n", "\nruns = 1\n"))
    return load_task(root)


@pytest.mark.docker
def test_a_baseline_takes_two_sandboxes_side_by_side_and_is_the_same_computed_again(
        toolz_one_run, docker_ready, count_containers, tmp_path, monkeypatch):
    from proctor.harness.pipeline import slots, task_baseline
    from proctor.harness.pipeline.suites_in_sandbox import baseline_runner
    from proctor.sandbox import Limits, docker_client, resolve_image

    task, (tag, image_id) = toolz_one_run, resolve_image(docker_client())
    slots.reset_peak()
    with count_containers() as counter, slots.acquire():  # held, as a score's preparation
        beside = task_baseline(task, tag, image_id, Limits())
    assert len(counter.created) == 2  # the base repo (with the reach run) and the reference
    assert slots.stats()["peak"] == 2  # the reference's sandbox took a second slot: at once
    hidden = beside.suites["hidden"]
    assert "toolz/tests/test_itertoolz.py::test_getter" in hidden.fail_to_pass
    assert len(hidden.fail_to_pass) == 6 and hidden.pass_to_pass
    # Computed again elsewhere (another cache, as on another machine), in turn: the same
    # classification and the same reach maps. The maps depend on where each run's tripwire
    # went among the tests; those draws come from the task, so both recordings are equal
    # (with unpredictable draws, three recordings of this task gave three different maps).
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    run_suites, record_reach = baseline_runner(task, tag, Limits())
    again = load_or_compute_baseline(task, image_id, run_suites, False, record_reach)
    assert again.suites == beside.suites
    assert beside.reach is not None and again.reach is not None
    assert reached(again.reach) == reached(beside.reach)
    for suite in ("public", "hidden"):
        assert "toolz/itertoolz.py::getter" in beside.reach[suite].reach
