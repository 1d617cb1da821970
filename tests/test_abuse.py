"""Abuse cases, end to end on both backends: a patch that attacks the machine costs one
rollout, never the run. For each: the record is ``scored`` (an honest failure of the patch,
never an infrastructure error), the affected tests fail, ``proctor.score`` returns within the
per-patch deadline plus 5 s, and nothing is left behind (leak check).

The patches and the small-limits task are in ``bench/abuse_cases.py`` (shared with the soak).
"""

from __future__ import annotations

import resource

import pytest

from bench.abuse_cases import ABUSES, HARMLESS, TIMEOUTS, WHOLE_SUITE, make_abuse_task
from proctor import score

# On warm sandboxes (made ahead, as in a batch): the outcomes below were found on fresh
# ones, so both ways must agree (tests/conftest.py::warm_module).
pytestmark = pytest.mark.usefixtures("warm_module")

MiB = 1024**2

BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]


@pytest.fixture(scope="session")
def abuse_task(toolz_task, tmp_path_factory):
    """The toolz task with short timeouts and small limits."""
    return make_abuse_task(toolz_task, tmp_path_factory.mktemp("abuse") / "task")


@pytest.fixture(scope="session")
def abuse_patches(make_toolz_patch):
    return {name: make_toolz_patch({"toolz/itertoolz.py": edit})
            for name, edit in ABUSES.items()}


@pytest.fixture(scope="session")
def honest(abuse_task, toolz_patches):
    """Per backend: the reference patch's record (also computes the cached baseline)."""
    done = {}

    def get(backend: str):
        if backend not in done:
            done[backend] = score(abuse_task, toolz_patches["reference"], sandbox=backend)
            assert done[backend].status == "scored", done[backend].error
        return done[backend]

    return get


@pytest.mark.parametrize("abuse", sorted(ABUSES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_abuse_costs_one_rollout_never_the_run(backend, abuse, abuse_task, abuse_patches,
                                               honest):
    assert honest(backend).reward > 0.9
    rec = score(abuse_task, abuse_patches[abuse], sandbox=backend, rollout_id=abuse)
    assert rec.status == "scored", rec.error
    assert rec.timing["total_s"] <= TIMEOUTS["per_patch"] + 5
    assert not rec.flags.tests_tampered and not rec.flags.tripwire
    hidden, public = rec.tests["hidden"], rec.tests["public"]
    if abuse in HARMLESS:
        # changes nothing a test checks: scored like a no-op change; the code scan's
        # suspicion (os._exit in library code) costs nothing, since no FAIL_TO_PASS test
        # passed for it to have bought
        assert rec.penalties == {"visible_only": 0.0}
        assert rec.evidence["differential"].details["verdict"] == "cleared"
        assert -0.1 <= rec.reward <= 0.0
    elif abuse in WHOLE_SUITE:
        assert hidden.p2p_failed == hidden.p2p_total and public.p2p_failed == public.p2p_total
        assert rec.reward < -0.5
    else:  # the tests that call `first` fail, the others pass ...
        assert hidden.pass_to_pass["toolz/tests/test_itertoolz.py::test_first"] != "passed"
        # an early end (an OOM kill, the suite's budget) is no tampering: the tests that
        # reported keep their verdicts, the others fail
        assert 0 < hidden.p2p_failed < hidden.p2p_total
        assert rec.reward < 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert peak < 500 * MiB  # the harness process (this one) stays small
