"""Freeze the changed files right after ``git apply``, before any code of the patch runs.

As root inside the sandbox (all capabilities are dropped, so root only owns; it cannot
bypass permissions), copy the base (``git show HEAD:path``) and patched versions of the
given paths to ``SNAPSHOT/base`` and ``SNAPSHOT/patched``. The sandbox user cannot change
them later, so measurements that read files (static analysis, mutation) see what the
patch wrote, whatever the tests do afterwards.
"""

from __future__ import annotations

import shlex

from proctor.errors import InfraError
from proctor.sandbox.base import Sandbox

SNAPSHOT = "/proctor-snapshot"


def snapshot_changed_files(sb: Sandbox, repo: str, paths: list[str], timeout: float = 60) -> str:
    """Returns the snapshot dir. Raises InfraError when the copy fails."""
    lines = ["set -e", "umask 022", f"mkdir -p {SNAPSHOT}/base {SNAPSHOT}/patched"]
    for rel in paths:
        q = shlex.quote(rel)
        lines += [
            f"mkdir -p {SNAPSHOT}/base/$(dirname {q}) {SNAPSHOT}/patched/$(dirname {q})",
            f"git -c safe.directory='*' show HEAD:{q} > {SNAPSHOT}/base/{q} 2>/dev/null"
            f" || rm -f {SNAPSHOT}/base/{q}",
            f"[ -f {q} ] && cp {q} {SNAPSHOT}/patched/{q} || true",
        ]
    # The script on stdin, not an argument: thousands of long paths exceed exec's limit.
    res = sb.run(["sh", "-s"], timeout=timeout, cwd=repo, user="0:0",
                 stdin="\n".join(lines).encode())
    if not res.ok:
        raise InfraError(f"cannot snapshot the changed files: {res.output[-1000:]}")
    return SNAPSHOT
