"""Freeze the changed files right after ``git apply``, before any code of the patch runs.

A step (:class:`~proctor.sandbox.steps.Step`) that copies the base (``git show HEAD:path``)
and patched versions of the given paths to ``DEST/base`` and ``DEST/patched``, for static
analysis to compare. It runs as the sandbox user, first in the one command of
:mod:`proctor.suites.file_checks`, into that command's private work dir: no code of the
patch runs in the sandbox before that command ends, so the copies are what the patch wrote
when the checks read them, and they are gone with the command.
"""

from __future__ import annotations

import shlex

from proctor.errors import InfraError
from proctor.sandbox import ExecResult, Step


def snapshot_step(repo: str, paths: list[str], dest: str, timeout: float = 60,
                  renamed_from: dict[str, str] | None = None) -> Step:
    """The copy of ``paths`` (relative to ``repo``) to ``dest/base`` and ``dest/patched``:
    a required step (the checks after it need it). A path missing on one side is missing
    in its copy. ``renamed_from``: new path -> old path of files the patch renamed; the
    base copy of a new path is the base version of its old path (so a renamed file is
    compared with what it was)."""
    d = shlex.quote(dest)
    lines = ["set -e", "umask 022", f"mkdir -p {d}/base {d}/patched"]
    for rel in paths:
        q = shlex.quote(rel)
        old = shlex.quote((renamed_from or {}).get(rel, rel))
        lines += [
            f'mkdir -p {d}/base/"$(dirname -- {q})" {d}/patched/"$(dirname -- {q})"',
            f"git -c safe.directory='*' show HEAD:{old} > {d}/base/{q} 2>/dev/null"
            f" || rm -f {d}/base/{q}",
            f"[ -f {q} ] && cp -- {q} {d}/patched/{q} || true",
        ]
    # The script on stdin, not an argument: thousands of long paths exceed exec's limit.
    return Step("snapshot", ["sh", "-s"], timeout, cwd=repo,
                stdin="\n".join(lines).encode(), required=True)


def check_snapshot(res: ExecResult | None) -> None:
    """Raises InfraError when the snapshot step (``res``: its result) did not succeed."""
    if res is None or not res.ok:
        why = "no result" if res is None else res.output[-1000:]
        raise InfraError(f"cannot snapshot the changed files: {why}")
