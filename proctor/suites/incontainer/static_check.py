"""Run ruff on the base and the patched version of the given files; print JSON findings.

``python -I -B static_check.py SELECT SNAPSHOT -- PATH...``. SNAPSHOT holds ``base/`` and
``patched/`` copies of the changed files, taken (as root, read-only to the sandbox user)
right after the patch was applied, before any code of the patch ran. ruff runs
``--isolated --ignore-noqa`` with explicit paths, so the repo's config,
``exclude`` settings and ``noqa`` comments cannot silence it. Output (one line,
bounded whatever the files hold): ``{"base_count", "patched_count", "new": [finding...]
(the first MAX_LISTED findings of patched minus base, a multiset on (path, rule, text)),
"new_rules": {rule: count over every new finding}, "base_error": str|null,
"patched_error": str|null}`` (the error: ruff exited non-zero, e.g. crashed), each finding
``{"path", "rule", "line", "text", "message"}`` with ``text`` the stripped source line
(over 200 characters: its start and a digest).
"""

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths_arg import read_paths  # noqa: E402

MAX_LISTED = 200

RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")
def ruff(root, rels, select):
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


def bounded(text, limit=200):
    """A long line shortened to a bounded key that still tells different lines apart."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit]}...[{len(text)} chars, sha256 {digest}]"


def new_findings(base, patched):
    """Findings of ``patched`` not matched by one of ``base`` (multiset on path, rule, text)."""
    remaining = Counter((f["path"], f["rule"], f["text"]) for f in base)
    out = []
    for f in patched:
        key = (f["path"], f["rule"], f["text"])
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            out.append(f)
    return out


def main():
    select, snapshot, paths = sys.argv[1], sys.argv[2], read_paths(sys.argv[4:])
    base, err_b = ruff(os.path.join(snapshot, "base"), paths, select)
    patched, err_p = ruff(os.path.join(snapshot, "patched"), paths, select)
    # The output stays small whatever the patch wrote (one 300 KB line, 100 000 findings): the
    # difference is taken here, lines and messages are bounded, the list is capped and the
    # rules of every new finding are counted.
    for f in base + patched:
        f["text"], f["message"] = bounded(f["text"]), bounded(f["message"])
    fresh = new_findings(base, patched)
    rules = dict(Counter(f["rule"] for f in fresh))
    print(json.dumps({"base_count": len(base), "patched_count": len(patched),
                      "new": fresh[:MAX_LISTED], "new_rules": rules,
                      "base_error": err_b, "patched_error": err_p}))


if __name__ == "__main__":
    main()
