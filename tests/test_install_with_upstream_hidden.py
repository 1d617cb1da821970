"""``install = true`` together with ``hidden_at_upstream_path = true`` (real Docker
sandboxes, real setuptools build): the patched repo is installed in each test sandbox, and
the hidden tests, placed at their upstream paths after the install, import their own test
package, use the visible conftest's fixture and read the installed package's metadata.

The install's repository-change check runs before the hidden files are placed, so the
placement itself is never taken for build code writing into the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor import load_task, score
from proctor.harness.pipeline import INSTALL_FAILED
from proctor.patch import code_lines_changed
from proctor.rewards import diff_cost
from tests.test_redteam_corpus import make_patch
from tests.test_task_install import CORE, FIXED, INIT, PUBLIC, PYPROJECT, WHEEL

pytestmark = pytest.mark.docker

CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef pair():\n    return (-2, -3)\n"
HELPER = "def check_add(add, a, b):\n    assert add(a, b) == a + b\n"
HIDDEN = ("import importlib.metadata as md\n\nimport verpkg\n\nfrom . import helper\n\n\n"
          "def test_add_pair(pair):\n    helper.check_add(verpkg.add, *pair)\n\n\n"
          "def test_installed_version():\n"
          "    assert md.version('verpkg') == verpkg.__version__ == '1.2.3'\n")
TOML = ('id = "verpkg-upstream"\nsources = ["verpkg"]\ninstall = true\n'
        'hidden_at_upstream_path = true\n' + WHEEL + '\n\n'
        '[tests]\npublic = ["tests/test_public.py"]\n\n[baseline]\nruns = 1\n')


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("install-upstream") / "task"
    files = {"task.toml": TOML, "repo/pyproject.toml": PYPROJECT,
             "repo/verpkg/__init__.py": INIT, "repo/verpkg/core.py": CORE,
             "repo/tests/__init__.py": "", "repo/tests/conftest.py": CONFTEST,
             "repo/tests/test_public.py": PUBLIC,
             "hidden/tests/helper.py": HELPER, "hidden/tests/test_hidden.py": HIDDEN}
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")
    patch = make_patch(dest / "repo", {"verpkg/core.py": FIXED}, dest.parent / "scratch")
    (dest / "reference.patch").write_bytes(patch)
    return dest


def test_the_reference_fix_scores_full_marks_with_both_fields(task_dir):
    task = load_task(task_dir)
    assert task.config.install and task.config.hidden_at_upstream_path
    patch = (task_dir / "reference.patch").read_bytes()
    rec = score(task, patch, rollout_id="reference")
    assert rec.status == "scored", rec.error
    assert rec.reason is None and not rec.integrity.violated
    assert rec.tests["hidden"].fail_to_pass == {"tests/test_hidden.py::test_add_pair": "passed"}
    assert rec.tests["hidden"].pass_to_pass == {
        "tests/test_hidden.py::test_installed_version": "passed"}
    assert rec.evidence["install_hidden"].exit_code == 0
    assert rec.evidence["install_hidden"].details["repo_changes"] == []
    assert rec.components["public_tests"] == rec.components["hidden_tests"] == 1.0
    assert rec.components["mutation_score"] == 1.0
    assert rec.reward == pytest.approx(1.0 - diff_cost(code_lines_changed(patch.decode())))


def test_a_broken_build_fails_the_placed_hidden_tests_as_install_failed(task_dir, tmp_path):
    broken = PYPROJECT.replace('version = "1.2.3"', 'version = "1.2.3 beta"')
    patch = make_patch(task_dir / "repo", {"verpkg/core.py": FIXED,
                                           "pyproject.toml": broken}, tmp_path / "scratch")
    rec = score(load_task(task_dir), patch, rollout_id="broken-build")
    assert rec.status == "scored", rec.error
    assert rec.reason == INSTALL_FAILED and not rec.integrity.violated
    assert rec.tests["hidden"].fail_to_pass == {"tests/test_hidden.py::test_add_pair": "missing"}
    assert rec.components["hidden_tests"] == -1.0
    assert rec.measurements.notes["hidden_tests"].startswith(f"{INSTALL_FAILED}: pip exited 1")
