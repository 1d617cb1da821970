"""Size of a patch for the diff cost: changed lines that carry code (pure).

Blank lines and comment-only lines (``#`` after stripping) are not counted, so documenting
a fix costs nothing and a patch that only adds a comment mentioning a path scores like the
same patch without it. Source: Proctor's own rule (design.md section 3 leaves the measure open).
"""

from __future__ import annotations


def code_lines_changed(text: str) -> int:
    """Number of added plus removed hunk lines with code (not blank, not ``#`` comments).

    ``+++`` / ``---`` file headers are not counted. Never raises.
    """
    count, in_hunk = 0, False
    for line in text.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            continue
        if line.startswith("diff --git ") or not line:
            in_hunk = False if line.startswith("diff --git ") else in_hunk
            continue
        if not in_hunk or line[0] not in "+-":
            continue
        body = line[1:].strip()
        if body and not body.startswith("#"):
            count += 1
    return count
