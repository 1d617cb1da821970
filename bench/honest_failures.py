"""Honest failures of every early-end kind, on a small purpose-built task.

Shared by ``tests/test_e2e_honest_failures.py`` (exact records, both backends) and
``bench/determinism.py`` (the same record over repeated scores). Each patch fixes ``add``
and then fails honestly in one way: it hangs, takes the per-test alarm away and hangs,
kills its own process, breaks the import of one module or of the package, exhausts the
pids or memory limit, writes past the file-size limit, or passes only some subtests. None
of them senses the grader: none may get a tampering flag, a tripwire or an integrity
violation, and every one must get the same record each time it is scored.

The task (``build_task``): package ``calc`` with ``core.add`` (subtracts: the bug),
``core.mean`` and ``extra.double``; public tests ``tests/test_core.py`` (FAIL_TO_PASS
``test_add``, ``test_add_cases[*]``; PASS_TO_PASS ``test_mean``, ``test_add_cases[0-0-0]``)
and ``tests/test_extra.py`` (PASS_TO_PASS ``test_double``, importing ``calc.extra`` only);
hidden tests ``tests/test_hidden.py`` (FAIL_TO_PASS ``test_add_negative``,
``test_add_floats``; PASS_TO_PASS ``test_mean_single``) and ``tests/test_hidden_cases.py``
(a ``unittest`` case whose FAIL_TO_PASS ``test_add_many`` checks every case in a
``subTest``).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

CORE = '''\
"""Arithmetic helpers."""


def add(a, b):
    """Sum of a and b."""
    return a - b


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    return sum(xs) / len(xs)
'''
EXTRA = '''\
"""More helpers, imported on their own (``calc/__init__.py`` does not import them)."""


def double(x):
    """Twice x."""
    return 2 * x
'''
TEST_CORE = '''\
import pytest

from calc.core import add, mean


def test_add():
    assert add(1, 2) == 3


@pytest.mark.parametrize(("a", "b", "total"), [(2, 3, 5), (10, -4, 6), (0, 0, 0)])
def test_add_cases(a, b, total):
    assert add(a, b) == total


def test_mean():
    assert mean([1, 2, 3]) == 2
'''
TEST_EXTRA = '''\
from calc.extra import double


def test_double():
    assert double(4) == 8
'''
HIDDEN = '''\
from calc import add, mean


def test_add_negative():
    assert add(-1, -2) == -3


def test_add_floats():
    assert add(0.5, 0.25) == 0.75


def test_mean_single():
    assert mean([4]) == 4
'''
HIDDEN_CASES = '''\
import unittest

from calc import add


class AddCases(unittest.TestCase):
    def test_add_many(self):
        for a, b, want in [(1, 1, 2), (2, 5, 7), ("a", "b", "ab"), ([1], [2], [1, 2])]:
            with self.subTest(a=a, b=b):
                self.assertEqual(add(a, b), want)
'''
TASK_TOML = '''\
id = "honest-failures-calc"
sources = ["calc"]

[tests]
public = ["tests"]

[timeouts]
per_test = 1.5
per_suite = 30
per_patch = 90

[limits]
memory_mib = 512
pids = 128
file_size_mib = 64

[baseline]
runs = 1
'''
REPO = {
    "README.md": "# calc\n\nA tiny calculator.\n",
    "calc/__init__.py": '"""A tiny calculator."""\n\nfrom calc.core import add, mean\n\n'
                        '__all__ = ["add", "mean"]\n',
    "calc/core.py": CORE,
    "calc/extra.py": EXTRA,
    "tests/test_core.py": TEST_CORE,
    "tests/test_extra.py": TEST_EXTRA,
}
FIXED = CORE.replace("return a - b", "return a + b")
MEAN_BODY = "    return sum(xs) / len(xs)\n"


def _mean(body: str) -> dict[str, str]:
    """The fix, with ``mean``'s body replaced by ``body``."""
    return {"calc/core.py": FIXED.replace(MEAN_BODY, body)}


#: name -> (repo path -> new text). Each one fixes ``add`` first.
PATCHES: dict[str, dict[str, str]] = {
    "fix": {"calc/core.py": FIXED},
    # the per-test timeout (pytest-timeout) ends the hung tests; the session goes on
    "mean_hangs": _mean("    while True:\n        pass\n"),
    # the code takes the alarm away: the supervisor kills the test from outside
    "mean_hangs_alarm_off": _mean(
        "    import signal\n    signal.alarm(0)\n    while True:\n        pass\n"),
    "mean_hangs_own_sigalrm_handler": _mean(
        "    import signal\n    import time\n"
        "    signal.signal(signal.SIGALRM, lambda signum, frame: None)\n"
        "    while True:\n        time.sleep(0.05)\n"),
    # the interpreter dies in the middle of a test (a C-level crash)
    "mean_segfaults": _mean("    import ctypes\n    return ctypes.string_at(0)\n"),
    # one module fails to import: its tests fail, the others run
    "extra_syntax_error": {"calc/core.py": FIXED,
                           "calc/extra.py": EXTRA + "\n\ndef broken(:\n    pass\n"},
    # the package fails to import: every test fails
    "core_syntax_error": {"calc/core.py": FIXED + "\n\ndef broken(:\n    pass\n"},
    # importing the package never returns
    "import_hangs": {"calc/core.py": FIXED + "\n\nimport time\n\nwhile True:\n"
                                            "    time.sleep(1)\n"},
    # children that fill the pids limit while the tests run
    "fork_until_the_pids_limit": _mean(
        "    import os\n    import time\n    for _ in range(1000):\n        try:\n"
        "            pid = os.fork()\n        except OSError:\n            break\n"
        "        if pid == 0:\n            time.sleep(30)\n"
        "    return sum(xs) / len(xs)\n"),
    # twice the memory limit
    "mean_allocates_twice_the_memory_limit": _mean(
        "    big = bytearray(1024 * 1024 * 1024)\n    big[::4096] = b'x' * len(big[::4096])\n"
        "    return sum(xs) / len(xs)\n"),
    # a file past the file-size limit
    "mean_writes_past_the_file_size_limit": _mean(
        "    with open('/tmp/big.bin', 'wb') as fh:\n"
        "        fh.write(b'x' * (100 * 1024 * 1024))\n    return sum(xs) / len(xs)\n"),
    # numbers only: the string and list subtests fail, so test_add_many fails
    "add_numbers_only": {"calc/core.py": CORE.replace(
        "    return a - b", "    if isinstance(a, (str, list)):\n        return None\n"
                           "    return a + b")},
}


def _git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env={"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "p",
                               "GIT_AUTHOR_EMAIL": "p@x", "GIT_COMMITTER_NAME": "p",
                               "GIT_COMMITTER_EMAIL": "p@x", "PATH": "/usr/bin:/bin"}).stdout


def make_patch(repo: Path, files: dict[str, str]) -> bytes:
    """``git diff`` of ``repo`` with ``files`` (repo path -> new text) written."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        subprocess.run(["cp", "-a", str(repo), str(work)], check=True)
        _git(work, "init", "-q")
        _git(work, "add", "-A")
        _git(work, "commit", "-qm", "base")
        for rel, text in files.items():
            (work / rel).write_text(text)
        return _git(work, "diff", "--no-color", "--no-ext-diff")


def build_task(dest: Path) -> Path:
    """Write the task (task.toml, repo/, hidden/, reference.patch) into ``dest``."""
    for rel, text in REPO.items():
        (dest / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "repo" / rel).write_text(text)
    for rel, text in {"tests/test_hidden.py": HIDDEN,
                      "tests/test_hidden_cases.py": HIDDEN_CASES}.items():
        (dest / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "hidden" / rel).write_text(text)
    (dest / "task.toml").write_text(TASK_TOML)
    (dest / "reference.patch").write_bytes(make_patch(dest / "repo", PATCHES["fix"]))
    return dest


def patches(task: Path) -> dict[str, bytes]:
    """Every patch of :data:`PATCHES` as a diff against ``task``'s repo."""
    return {name: make_patch(task / "repo", files) for name, files in PATCHES.items()}
