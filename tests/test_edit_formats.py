"""Edits in other formats than unified diffs (``proctor.rl.edit_formats``): V4A
``apply_patch`` and SEARCH/REPLACE blocks, converted against a repository's files into the
unified diff ``git apply`` takes, or refused with a reason naming where they do not match."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from proctor.rl.edit_formats import Edit, EditMismatch, find_edit, to_unified

FILES = {
    "pkg/mod.py": "import os\n\n\ndef f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n",
    "pkg/old.py": "A = 1\n",
    "README": "no final newline",
}


def read(path: str) -> str | None:
    return FILES.get(path)


def applied(tmp_path: Path, diff: str) -> dict[str, str | None]:
    """The files after ``git apply`` of ``diff`` on a repository holding :data:`FILES`."""
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    proc = subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=diff.encode(),
                          capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    names = set(FILES) | {"pkg/new.py", "pkg/moved.py"}
    return {n: (tmp_path / n).read_text() if (tmp_path / n).exists() else None for n in names}


def test_v4a_update_with_anchors_add_delete_and_move(tmp_path):
    v4a = ("*** Begin Patch\n*** Update File: pkg/mod.py\n@@ def g(x):\n-    return x * 2\n"
           "+    return x * 3\n*** Add File: pkg/new.py\n+B = 2\n+C = 3\n"
           "*** Delete File: pkg/old.py\n*** End Patch\n")
    edit = find_edit("Here:\n" + v4a + "Done.")
    assert edit == Edit("v4a", v4a.rstrip("\n"))
    after = applied(tmp_path, to_unified(edit, read))
    assert after["pkg/mod.py"] == FILES["pkg/mod.py"].replace("x * 2", "x * 3")
    assert after["pkg/new.py"] == "B = 2\nC = 3\n" and after["pkg/old.py"] is None
    moved = ("*** Begin Patch\n*** Update File: pkg/old.py\n*** Move to: pkg/moved.py\n"
             "@@\n-A = 1\n+A = 2\n*** End Patch")
    (tmp_path / "m").mkdir()
    after = applied(tmp_path / "m", to_unified(find_edit(moved), read))
    assert after["pkg/old.py"] is None and after["pkg/moved.py"] == "A = 2\n"


def test_v4a_finds_chunks_in_order_ignoring_trailing_whitespace_and_keeps_no_final_newline(
        tmp_path):
    # the same context twice: each chunk is looked for after the one before it
    v4a = ("*** Begin Patch\n*** Update File: pkg/mod.py\n@@\n \n-def f(x):\n+def f(y):\n"
           "@@\n \n-def g(x):   \n+def g(y):\n*** Update File: README\n-no final newline\n"
           "+still none\n*** End of File\n*** End Patch")
    after = applied(tmp_path, to_unified(find_edit(v4a), read))
    assert "def f(y):" in after["pkg/mod.py"] and "def g(y):" in after["pkg/mod.py"]
    assert after["README"] == "still none"


@pytest.mark.parametrize(("v4a", "why"), [
    ("*** Update File: pkg/mod.py\n@@ def h(x):\n-    return x\n+    return 0\n",
     "pkg/mod.py, chunk 1: the anchor line 'def h(x):' is not in the file"),
    ("*** Update File: pkg/mod.py\n-    return x - 1\n+    return 0\n",
     "pkg/mod.py, chunk 1: its 1 context and removed lines are not in the file "
     "(first: '    return x - 1')"),
    ("*** Update File: pkg/none.py\n-a\n+b\n", "pkg/none.py to update does not exist"),
    ("*** Delete File: pkg/none.py\n", "pkg/none.py to delete does not exist"),
    ("nothing here\n", "no Add, Update or Delete File section"),
])
def test_a_v4a_edit_that_does_not_match_says_where(v4a, why):
    with pytest.raises(EditMismatch, match="apply_patch") as exc:
        to_unified(Edit("v4a", f"*** Begin Patch\n{v4a}*** End Patch"), read)
    assert why in str(exc.value)


def test_search_replace_blocks_of_aider_and_agentless(tmp_path):
    aider = ("Change it:\n\npkg/mod.py\n```python\n<<<<<<< SEARCH\n    return x + 1\n=======\n"
             "    return x + 2\n>>>>>>> REPLACE\n```\n")
    agentless = ("```python\n### pkg/mod.py\n<<<<<<< SEARCH\ndef g(x):\n=======\n"
                 "def g(x, y=0):\n>>>>>>> REPLACE\n```\n")
    new_file = "pkg/new.py\n```python\n<<<<<<< SEARCH\n=======\nB = 2\n>>>>>>> REPLACE\n```\n"
    edit = find_edit(aider + agentless + new_file)
    assert edit.format == "search_replace"
    after = applied(tmp_path, to_unified(edit, read))
    assert "return x + 2" in after["pkg/mod.py"] and "def g(x, y=0):" in after["pkg/mod.py"]
    assert after["pkg/new.py"] == "B = 2\n"


@pytest.mark.parametrize(("text", "why"), [
    ("pkg/mod.py\n```\n<<<<<<< SEARCH\n    return x+1\n=======\nX\n>>>>>>> REPLACE\n```",
     "SEARCH/REPLACE block 1: its search text is not in pkg/mod.py exactly "
     "(first line: '    return x+1')"),
    ("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
     "SEARCH/REPLACE block 1: no file path before it"),
])
def test_a_search_replace_edit_that_does_not_match_exactly_says_where(text, why):
    with pytest.raises(EditMismatch) as exc:
        to_unified(find_edit(text), read)
    assert str(exc.value) == why


def test_no_edit_in_plain_text_or_a_unified_diff():
    assert find_edit("I changed pkg/mod.py: return x + 2.") is None
    assert find_edit("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n") is None
