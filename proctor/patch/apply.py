"""The ways a patch is applied: ``git apply`` (never GNU patch) as is, then the recorded
fallbacks for how models' patches commonly differ from what git accepts. The one list
every caller walks: the apply step, the integrity cross-check and the mutation copy."""

from __future__ import annotations


def _with_final_newline(b: bytes) -> bytes:
    return b if b.endswith(b"\n") else b + b"\n"


#: (strategy name, extra git-apply flags, patch transform), tried in order. The integrity
#: cross-check reads the patch under every one of them
#: (:func:`proctor.harness.pipeline.score._git_paths_as_applied`).
APPLY_STRATEGIES = (
    ("git_apply", [], None),
    ("git_apply_trailing_newline", [], lambda b: b if b.endswith(b"\n") else b + b"\n"),
    # CRLF line endings throughout (a completion from a Windows tool): the context lines
    # carry a CR the repo's LF files do not have, so git finds no match.
    ("git_apply_lf", [], lambda b: _with_final_newline(b.replace(b"\r\n", b"\n"))),
    ("git_apply_recount", ["--recount"], lambda b: b if b.endswith(b"\n") else b + b"\n"),
)
