"""Run ruff on the base and the patched version of the given files; print JSON findings.

``python -I -B static_check.py SELECT SNAPSHOT -- PATH...``. SNAPSHOT holds ``base/`` and
``patched/`` copies of the changed files, taken (as root, read-only to the sandbox user)
right after the patch was applied, before any code of the patch ran. ruff runs
``--isolated --ignore-noqa`` with explicit paths, so the repo's config,
``exclude`` settings and ``noqa`` comments cannot silence it. Output:
``{"base": [finding...], "patched": [finding...], "base_error": str|null,
"patched_error": str|null}`` (the error: ruff exited non-zero, e.g. crashed), each finding
``{"path", "rule", "line", "text", "message"}`` with ``text`` the stripped source line.
"""

import json
import os
import subprocess
import sys

RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")
select, snapshot, paths = sys.argv[1], sys.argv[2], sys.argv[4:]


def ruff(root, rels):
    rels = [r for r in rels if os.path.isfile(os.path.join(root, r))]
    if not rels:
        return [], None
    proc = subprocess.run(
        [RUFF, "check", "--isolated", "--ignore-noqa", "--no-cache", "--exit-zero",
         "--target-version", "py311", "--select", select, "--output-format", "json", *rels],
        cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        return [], proc.stderr[-2000:]
    findings = []
    for item in json.loads(proc.stdout or "[]"):
        rel = os.path.relpath(item["filename"], root)
        row = (item.get("location") or {}).get("row") or 0
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
            text = lines[row - 1].strip() if 0 < row <= len(lines) else ""
        except OSError:
            text = ""
        findings.append({"path": rel, "rule": item.get("code") or "syntax", "line": row,
                         "text": text, "message": item.get("message", "")})
    return findings, None


base, err_b = ruff(os.path.join(snapshot, "base"), paths)
patched, err_p = ruff(os.path.join(snapshot, "patched"), paths)
print(json.dumps({"base": base, "patched": patched, "base_error": err_b, "patched_error": err_p}))
