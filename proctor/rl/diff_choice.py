"""Which of the diffs in a completion's answer is the patch (pure).

The rule: **per file, the last complete edit in the answer wins**; hunks of one file split
over several diffs are joined when they do not overlap; fenced and unfenced diffs compete on
position, not on form. In detail, over the answer's diffs (:class:`Segment`: a fenced
block's body or a bare diff, in the order they appear):

* each diff is cut into file sections (a ``diff --git`` line, or a ``---`` / ``+++`` /
  ``@@`` triple, starts one) and each section into hunks; a diff that starts with a hunk
  (``@@``, no file header) continues the file the diff before it ended with;
* per file, the last section is kept whole; the hunks of earlier sections of the same file
  are joined to it when their lines of the original file (``-start,count``) overlap none
  already kept, else they are a draft and left out; a section that cannot be joined hunk
  by hunk (a new, deleted, renamed or binary file, a mode change) is kept only when it is
  the last of its file;
* the patch is the kept sections in the order their files first appear, each file's hunks
  in the order of their lines. A diff whose sections are all kept as they are is returned
  byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_PATH = re.compile(r"(?:---|\+\+\+) (?:\"?[ab]/)?([^\t\r\n\"]+)\"?(?:\t.*)?\r?$")
_GIT_PATH = re.compile(r"diff --git (?:\"?a/)?(\S+?)\"? ")
_WHOLE = ("new file mode", "deleted file mode", "rename from", "copy from", "Binary files",
          "GIT binary patch", "old mode")


@dataclass(frozen=True)
class Segment:
    """One diff the answer holds: its ``text``, ``kind`` (``fenced`` or ``bare``) and
    ``where`` (its line in the answer: the order)."""

    text: str
    kind: str
    where: int


@dataclass
class _Hunk:
    start: int
    length: int
    lines: list[str]

    def overlaps(self, other: _Hunk) -> bool:
        return self.start < other.start + max(other.length, 1) and \
            other.start < self.start + max(self.length, 1)


@dataclass
class _Section:
    path: str | None
    header: list[str]
    hunks: list[_Hunk] = field(default_factory=list)
    segment: int = 0

    @property
    def whole(self) -> bool:
        """Not joinable hunk by hunk: a new, deleted, renamed, binary or mode-only file."""
        return not self.hunks or any(line.startswith(_WHOLE) for line in self.header) or \
            any(line.startswith("--- /dev/null") or line.startswith("+++ /dev/null")
                for line in self.header)

    def text(self) -> str:
        return "".join(self.header) + "".join("".join(h.lines) for h in self.hunks)


@dataclass
class Choice:
    """The chosen ``patch`` (None: no diff), the ``kind`` of the last diff it takes from,
    and ``notes``: what was left out or joined, and why."""

    patch: str | None
    kind: str | None
    notes: list[str]


def choose(segments: list[Segment]) -> Choice:
    """The patch among ``segments`` (the rule is in the module docstring)."""
    segments = sorted(segments, key=lambda s: s.where)
    sections: list[_Section] = []
    notes: list[str] = []
    last_path: str | None = None
    for i, seg in enumerate(segments):
        parsed = _sections(seg.text, i, last_path)
        if not parsed:
            notes.append(f"{seg.kind} diff {i + 1} of {len(segments)}: no file or hunk in it")
        sections.extend(parsed)
        last_path = parsed[-1].path if parsed else last_path
    by_file: dict[str | None, list[_Section]] = {}
    for section in sections:
        by_file.setdefault(section.path, []).append(section)
    if None in by_file:
        notes.append(f"{len(by_file.pop(None))} hunk(s) with no file before them: left out")
    if not by_file:
        return Choice(None, None, notes)
    kept: list[tuple[int, str, _Section, bool]] = []  # (first segment, path, section, joined)
    for path, group in by_file.items():
        last, joined = _merged(path or "", group, notes)
        kept.append((group[0].segment, path or "", last, joined))
    kept.sort(key=lambda k: k[0])
    kind = segments[max(s.segment for _, _, s, _ in kept)].kind
    untouched = _untouched(segments, sections, [s for _, _, s, _ in kept],
                           any(j for *_, j in kept))
    patch = untouched if untouched is not None else "".join(s.text() for _, _, s, _ in kept)
    return Choice(patch, kind, notes)


def _merged(path: str, group: list[_Section], notes: list[str]) -> tuple[_Section, bool]:
    """The last section of one file's ``group`` with the earlier sections' hunks that
    overlap none of its own joined to it (``notes`` say what was joined or left out), and
    whether any was joined."""
    last, joined = group[-1], False
    if last.whole:
        notes.extend(f"{path}: diff {s.segment + 1} changes the file again later: left out"
                     for s in group[:-1])
        return last, False
    for earlier in reversed(group[:-1]):
        if earlier.whole:
            notes.append(f"{path}: diff {earlier.segment + 1} changes the file again later: "
                         "left out")
            continue
        for hunk in earlier.hunks:
            if any(hunk.overlaps(k) for k in last.hunks):
                notes.append(f"{path}: a hunk of diff {earlier.segment + 1} overlaps a later "
                             "edit of the file: a draft, left out")
            else:
                last.hunks.append(hunk)
                joined = True
                notes.append(f"{path}: a hunk of diff {earlier.segment + 1} joined to the "
                             "file's last edit")
    if not last.header:  # a hunk that continued the file: its last header
        donor = next((s for s in reversed(group) if s.header), None)
        last.header = list(donor.header) if donor else []
    last.hunks.sort(key=lambda h: h.start)
    return last, joined


def _untouched(segments: list[Segment], sections: list[_Section], kept: list[_Section],
               joined: bool) -> str | None:
    """The kept segments' texts as they are, when whole segments are kept unchanged (no
    hunk joined, no section of theirs left out): byte fidelity for the common case."""
    if joined:
        return None
    used = sorted({s.segment for s in kept})
    kept_ids = {id(s) for s in kept}
    if any(s.segment in used and id(s) not in kept_ids for s in sections):
        return None
    texts = [segments[i].text for i in used]
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def _sections(text: str, segment: int, continues: str | None) -> list[_Section]:
    """The file sections of one diff; a leading hunk continues the file ``continues``."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    out: list[_Section] = []
    current: _Section | None = None
    hunk: _Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        bare = line.rstrip("\r\n")
        if bare.startswith("diff --git ") or _triple_at(lines, i):
            current = _Section(_path_of(lines, i), [], segment=segment)
            out.append(current)
            hunk = None
            while i < len(lines) and not lines[i].startswith("@@ "):
                if lines[i].startswith("diff --git ") and current.header:
                    break
                current.header.append(lines[i])
                i += 1
            continue
        m = _HUNK.match(bare)
        if m:
            if current is None:
                current = _Section(continues, [], segment=segment)
                out.append(current)
            hunk = _Hunk(int(m.group(1)), int(m.group(2) or 1), [line])
            current.hunks.append(hunk)
        elif hunk is not None:
            hunk.lines.append(line)
        i += 1
    return out


def _triple_at(lines: list[str], i: int) -> bool:
    return (lines[i].startswith("--- ") and i + 2 < len(lines)
            and lines[i + 1].startswith("+++ ") and lines[i + 2].startswith("@@ "))


def _path_of(lines: list[str], i: int) -> str | None:
    """The file a section starting at line ``i`` changes: its ``+++`` path (its ``---``
    one for a deletion), else the ``diff --git`` line's."""
    minus = plus = None
    for line in lines[i:i + 12]:
        if line.startswith("@@ "):
            break
        m = _PATH.match(line)
        if m and line.startswith("+++"):
            plus = m.group(1)
        elif m and line.startswith("---"):
            minus = m.group(1)
    for name in (plus, minus):
        if name and name != "/dev/null" and name != "dev/null":
            return name
    m = _GIT_PATH.match(lines[i])
    return m.group(1) if m else None
