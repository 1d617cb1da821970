"""The runners that host the code under test keep the sandbox's ``PYTHONHASHSEED=0``:
pytest ids parametrized from a set (``case3``) name the same case in every run, so the
baseline's FAIL_TO_PASS test is the patched run's, never "missing", and nothing is
quarantined as flaky. With ``python -I`` (which implies ``-E``) the seed was dropped and
real suites (isodate's ``TEST_CASES`` set) lost their FAIL_TO_PASS tests between runs."""

from __future__ import annotations

import pytest

from proctor import load_task, score

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]
BASE = "def shout(word):\n    return word if word.startswith('k') else word.upper()\n"
FIXED = "def shout(word):\n    return word.upper()\n"
PUBLIC = ("import pytest\n\nfrom pkg.core import shout\n\n"
          f"CASES = {{{', '.join(f'({w!r}, len({w!r}))' for w in WORDS)}}}\n\n\n"
          "@pytest.mark.parametrize('case', CASES)\n"
          "def test_shout(case):\n    assert shout(case[0]) == case[0].upper()\n")
TOML = """\
id = "hash-seed"
sources = ["pkg"]

[tests]
public = ["tests/test_core.py"]

[baseline]
runs = 3
"""


@pytest.fixture
def task_and_patch(tmp_path, toolz_make_task):
    root = tmp_path / "task"
    (root / "repo/pkg").mkdir(parents=True)
    (root / "repo/tests").mkdir()
    (root / "hidden/tests").mkdir(parents=True)
    (root / "task.toml").write_text(TOML)
    (root / "repo/pkg/__init__.py").write_text("")
    (root / "repo/pkg/core.py").write_text(BASE)
    (root / "repo/tests/test_core.py").write_text(PUBLIC)
    (root / "hidden/tests/test_hidden.py").write_text(
        "from pkg.core import shout\n\n\ndef test_kappa():\n    assert shout('kappa') == 'KAPPA'\n")
    patch = toolz_make_task.make_patch(root / "repo", {"pkg/core.py": (BASE, FIXED)})
    return load_task(root), patch


@pytest.mark.docker
def test_set_parametrized_ids_are_the_same_case_in_every_run(docker_ready, task_and_patch,
                                                             monkeypatch, tmp_path):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    task, patch = task_and_patch
    first, again = score(task, patch), score(task, patch)
    public = first.tests["public"]
    assert public.quarantined == []
    assert (public.f2p_passed, public.f2p_total, public.p2p_total) == (1, 1, 11)
    assert list(public.fail_to_pass.values()) == ["passed"]
    assert first.components["public_tests"] == 1.0
    assert first.reward == again.reward
    assert first.tests == again.tests
