"""The ways a patch is applied: ``git apply`` (never GNU patch) as is, then the recorded
fallbacks for how models' patches commonly differ from what git accepts. The one list
every caller walks: the apply step, the integrity cross-check and the mutation copy."""

from __future__ import annotations

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
)


def apply_variants(patch: bytes) -> list[tuple[str, list[str], bytes]]:
    """``(strategy name, git-apply flags, patch bytes)`` of :data:`APPLY_STRATEGIES`, in
    order, without an attempt that would repeat the first one (a transform that left the
    bytes as they were, with no flags of its own)."""
    out = []
    for name, flags, transform in APPLY_STRATEGIES:
        data = transform(patch) if transform else patch
        if transform and data == patch and not flags:
            continue
        out.append((name, flags, data))
    return out


def applied_as(patch: bytes, strategy: str | None) -> tuple[list[str], bytes]:
    """``(git-apply flags, patch bytes)`` of the strategy named ``strategy`` (the record's
    ``apply_strategy``); the patch as is for an unknown or missing name."""
    flags, transform = next(((f, t) for n, f, t in APPLY_STRATEGIES if n == strategy),
                            ([], None))
    return flags, (transform(patch) if transform else patch)
