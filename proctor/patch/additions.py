"""The lines a patch adds, with their target path and line number. Pure: text in, data out.

Read with unidiff (the library's view of hunks). When unidiff refuses a patch that git
would still apply (it is stricter than git), fall back to a line scan of ``+++`` headers
and ``+`` lines, so host-side scans (secrets, suppressions) never see less than git does.
"""

from __future__ import annotations

from dataclasses import dataclass

import unidiff

from proctor.patch.parse import PathRejected, normalise_path


@dataclass(frozen=True)
class AddedLine:
    """One added line: ``path`` (normalised, repo-relative), ``line`` (1-based line number
    in the patched file, 0 when unknown) and ``text`` (without the leading ``+`` and EOL)."""

    path: str
    line: int
    text: str


def _norm(raw: str) -> str | None:
    try:
        return normalise_path(raw)
    except PathRejected:
        return None


def added_lines(patch_text: str) -> list[AddedLine]:
    """Every ``+`` line of ``patch_text`` (a unified diff), in patch order. Never raises:
    an unreadable patch gives what the fallback scan finds (possibly nothing)."""
    try:
        patch_set = unidiff.PatchSet(patch_text.replace("\r\n", "\n"))
    except unidiff.UnidiffParseError:
        return _scan(patch_text)
    out: list[AddedLine] = []
    for pf in patch_set:
        path = _norm(pf.target_file) if not pf.is_removed_file else None
        if path is None:
            continue
        for hunk in pf:
            for ln in hunk:
                if ln.is_added:
                    out.append(AddedLine(path, ln.target_line_no or 0,
                                         ln.value.rstrip("\r\n")))
    return out


def _scan(patch_text: str) -> list[AddedLine]:
    out: list[AddedLine] = []
    path: str | None = None
    for raw in patch_text.splitlines():
        if raw.startswith("+++ "):
            path = _norm(raw[4:].split("\t")[0].strip())
        elif raw.startswith("+") and path is not None:
            out.append(AddedLine(path, 0, raw[1:]))
    return out
