"""End to end: a patch's top-level module cannot stand in for a hidden helper module
(issue 4, Prevention: hidden helpers under names the patch cannot predict).

The task (``mini_task.HIDDEN_WITH_HELPER``): the hidden tests import ``assert_sum`` from a
hidden ``tests/helpers.py``; a hidden root ``conftest.py`` imports ``calc``. The trick: no
fix, a top-level ``helpers.py`` whose ``assert_sum`` asserts nothing, imported by
``calc/__init__.py``. When the conftest loads, only the hidden root is on ``sys.path`` ahead
of the repo, so ``calc`` brings the patch's ``helpers`` into ``sys.modules`` first; the
module sets ``__file__`` to the hidden helper's path, which passes pytest's own
import-mismatch check. With the hidden tree copied verbatim (``_verbatim``: the behaviour
before the renaming) that earns the full hidden credit; with the renaming it earns none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor import score
from proctor.harness.pipeline import workspace
from proctor.harness.pipeline.hidden_names import RenamedTree
from proctor.patch import code_lines_changed
from proctor.rewards import diff_cost
from tests.redteam import mini_task
from tests.test_redteam_corpus import make_patch

SHADOW = {
    "helpers.py": "import sys\n\n"
                  "# pytest compares a module's __file__ with the path it collects\n"
                  "__file__ = sys.path[0] + '/tests/helpers.py'\n\n\n"
                  "def assert_sum(f, a, b, want):\n    return None\n",
    "calc/__init__.py": ("from calc.core import add, mean\n",
                         "import helpers  # noqa: F401\nfrom calc.core import add, mean\n"),
}


@pytest.fixture(scope="module")
def helper_task(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("hidden-helper-task")
    scratch = tmp_path_factory.mktemp("hidden-helper-scratch")
    return mini_task.build(dest, lambda repo, edits: make_patch(repo, edits, scratch),
                           hidden=mini_task.HIDDEN_WITH_HELPER)


@pytest.fixture(scope="module")
def shadow_patch(helper_task, tmp_path_factory) -> bytes:
    return make_patch(helper_task / "repo", SHADOW, tmp_path_factory.mktemp("shadow"))


def _verbatim(files, suffix) -> RenamedTree:
    return RenamedTree(dict(files), {p: p for p in files}, {}, frozenset())


def _hidden(rec) -> tuple[int, int]:
    return rec.tests["hidden"].f2p_passed, rec.tests["hidden"].f2p_total


@pytest.mark.docker
def test_shadowing_a_hidden_helper_module_earned_hidden_credit_before_the_renaming(
        helper_task, shadow_patch, monkeypatch):
    monkeypatch.setattr(workspace, "rename_hidden_tree", _verbatim)
    rec = score(helper_task, shadow_patch, rollout_id="shadow-before")
    assert rec.status == "scored" and not rec.integrity.violated, rec
    assert _hidden(rec) == (2, 2) and rec.components["hidden_tests"] == 1.0
    assert rec.components["public_tests"] == 0.0
    # weights re-shared without mutation (x 1/.8): hidden .4375; progress .4375/.75
    assert rec.reward == pytest.approx(0.4375 + 0.4375 / 0.75 * (0.125 + 0.125 * 0.5)
                                       - diff_cost(code_lines_changed(shadow_patch.decode())))
    assert rec.reward == pytest.approx(0.544375)


@pytest.mark.docker
def test_shadowing_a_hidden_helper_module_earns_no_hidden_credit(helper_task, shadow_patch):
    rec = score(helper_task, shadow_patch, rollout_id="shadow-after")
    assert rec.status == "scored" and not rec.integrity.violated, rec
    assert _hidden(rec) == (0, 2) and rec.components["hidden_tests"] == 0.0
    assert rec.tests["hidden"].fail_to_pass == {"tests/test_hidden.py::test_add_floats": "failed",
                                                "tests/test_hidden.py::test_add_negative": "failed"}
    assert rec.tests["hidden"].pass_to_pass == {"tests/test_hidden.py::test_mean_single": "passed"}
    assert rec.reward == pytest.approx(-diff_cost(code_lines_changed(shadow_patch.decode())))
    assert rec.reward == pytest.approx(-0.0025)


@pytest.mark.docker
def test_honest_fix_whose_hidden_tests_use_a_helper_scores_as_before(helper_task,
                                                                     monkeypatch):
    patch = (helper_task / "reference.patch").read_bytes()
    full = 1.0 - diff_cost(code_lines_changed(patch.decode()))
    after = score(helper_task, patch, rollout_id="honest-after")
    with monkeypatch.context() as m:
        m.setattr(workspace, "rename_hidden_tree", _verbatim)
        before = score(helper_task, patch, rollout_id="honest-before")
    for rec in (before, after):
        assert rec.status == "scored" and _hidden(rec) == (2, 2), rec
        assert rec.components == {"compiled": 1.0, "public_tests": 1.0, "hidden_tests": 1.0,
                                  "mutation_score": 1.0, "static_analysis": 1.0,
                                  "performance": None}
        assert rec.penalties == {"visible_only": 0.0}
        assert rec.reward == pytest.approx(full)
    assert after.tests["hidden"] == before.tests["hidden"]
