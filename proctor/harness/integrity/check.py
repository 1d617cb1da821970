"""The integrity phase (design.md section 2, phase 1): may the patch touch the paths it touches?

Runs before any copy or container. :func:`check_integrity` parses the diff headers
(:mod:`proctor.patch.parse`), cross-checks them with git's reading of the patch and
applies the forbidden rules (:mod:`proctor.harness.integrity.forbidden`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proctor.harness.integrity.forbidden import ForbiddenRules
from proctor.patch import PatchSummary, PathRejected, fold, normalise_path, parse_patch


@dataclass(frozen=True)
class IntegrityVerdict:
    """``violated`` iff ``reasons``; ``paths``: every touched path, sorted (normalised, plus
    the rejected ones as shown in their reason)."""

    violated: bool
    reasons: tuple[str, ...]
    paths: tuple[str, ...]


# --- the verdict -------------------------------------------------------------------------


def check_integrity(
    text: str, rules: ForbiddenRules, git_paths: set[str] | None = None,
    pristine_text: Callable[[str], str | None] | None = None, recount: bool = False,
) -> tuple[PatchSummary, IntegrityVerdict]:
    """Parse ``text``, match every touched path against ``rules``, cross-check with git.

    Pure given ``git_paths`` (from :func:`git_listed_paths`; None skips the cross-check)
    and ``pristine_text`` (repo path -> pristine text or None). With ``pristine_text``, a
    ``pyproject.toml`` is judged per section (:mod:`proctor.harness.integrity.pyproject_rules`)
    instead of forbidden whole.
    Violations (design.md sections 2 and 4): a rejected path (``..``, absolute, ``.git/``); a
    forbidden path (any kind, both sides of renames and copies); a binary patch; a
    symlink or submodule; a git path (normalised, case-folded) the parser missed.
    Reasons read ``"<path>: <why>"`` (rejected paths first, then by path), no duplicates.

    Raises:
        PatchUnparseable: from :func:`parse_patch`.
    """
    summary = parse_patch(text, recount)
    reasons: dict[str, None] = {}
    shown = {path for path, _ in summary.rejected}
    for path, why in summary.rejected:
        reasons[f"{path}: {why}"] = None
    kind_reasons = {
        "binary": "binary patch",
        "symlink": "symlink (mode 120000)",
        "submodule": "submodule (mode 160000)",
    }
    judged = _pyproject_judged(text, summary, pristine_text) if pristine_text else {}
    for tp in summary.touched:  # sorted by path
        if tp.path in judged:
            for why in judged[tp.path]:
                reasons[f"{tp.path}: {why}"] = None
        if rule := rules.match(tp.path, judged_pyproject=tp.path in judged):
            reasons[f"{tp.path}: {rule}"] = None
        if tp.kind in kind_reasons:
            reasons[f"{tp.path}: {kind_reasons[tp.kind]}"] = None
    if git_paths is not None:
        known = {fold(p) for p in summary.files}
        for raw in sorted(git_paths):
            try:
                path = normalise_path(raw, strip_prefix=False)
            except PathRejected as exc:
                shown.add(exc.path)
                reasons[str(exc)] = None
                continue
            if fold(path) not in known:
                shown.add(path)
                reasons[f"git touches {path} which the parser missed"] = None
    paths = tuple(sorted(set(summary.files) | shown))
    return summary, IntegrityVerdict(bool(reasons), tuple(reasons), paths)


def _pyproject_judged(text: str, summary: PatchSummary,
                      pristine_text: Callable[[str], str | None]) -> dict[str, list[str]]:
    """pyproject path -> reasons (``[]``: allowed), for every pyproject.toml touched."""
    from proctor.harness.integrity import pyproject_rules
    from proctor.patch import patched_text

    paths = {t.path for t in summary.touched if pyproject_rules.is_pyproject(t.path)}
    if not paths:
        return {}
    before = {p: pristine_text(p) for p in paths}
    try:
        diffs = {fd.new_path or fd.old_path: fd for fd in patched_text.file_diffs(text)}
    except patched_text.HunkMismatch:
        diffs = {}

    def after(path: str):
        fd = diffs.get(path)
        if fd is None:  # no hunks: mode change, rename... (judged by kind)
            return before[path]
        if fd.new_path is None:
            return None
        try:
            return patched_text.apply_file(before.get(fd.old_path) if fd.old_path else None, fd)
        except patched_text.HunkMismatch:
            return pyproject_rules.UNKNOWN

    pairs = [(t.path, t.kind) for t in summary.touched if t.path in paths]
    found = pyproject_rules.pyproject_reasons(pairs, before.get, after)
    return {p: found.get(p, []) for p in paths}
