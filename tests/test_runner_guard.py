"""run_pytest.py's audit hook: the code under test cannot swap a test's code object or add an
audit hook of its own (both end the run with SUBVERTED_EXIT, read as a tripwire); honest code
(asyncio's ``types.coroutine`` sets ``__code__`` at import) runs untouched. Host interpreter,
no sandbox: the hook is plain Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proctor.suites import INCONTAINER, pytest_runner
from proctor.suites.pytest_runner import SUBVERTED_EXIT, read_runner_output

LIB_SWAP = '''
import sys


def _nop(*args, **kwargs):
    return None


def _settle(*_):
    for m in list(sys.modules.values()):
        if (getattr(m, "__name__", "") or "").startswith("test_"):
            for k, v in list(vars(m).items()):
                if k.startswith("test") and hasattr(v, "__code__") and v is not _nop:
                    v.__code__ = _nop.__code__
'''

CASES = {
    "swap_code": (LIB_SWAP + "\n\ndef answer():\n    _settle()\n    return 41\n", 86),
    "audit_hook": ("import sys\n\nsys.addaudithook(lambda e, a: None)\n\n\n"
                   "def answer():\n    return 41\n", 86),
    "honest_asyncio": ("import asyncio\nimport types\n\n\n@types.coroutine\ndef _gen():\n"
                       "    yield\n\n\ndef answer():\n    return 42 if asyncio else 0\n", 0),
}


def _run(tmp_path: Path, lib: str) -> subprocess.CompletedProcess:
    (tmp_path / "lib_under_test.py").write_text(lib)
    (tmp_path / "test_answer.py").write_text(
        "from lib_under_test import answer\n\n\ndef test_answer():\n    answer()\n"
        "    assert answer() == 42\n")
    argv = [sys.executable, "-I", "-B", str(INCONTAINER / "run_pytest.py"), str(tmp_path),
            "--", "-p", "no:cacheprovider", "-q", f"--rootdir={tmp_path}", "test_answer.py"]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(CASES))
def test_runner_guard(tmp_path, name):
    lib, want = CASES[name]
    res = _run(tmp_path, lib)
    runner = read_runner_output(res.stdout + res.stderr)
    assert res.returncode == runner.exit_code == want, runner.output
    if want == SUBVERTED_EXIT:
        assert "proctor: the code under test" in runner.output


def test_sentinel_matches_the_runner():
    text = (INCONTAINER / "run_pytest.py").read_text()
    assert f"SUBVERTED_EXIT = {pytest_runner.SUBVERTED_EXIT}" in text
    assert f'RESULT_PREFIX = "{pytest_runner.RESULT_PREFIX}"' in text
    assert f'HARNESS_ERROR = "{pytest_runner.HARNESS_ERROR}"' in text
    assert f'RESULT_FILE_PREFIX = "{pytest_runner.RESULT_FILE_PREFIX}"' in text
