"""The ways a patch is applied: ``git apply`` (never GNU patch) as is, then the recorded
fallbacks for how models' patches commonly differ from what git accepts. The one list
every caller walks: the apply step, the integrity cross-check and the mutation copy.

The patch applied is the patch submitted, whole: a hunk whose line counts do not match its
body (models miscount often) would be applied by plain ``git apply`` only up to its counts,
and reported as applied, half an edit scored. So the counts are checked first
(:func:`miscounted_hunks`), and a patch with a miscounted hunk goes straight to the
``--recount`` strategies (:func:`apply_variants`).
"""

from __future__ import annotations

import re
from collections.abc import Callable


def _with_final_newline(b: bytes) -> bytes:
    """``b`` ending in a newline (a model's patch often lacks the last one)."""
    return b if b.endswith(b"\n") else b + b"\n"


def _lf_with_final_newline(b: bytes) -> bytes:
    """``b`` with CRLF line ends made LF, ending in a newline."""
    return _with_final_newline(b.replace(b"\r\n", b"\n"))


#: (strategy name, extra git-apply flags, patch transform), tried in order. The integrity
#: cross-check reads the patch under every one of them
#: (:func:`proctor.harness.pipeline.score._git_paths_as_applied`).
APPLY_STRATEGIES: tuple[tuple[str, list[str], Callable[[bytes], bytes] | None], ...] = (
    ("git_apply", [], None),
    ("git_apply_trailing_newline", [], _with_final_newline),
    # CRLF line endings throughout (a completion from a Windows tool): the context lines
    # carry a CR the repo's LF files do not have, so git finds no match.
    ("git_apply_lf", [], _lf_with_final_newline),
    ("git_apply_recount", ["--recount"], _with_final_newline),
    ("git_apply_lf_recount", ["--recount"], _lf_with_final_newline),
)
_HUNK = re.compile(rb"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_FILE = re.compile(rb"(?:\+\+\+|---) (?:[ab]/)?(\S+)")


def miscounted_hunks(patch: bytes) -> list[str]:
    """The hunks of ``patch`` whose ``@@ -a,b +c,d @@`` counts differ from the lines their
    body holds (context and removed lines for ``b``, context and added for ``d``; an empty
    line is a context line whose space was lost; empty lines at a hunk's end may or may
    not belong to it), each as ``"<file> <hunk header>: body has <old>/<new> lines"``. A
    hunk's body ends at the next hunk or file header, at a line no hunk has, or at
    ``git format-patch``'s ``-- `` signature line once its counts are met."""
    lines = patch.split(b"\n")
    out, path, i = [], "?", 0
    while i < len(lines):
        line = lines[i].rstrip(b"\r")
        if line.startswith(b"+++ ") and (m := _FILE.match(line)):
            path = m.group(1).decode("utf-8", "replace")
        m = _HUNK.match(line)
        if not m:
            i += 1
            continue
        want = (_count(m.group(1)), _count(m.group(2)))
        old = new = blank_tail = 0
        j = i + 1
        while j < len(lines):
            body = lines[j].rstrip(b"\r")
            if body.startswith((b"@@ ", b"diff --git ")) or (
                    body.startswith(b"--- ") and j + 1 < len(lines)
                    and lines[j + 1].startswith(b"+++ ")):
                break
            if body in (b"-- ", b"--") and (old - blank_tail, new - blank_tail) == want:
                break  # ``git format-patch``'s signature, after a complete hunk
            kind = body[:1]
            if body == b"" or kind == b" ":
                old, new = old + 1, new + 1
                blank_tail = blank_tail + 1 if body == b"" else 0
            elif kind in (b"-", b"+"):
                old += kind == b"-"
                new += kind == b"+"
                blank_tail = 0
            elif kind != b"\\":
                break
            j += 1
        if want not in {(old - k, new - k) for k in range(blank_tail + 1)}:
            header = line.decode("utf-8", "replace")
            out.append(f"{path} {header[:80]}: body has {old - blank_tail}/{new - blank_tail} "
                       "lines")
        i = j
    return out


def _count(group: bytes | None) -> int:
    return 1 if group is None else int(group)


#: Suffixes of a strategy's name -> the flag they add: ``-p0`` for a patch whose headers
#: have no ``a/`` / ``b/`` prefix (tried before the plain strategies: stripping the first
#: directory of such a path could name another existing file), ``--unidiff-zero`` for
#: hunks without context lines (``diff -U0``; after the plain ones).
_P0, _ZERO = "_p0", "_unidiff_zero"
_SUFFIX_FLAGS = {_P0: "-p0", _ZERO: "--unidiff-zero"}
_HEADER = re.compile(rb"^(---|\+\+\+) (\S+)", re.M)


def without_prefixes(patch: bytes) -> bool:
    """Every ``---`` / ``+++`` header path of ``patch`` lacks git's ``a/`` / ``b/`` prefix
    (``/dev/null`` aside), and there is one: a ``diff -u`` or ``--no-prefix`` patch, whose
    paths ``git apply`` must take as they are (``-p0``)."""
    paths = [(m.group(1), m.group(2)) for m in _HEADER.finditer(patch)
             if m.group(2) != b"/dev/null"]
    return bool(paths) and not any(  # a C-quoted path keeps its prefix inside the quotes
        path.lstrip(b'"').startswith(b"a/" if side == b"---" else b"b/")
        for side, path in paths)


def has_zero_context_hunk(patch: bytes) -> bool:
    """A hunk of ``patch`` has no context line (``diff -U0``), which ``git apply`` takes
    only with ``--unidiff-zero``."""
    for m in re.finditer(rb"^@@ [^\n]*\n((?:[-+\\][^\n]*\n?)*+)(?=@@ |diff --git |--- |\Z)",
                         patch, re.M):
        if m.group(1):
            return True
    return False


def apply_variants(patch: bytes) -> list[tuple[str, list[str], bytes]]:
    """``(strategy name, git-apply flags, patch bytes)`` of :data:`APPLY_STRATEGIES`, in
    order, without an attempt that would repeat the first one (a transform that left the
    bytes as they were, with no flags of its own); only the ``--recount`` ones when a hunk's
    counts do not match its body (:func:`miscounted_hunks`). A patch without ``a/`` / ``b/``
    prefixes gets each one with ``-p0`` first (:func:`without_prefixes`, name ``*_p0``); one
    with a hunk without context, each one with ``--unidiff-zero`` after
    (:func:`has_zero_context_hunk`, name ``*_unidiff_zero``)."""
    base = []
    recount_only = bool(miscounted_hunks(patch))
    for name, flags, transform in APPLY_STRATEGIES:
        if recount_only and "--recount" not in flags:
            continue
        data = transform(patch) if transform else patch
        if transform and data == patch and not flags:
            continue
        base.append((name, flags, data))
    out = []
    if without_prefixes(patch):
        out += [(name + _P0, [*flags, "-p0"], data) for name, flags, data in base]
    out += base
    if has_zero_context_hunk(patch):
        out += [(name + _ZERO, [*flags, "--unidiff-zero"], data) for name, flags, data in out]
    return out


def applied_as(patch: bytes, strategy: str | None) -> tuple[list[str], bytes]:
    """``(git-apply flags, patch bytes)`` of the strategy named ``strategy`` (the record's
    ``apply_strategy``, a name of :data:`APPLY_STRATEGIES` with the suffixes
    :func:`apply_variants` adds); the patch as is for an unknown or missing name."""
    extra: list[str] = []
    name = strategy or ""
    for suffix in (_ZERO, _P0):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
            extra.insert(0, _SUFFIX_FLAGS[suffix])
    flags, transform = next(((f, t) for n, f, t in APPLY_STRATEGIES if n == name),
                            ([], None))
    return [*flags, *extra], (transform(patch) if transform else patch)
