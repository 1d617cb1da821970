"""Pure apply of one file's hunks (proctor.patch.patched_text), checked against git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from proctor.patch import HunkMismatch, patched_texts
from proctor.patch.patched_text import apply_file, file_diffs

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git_diff(tmp: Path, old: str | None, new: str | None, name: str = "f.txt") -> str:
    """``git diff --no-index`` of two texts (None: the file does not exist)."""
    for side, t in (("a", old), ("b", new)):
        (tmp / side).mkdir(parents=True, exist_ok=True)
        if t is not None:
            (tmp / side / name).write_bytes(t.encode())
    args = [f"a/{name}" if old is not None else "/dev/null",
            f"b/{name}" if new is not None else "/dev/null"]
    out = subprocess.run(["git", "diff", "--no-index", "--no-prefix", "-U1", *args],
                         capture_output=True, cwd=tmp, env=ENV).stdout
    return out.decode()


CASES = {
    "middle": ("a\nb\nc\nd\ne\n", "a\nb\nX\nd\ne\n"),
    "insert_top": ("a\nb\n", "new\na\nb\n"),
    "append": ("a\nb\n", "a\nb\nc\n"),
    "drop_eol": ("a\nb\n", "a\nb"),
    "add_eol": ("a\nb", "a\nb\n"),
    "delete_all_lines": ("a\nb\n", ""),
    "two_hunks": ("".join(f"{i}\n" for i in range(20)),
                  "".join(f"{i}\n" for i in range(20)).replace("3\n", "x\n").replace("15\n", "")),
    "new_file": (None, "hello\nworld\n"),
    "crlf": ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pure_apply_matches_the_new_text(tmp_path, name):
    old, new = CASES[name]
    (fd,) = file_diffs(git_diff(tmp_path, old, new))
    assert apply_file(old, fd) == new


def test_hunk_moved_by_an_offset_still_applies(tmp_path):
    old = "a\nb\nc\n"
    (fd,) = file_diffs(git_diff(tmp_path, old, "a\nB\nc\n"))
    assert apply_file("top1\ntop2\n" + old, fd) == "top1\ntop2\na\nB\nc\n"


def test_hunk_that_does_not_match_raises(tmp_path):
    (fd,) = file_diffs(git_diff(tmp_path, "a\nb\nc\n", "a\nB\nc\n"))
    with pytest.raises(HunkMismatch):
        apply_file("x\ny\nz\n", fd)


def test_patched_texts_maps_deletions_to_none(tmp_path):
    text = git_diff(tmp_path, "a\n", None, "gone.txt")
    assert patched_texts(text, {"gone.txt": "a\n"}) == {"gone.txt": None}
