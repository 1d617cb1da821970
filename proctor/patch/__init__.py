"""The patch as read on the host, before anything runs: screening of the raw bytes, the
added lines with their target line numbers, the diff cost's measure, the pure-Python hunk
application, and the one serialised ``ast.parse`` for untrusted source. Pure; no sandbox."""

from __future__ import annotations

from proctor.patch.additions import AddedLine, added_lines
from proctor.patch.apply import (
    APPLY_STRATEGIES,
    applied_as,
    apply_variants,
    miscounted_hunks,
    without_prefixes,
)
from proctor.patch.diffstat import code_lines_changed
from proctor.patch.parse import (
    PatchSummary,
    PatchUnparseable,
    PathRejected,
    TouchedPath,
    fold,
    git_listed_paths,
    normalise_path,
    parse_patch,
)
from proctor.patch.patched_text import HunkMismatch, patched_texts
from proctor.patch.screen import MAX_PATCH_BYTES, ScreenedPatch, screen_patch
from proctor.patch.testpaths import in_test_dir, is_test_module, under

__all__ = [
    "APPLY_STRATEGIES", "AddedLine", "HunkMismatch", "MAX_PATCH_BYTES", "PatchSummary",
    "PatchUnparseable", "PathRejected", "ScreenedPatch", "TouchedPath", "added_lines",
    "applied_as", "apply_variants", "code_lines_changed", "fold", "git_listed_paths",
    "in_test_dir", "is_test_module", "miscounted_hunks", "normalise_path", "parse_patch",
    "patched_texts", "screen_patch", "under", "without_prefixes"
]
