"""A task whose code lives in a package's ``__init__.py``: inflection 0.5.1 from its PyPI sdist.

``inflection/__init__.py`` holds every function; ``test_inflection.py`` (repository root)
tests them. The injected bug drops ``13`` from ``ordinal``'s teen check, so ``ordinal(13)``
is ``"rd"``; the reference patch restores the line. ``test_ordinalize`` (and the table it
reads) moves to the hidden test file ``test_inflection_hidden.py``; every other test stays
public, so ``test_ordinal`` fails on the repo and passes with the reference patch.

Used by ``tests/test_e2e_mutation.py`` and ``bench/mutation.py``. Standard library only,
plus ``pip download`` (the sdist is cached in ``examples/toolz/build/.cache``, beside the
toolz sdist).
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = ROOT / "examples" / "toolz" / "build" / ".cache"
VERSION = "0.5.1"
SDIST = f"inflection-{VERSION}.tar.gz"
SHA256 = "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417"
SOURCE = "inflection/__init__.py"
PUBLIC_TEST = "test_inflection.py"
HIDDEN_TEST = "test_inflection_hidden.py"

ORIGINAL_LINE = "    if number % 100 in (11, 12, 13):\n"
BUGGY_LINE = "    if number % 100 in (11, 12):\n"
HIDDEN_TEST_NAME = (
    '@pytest.mark.parametrize(("number", "ordinalized"), ORDINAL_NUMBERS)\n'
    "def test_ordinalize(number, ordinalized):\n"
    "    assert ordinalized == inflection.ordinalize(number)\n")

TASK_TOML = f"""\
id = "inflection-ordinal-teens"
description = \"\"\"
inflection.ordinal(13) returns "rd" and ordinalize(113) gives "113rd": every number ending
in 13 gets the wrong suffix. Fix ordinal.
\"\"\"
sources = ["inflection"]

[tests]
public = ["{PUBLIC_TEST}"]
hidden_dir = "hidden"
known_broken = []

[timeouts]
per_test = 30
per_suite = 120
per_patch = 600

[baseline]
runs = 1
"""


class DownloadError(RuntimeError):
    """The sdist could not be fetched from PyPI."""


def _make_task_module():
    spec = importlib.util.spec_from_file_location(
        "toolz_make_task_inflection", ROOT / "examples" / "toolz" / "make_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fetch_sdist(cache: Path = DEFAULT_CACHE) -> Path:
    """The sdist in ``cache`` (downloaded when missing). Raises DownloadError when pip
    cannot fetch it, RuntimeError when its sha256 is not the expected one."""
    path = cache / SDIST
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
               "--retries", "2", "--timeout", "30", "--no-deps", "--no-binary", ":all:",
               f"inflection=={VERSION}", "-d", str(cache)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0 or not path.is_file():
            raise DownloadError(f"pip download inflection=={VERSION} failed:\n"
                                f"{proc.stderr[-2000:]}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256:
        path.unlink()
        raise RuntimeError(f"{path}: sha256 {digest} != expected {SHA256} (deleted, rerun)")
    return path


def _split_tests(text: str) -> tuple[str, str]:
    """(public text without ``test_ordinalize``, hidden text: the imports, the ordinal
    table and ``test_ordinalize``)."""
    if text.count(HIDDEN_TEST_NAME) != 1:
        raise RuntimeError(f"{PUBLIC_TEST}: test_ordinalize not found once")
    public = text.replace(HIDDEN_TEST_NAME + "\n\n", "")
    start = text.index("ORDINAL_NUMBERS = (")
    table = text[start:text.index("\n)\n", start) + 3]
    hidden = ("# -*- coding: utf-8 -*-\nimport pytest\n\nimport inflection\n\n"
              f"{table}\n\n{HIDDEN_TEST_NAME}")
    return public, hidden


def original_source(task: Path) -> str:
    """``inflection/__init__.py`` as released (the repo's text with the bug undone)."""
    text = (task / "repo" / SOURCE).read_text(encoding="utf-8")
    return text.replace(BUGGY_LINE, ORIGINAL_LINE)


def make_patch(task: Path, edits: dict[str, tuple[str | None, str]]) -> bytes:
    """``git diff`` of ``edits`` (repo path -> (old text or None, new text)) on the repo."""
    return _make_task_module().make_patch(task / "repo", edits)


def build(out: Path, cache: Path = DEFAULT_CACHE) -> Path:
    """Write the task into ``out/task`` (task.toml, repo/, hidden/, reference.patch) and
    return that directory."""
    sdist = fetch_sdist(cache)
    task = out / "task"
    shutil.rmtree(task, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        shutil.copytree(Path(tmp) / f"inflection-{VERSION}", task / "repo",
                        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    repo = task / "repo"
    source = (repo / SOURCE).read_text(encoding="utf-8")
    if source.count(ORIGINAL_LINE) != 1:
        raise RuntimeError(f"{SOURCE}: the teen check not found once")
    (repo / SOURCE).write_text(source.replace(ORIGINAL_LINE, BUGGY_LINE), encoding="utf-8",
                               newline="\n")
    public, hidden = _split_tests((repo / PUBLIC_TEST).read_text(encoding="utf-8"))
    (repo / PUBLIC_TEST).write_text(public, encoding="utf-8", newline="\n")
    (task / "hidden").mkdir()
    (task / "hidden" / HIDDEN_TEST).write_text(hidden, encoding="utf-8", newline="\n")
    (task / "task.toml").write_text(TASK_TOML, encoding="utf-8", newline="\n")
    (task / "reference.patch").write_bytes(
        make_patch(task, {SOURCE: (BUGGY_LINE, ORIGINAL_LINE)}))
    return task


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve()))
