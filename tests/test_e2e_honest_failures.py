"""Honest failures of every early-end kind, end to end on both backends: scored with a named
reason, never a tampering flag, a tripwire, an integrity violation or ``status: error``, and
the same record when scored again. The task and patches are ``bench/honest_failures.py``
(shared with ``bench/determinism.py``)."""

from __future__ import annotations

import pytest

from bench import honest_failures
from proctor import score

BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]

#: name -> (reward, ended_early of the public and of the hidden suite, outcomes that are not
#: "passed": test name -> outcome, over both suites). The same on both backends, but where a
#: backend enforces a limit differently (the local backend has no memory cgroup: a
#: MemoryError fails the test in-process instead of the kernel killing it).
EXPECTED = {
    "fix": (0.999, [], [], {}),
    "mean_hangs": (0.4641666666666667, [], [], {"test_mean": "timeout",
                                                "test_mean_single": "timeout"}),
    "mean_hangs_alarm_off": (0.4131666666666667, ["test_timeout"], ["test_timeout"],
                             {"test_mean": "timeout", "test_mean_single": "timeout"}),
    "mean_hangs_own_sigalrm_handler": (0.38488888888888895, ["test_timeout"],
                                       ["test_timeout"], {"test_mean": "timeout",
                                                          "test_mean_single": "timeout"}),
    "mean_segfaults": (0.4308333333333334, ["interpreter_exit"], ["interpreter_exit"],
                       {"test_mean": "crashed", "test_mean_single": "crashed"}),
    "extra_syntax_error": (0.748, ["collection_error"], [], {"test_double": "error"}),
    "core_syntax_error": (-0.602, ["collection_error"], ["collection_error"], "error"),
    "import_hangs": (-0.6024999999999999, ["collection_error"], ["collection_error"],
                     "error"),
    # mutation judged: the stats pass's forks die with its child, so mutants can fork again
    "fork_until_the_pids_limit": (0.8611666666666667, [], [], {}),
    "mean_allocates_twice_the_memory_limit": (0.3800512820512821, ["resource_limit"],
                                              ["resource_limit"], {
                                                  "test_mean": "crashed",
                                                  "test_mean_single": "crashed"}),
    "mean_writes_past_the_file_size_limit": (0.3757777777777778, [], [], {
        "test_mean": "failed", "test_mean_single": "failed"}),
    "add_numbers_only": (0.7702222222222221, [], [], {"test_add_many": "failed"}),
}
#: Where the local backend differs: no memory cgroup, so the allocation fails in-process.
LOCAL = {"mean_allocates_twice_the_memory_limit": (
    0.3800512820512821, [], [], {"test_mean": "failed", "test_mean_single": "failed"})}
#: Cases whose code sleeps until a timeout ends it (see the ``waits`` marker); the busy
#: loops (``mean_hangs``, ``mean_hangs_alarm_off``) spend the CPU and stay with the others.
WAITS = {"import_hangs", "mean_hangs_own_sigalrm_handler"}
#: Scored a second time: the record must not change (bench/determinism.py does every case
#: five times). The hang among them is one whose test the supervisor kills (its SIGALRM
#: handler keeps pytest-timeout's alarm from ending it), as ``mean_hangs_alarm_off``'s is:
#: the one that sleeps, so its second score waits beside the CPU-bound tests.
AGAIN = {"mean_hangs_own_sigalrm_handler", "mean_segfaults", "extra_syntax_error",
         "core_syntax_error"}


@pytest.fixture(scope="session")
def hf_task(tmp_path_factory):
    task = honest_failures.build_task(tmp_path_factory.mktemp("honest-failures"))
    return task, honest_failures.patches(task)


def _same(a, b) -> None:
    for field in ("status", "reward", "reason", "components", "penalties", "flags",
                  "integrity"):
        assert getattr(a, field) == getattr(b, field), field
    for suite in ("public_tests", "hidden_tests"):
        assert a.evidence[suite].details["ended_early"] == \
            b.evidence[suite].details["ended_early"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.waits) if n in WAITS else n
                                  for n in sorted(EXPECTED)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_honest_failure_is_scored_with_its_reason_and_no_flag(backend, name, hf_task):
    task, patches = hf_task
    reward, public_end, hidden_end, failing = (LOCAL if backend == "local" else {}).get(
        name, EXPECTED[name])
    rec = score(task, patches[name], sandbox=backend, rollout_id=name)
    assert rec.status == "scored", rec.error
    assert rec.env.sandbox == backend
    assert not rec.flags.tests_tampered and not rec.flags.tripwire
    assert not rec.flags.exclude_from_advantage and not rec.integrity.violated
    assert rec.reward == pytest.approx(reward, abs=1e-12), rec.components
    assert rec.evidence["public_tests"].details["ended_early"] == public_end
    assert rec.evidence["hidden_tests"].details["ended_early"] == hidden_end
    got = {t.split("::")[-1]: o for suite in rec.tests.values()
           for t, o in {**suite.fail_to_pass, **suite.pass_to_pass}.items() if o != "passed"}
    if failing == "error":  # every test of both suites
        assert set(got.values()) == {"error"} and len(got) == 10
    else:
        assert got == failing
    if name in AGAIN:
        _same(rec, score(task, patches[name], sandbox=backend, rollout_id=name))
