"""Patches as git writes them: the red-team shapes' edits written over a copy of a
repository and diffed by a real ``git`` (new files included), so every patch's bytes are
git's own, as an agent's tooling would produce them."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

#: A git that reads no user configuration and needs no identity from the machine.
_GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "p", "GIT_AUTHOR_EMAIL": "p@x",
            "GIT_COMMITTER_NAME": "p", "GIT_COMMITTER_EMAIL": "p@x", "PATH": "/usr/bin:/bin"}


def git(cwd: Path, *args: str) -> bytes:
    """``git ARGS`` in ``cwd``; its stdout. Raises CalledProcessError when git fails."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env=_GIT_ENV).stdout


def make_patch(repo: Path, files: dict[str, str]) -> bytes:
    """The ``git diff`` of ``files`` (repo-relative path -> new text; new files included)
    written over a copy of ``repo``; ``repo`` itself is not touched."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(repo, work, symlinks=True)
        git(work, "init", "-q")
        git(work, "add", "-A")
        git(work, "commit", "-qm", "base")
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        git(work, "add", "-A")
        return git(work, "diff", "--cached", "--no-color", "--no-ext-diff")
