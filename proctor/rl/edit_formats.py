"""Edits that are not unified diffs, turned into one against the task's files (pure, given
a reader of the files).

Two formats models are trained to write:

* **V4A**, OpenAI's ``apply_patch`` format (Codex, GPT-5, gpt-oss)::

      *** Begin Patch
      *** Update File: path        (then, optionally, *** Move to: new/path)
      @@ def anchor(...)           (zero or more anchor lines, each a line of the file)
       context
      -removed
      +added
      *** Add File: path           (+ lines: the new file)
      *** Delete File: path
      *** End Patch

  Each chunk of an update is found in the file after the previous one (after its
  anchors), as Codex's ``apply_patch`` finds it: the exact lines first, then ignoring
  trailing and then surrounding whitespace; ``*** End of File`` anchors it at the end.
* **SEARCH/REPLACE** blocks (aider, Agentless): a path (on the line before the fence, or
  ``### path`` first in it), then ``<<<<<<< SEARCH``, the text to find, ``=======``, its
  replacement, ``>>>>>>> REPLACE``. The search text must be found in the file exactly
  (the first occurrence is replaced); an empty one creates the file.

An edit that does not match the files raises :class:`EditMismatch` naming the file, the
chunk and what was not found. The unified diff has ``a/`` / ``b/`` headers and three lines
of context, as ``git diff`` writes it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

#: A function reading a repository file's text by its repo-relative path (None: no file).
Reader = Callable[[str], "str | None"]

_V4A = re.compile(r"^\*\*\* Begin Patch[ \t]*\r?$(.*?)(?:^\*\*\* End Patch[ \t]*\r?$|\Z)",
                  re.S | re.M)
_SEARCH = re.compile(r"^<{5,9} SEARCH[ \t]*\r?\n(.*?)^={5,9}[ \t]*\r?\n(.*?)"
                     r"^>{5,9} REPLACE[ \t]*\r?$", re.S | re.M)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class EditMismatch(ValueError):
    """The edit does not match the task's files (the message names where)."""


@dataclass(frozen=True)
class Edit:
    """An edit found in a completion: its ``format`` (``v4a`` or ``search_replace``) and
    ``text`` (the V4A patch, or the answer text holding the SEARCH/REPLACE blocks)."""

    format: str
    text: str


def find_edit(text: str) -> Edit | None:
    """The last V4A patch in ``text``, else its SEARCH/REPLACE blocks, else None."""
    v4a = None
    for m in _V4A.finditer(text):
        v4a = m
    if v4a is not None:
        return Edit("v4a", v4a.group(0))
    if _SEARCH.search(text):
        return Edit("search_replace", text)
    return None


def to_unified(edit: Edit, read: Reader) -> str:
    """``edit`` as a unified diff against the files ``read`` returns.

    Raises:
        EditMismatch: the edit does not match the files, or changes nothing.
    """
    changes = _v4a(edit.text, read) if edit.format == "v4a" else _search_replace(edit.text,
                                                                               read)
    diff = "".join(_file_diff(path, old, new) for path, (old, new) in changes.items())
    if not diff:
        raise EditMismatch(f"the {_NAMES[edit.format]} edit changes nothing")
    return diff


_NAMES = {"v4a": "apply_patch (V4A)", "search_replace": "SEARCH/REPLACE"}


# --------------------------------------------------------------------------- V4A


@dataclass
class _Chunk:
    anchors: list[str]
    old: list[str]
    new: list[str]
    eof: bool = False


def _v4a(text: str, read: Reader) -> dict[str, tuple[str | None, str | None]]:
    """path -> (old text or None, new text or None) of every file the V4A patch touches."""
    lines = text.splitlines()
    out: dict[str, tuple[str | None, str | None]] = {}
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r")
        if line.startswith("*** Add File: "):
            path, body, i = _path(line), [], i + 1
            while i < len(lines) and not lines[i].startswith("*** "):
                body.append(lines[i][1:] if lines[i].startswith("+") else lines[i])
                i += 1
            out[path] = (read(path), "".join(b.rstrip("\r") + "\n" for b in body))
        elif line.startswith("*** Delete File: "):
            path = _path(line)
            old = read(path)
            if old is None:
                raise EditMismatch(f"apply_patch (V4A): {path} to delete does not exist")
            out[path] = (old, None)
            i += 1
        elif line.startswith("*** Update File: "):
            path, i = _path(line), i + 1
            moved = None
            if i < len(lines) and lines[i].startswith("*** Move to: "):
                moved, i = _path(lines[i]), i + 1
            start = i
            while i < len(lines) and not (lines[i].startswith("*** ") and
                                          not lines[i].startswith("*** End of File")):
                i += 1
            old = read(path)
            if old is None:
                raise EditMismatch(f"apply_patch (V4A): {path} to update does not exist")
            new = _updated(path, old, _chunks(lines[start:i]))
            if moved:
                out[path] = (old, None)
                out[moved] = (read(moved), new)
            else:
                out[path] = (old, new)
        else:
            i += 1
    if not out:
        raise EditMismatch("apply_patch (V4A): no Add, Update or Delete File section")
    return out


def _path(line: str) -> str:
    return line.split(": ", 1)[1].strip()


def _chunks(lines: list[str]) -> list[_Chunk]:
    chunks: list[_Chunk] = []
    current: _Chunk | None = None
    for raw in lines:
        line = raw.rstrip("\r")
        if line.startswith("@@"):
            anchor = line[2:].strip()
            if current is None or current.old or current.new:
                current = _Chunk([], [], [])
                chunks.append(current)
            if anchor:
                current.anchors.append(anchor)
            continue
        if line.startswith("*** End of File"):
            if current is not None:
                current.eof = True
            continue
        if current is None:
            current = _Chunk([], [], [])
            chunks.append(current)
        kind, body = (line[:1], line[1:]) if line[:1] in (" ", "-", "+") else (" ", line)
        if kind != "+":
            current.old.append(body)
        if kind != "-":
            current.new.append(body)
    return [c for c in chunks if c.old or c.new]


def _updated(path: str, text: str, chunks: list[_Chunk]) -> str:
    """``text`` with the V4A ``chunks`` applied in order, each found after the last."""
    lines = text.split("\n")
    final_newline = lines[-1] == ""
    if final_newline:
        lines.pop()
    at, replacements = 0, []
    for n, chunk in enumerate(chunks, 1):
        for anchor in chunk.anchors:
            found = _seek(lines, [anchor], at)
            if found is None:
                raise EditMismatch(f"apply_patch (V4A): {path}, chunk {n}: the anchor line "
                                   f"{anchor[:80]!r} is not in the file")
            at = found + 1
        if not chunk.old:
            replacements.append((len(lines), 0, chunk.new))
            continue
        found = _seek(lines, chunk.old, len(lines) - len(chunk.old) if chunk.eof else at)
        if found is None:
            raise EditMismatch(f"apply_patch (V4A): {path}, chunk {n}: its "
                               f"{len(chunk.old)} context and removed lines are not in the "
                               f"file (first: {chunk.old[0][:80]!r})")
        replacements.append((found, len(chunk.old), chunk.new))
        at = found + len(chunk.old)
    for start, length, new in sorted(replacements, reverse=True):
        lines[start:start + length] = new
    return "\n".join(lines) + ("\n" if final_newline or not lines else "")


def _seek(lines: list[str], pattern: list[str], start: int) -> int | None:
    """Where ``pattern`` starts in ``lines`` at or after ``start``: exactly, then ignoring
    trailing, then surrounding whitespace (Codex's ``seek_sequence``)."""
    start = max(0, start)
    for norm in (lambda s: s, str.rstrip, str.strip):
        want = [norm(p) for p in pattern]
        for i in range(start, len(lines) - len(pattern) + 1):
            if all(norm(lines[i + k]) == want[k] for k in range(len(pattern))):
                return i
    return None


# --------------------------------------------------------------------------- SEARCH/REPLACE


def _search_replace(text: str, read: Reader) -> dict[str, tuple[str | None, str | None]]:
    lines = text.split("\n")
    starts = [text.count("\n", 0, m.start()) for m in _SEARCH.finditer(text)]
    current: dict[str, str | None] = {}
    original: dict[str, str | None] = {}
    path = None
    for n, (m, line_no) in enumerate(zip(_SEARCH.finditer(text), starts, strict=True), 1):
        path = _block_path(lines, line_no) or path
        if path is None:
            raise EditMismatch(f"SEARCH/REPLACE block {n}: no file path before it")
        if path not in current:
            original[path] = current[path] = read(path)
        search, replace = m.group(1), m.group(2)
        old = current[path]
        if not search.strip():
            current[path] = (old or "") + replace
            continue
        if old is None or search not in old:
            raise EditMismatch(f"SEARCH/REPLACE block {n}: its search text is not in {path} "
                               f"exactly (first line: {search.splitlines()[0][:80]!r})")
        current[path] = old.replace(search, replace, 1)
    return {p: (original[p], current[p]) for p in current}


def _block_path(lines: list[str], at: int) -> str | None:
    """The path a SEARCH block at line ``at`` names: ``### path`` right before it, or the
    path on the line before the fence that opens right before it."""
    k = at - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k >= 0 and lines[k].startswith("### "):
        return lines[k][4:].strip() or None
    if k >= 0 and _FENCE.match(lines[k]):
        k -= 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        candidate = lines[k].strip().strip("`*:") if k >= 0 else ""
        if candidate and " " not in candidate and ("/" in candidate or "." in candidate):
            return candidate
    return None


# --------------------------------------------------------------------------- unified diff


def _file_diff(path: str, old: str | None, new: str | None) -> str:
    """``git diff``'s text for one file going from ``old`` to ``new`` (None: absent)."""
    if old == new:
        return ""
    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    body = list(difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{path}",
                                     "/dev/null" if new is None else f"b/{path}", n=3))
    out = []
    for line in body:
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(head + out)
