"""Apply the hunks of one file of a patch to its pristine text, in pure Python.

Used where a file's patched content must be judged before any container exists (the
per-section judgement of ``pyproject.toml`` in the integrity phase). Nothing is executed.
The post-apply check reads the real content from the sandbox, so a disagreement between
this reading and ``git apply`` is re-judged there, never trusted blindly.

Like ``git apply`` without fuzz: the context and removed lines of every hunk must match
exactly; a hunk may move (offset) to the matching position nearest to the line its header
states. ``\\ No newline at end of file`` is honoured on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proctor.patch.parse import HUNK_HEADER, PathRejected, normalise_path


class HunkMismatch(ValueError):
    """A hunk's context or removed lines are not in the pristine text."""


@dataclass
class Hunk:
    """One hunk: 1-based ``old_start``; ``old``/``new``: lines without their newline."""

    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    old_no_eol: bool = False  # the old side's last line has no newline
    new_no_eol: bool = False


@dataclass
class FileDiff:
    """The hunks of one file; paths normalised (None for ``/dev/null``)."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)


def _name(raw: str) -> str | None:
    name = raw.rstrip("\r").split("\t", 1)[0]
    if name == "/dev/null":
        return None
    try:
        return normalise_path(name)
    except PathRejected:
        return None


def file_diffs(text: str) -> list[FileDiff]:
    """Every ``---``/``+++`` file section of a unified diff with its hunks (pure).

    Sections without hunks (mode-only, renames without content, binary) are omitted.

    Raises:
        HunkMismatch: a malformed hunk (bad header, shorter than its counts).
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[FileDiff] = []
    cur: FileDiff | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            cur = FileDiff(_name(line[4:]), _name(lines[i + 1][4:]))
            out.append(cur)
            i += 2
            continue
        if line.startswith("@@") and cur is not None:
            i = _read_hunk(lines, i, cur)
            continue
        i += 1
    return [fd for fd in out if fd.hunks]


def _read_hunk(lines: list[str], i: int, cur: FileDiff) -> int:
    m = HUNK_HEADER.match(lines[i])
    if not m:
        raise HunkMismatch(f"malformed hunk header {lines[i]!r}")
    old_n = 1 if m[2] is None else int(m[2])
    new_n = 1 if m[4] is None else int(m[4])
    hunk = Hunk(old_start=int(m[1]))
    cur.hunks.append(hunk)
    i += 1
    last = None
    while old_n > 0 or new_n > 0 or (i < len(lines) and lines[i].startswith("\\")):
        if i >= len(lines):
            raise HunkMismatch("hunk shorter than its header")
        line = lines[i]
        c, body = line[:1], line[1:]
        if c in (" ", ""):
            hunk.old.append(body)
            hunk.new.append(body)
            old_n, new_n, last = old_n - 1, new_n - 1, "both"
        elif c == "-":
            hunk.old.append(body)
            old_n, last = old_n - 1, "old"
        elif c == "+":
            hunk.new.append(body)
            new_n, last = new_n - 1, "new"
        elif c == "\\":
            hunk.old_no_eol |= last in ("old", "both")
            hunk.new_no_eol |= last in ("new", "both")
        else:
            raise HunkMismatch(f"stray line in hunk: {line[:80]!r}")
        i += 1
    return i


def apply_file(pristine: str | None, fd: FileDiff) -> str:
    """The text after applying ``fd``'s hunks to ``pristine`` (None: the file is new).

    Returns ``""`` for a deletion (callers look at ``fd.new_path is None``).

    Raises:
        HunkMismatch: a hunk's old lines are not found in the text.
    """
    lines = [] if not pristine else pristine.split("\n")
    eol = True
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        eol = False
    offset = 0
    for h in fd.hunks:
        stated = max(0, h.old_start - 1 + offset) if h.old else h.old_start + offset
        pos = _find(lines, h.old, stated)
        if pos is None:
            raise HunkMismatch(f"hunk @@ -{h.old_start} does not match the pristine text")
        ends_at_eof = pos + len(h.old) == len(lines)
        lines[pos:pos + len(h.old)] = h.new
        offset += len(h.new) - len(h.old)
        if ends_at_eof or (not h.old and pos + len(h.new) == len(lines)):
            eol = not h.new_no_eol
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if eol else "")


def _find(lines: list[str], block: list[str], stated: int) -> int | None:
    """Position of ``block`` in ``lines`` nearest to ``stated`` (git's offset search)."""
    n = len(block)
    if not n:
        return min(max(stated, 0), len(lines))
    best = None
    for pos in range(0, len(lines) - n + 1):
        if lines[pos:pos + n] == block and (best is None or abs(pos - stated) < abs(best - stated)):
            best = pos
    return best


def patched_texts(text: str, pristine: dict[str, str | None]) -> dict[str, str | None]:
    """Patched content of the files named in ``pristine`` (path -> pristine text or None
    when it does not exist). Result: path -> new text, or None when the patch deletes it
    or its hunks do not apply (look at :func:`file_diffs` to tell the two apart). Paths
    the patch has no hunks for are left out.
    """
    out: dict[str, str | None] = {}
    for fd in file_diffs(text):
        path = fd.new_path or fd.old_path
        if path not in pristine:
            continue
        if fd.new_path is None:
            out[path] = None
            continue
        try:
            out[path] = apply_file(pristine[fd.old_path] if fd.old_path else None, fd)
        except (HunkMismatch, KeyError):
            out[path] = None
    return out
