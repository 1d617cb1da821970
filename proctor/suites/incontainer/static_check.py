"""Run ruff on the base and the patched version of the given files; print JSON findings.

``python -I -B static_check.py SELECT SNAPSHOT -- PATH...``. SNAPSHOT holds ``base/`` and
``patched/`` copies of the changed files, taken (as root, read-only to the sandbox user)
right after the patch was applied, before any code of the patch ran; a renamed file's base
copy is its base version under the new path. ruff runs ``--isolated --ignore-noqa`` with
explicit paths, so the repo's config, ``exclude`` settings and ``noqa`` comments cannot
silence it. Output (one line, bounded whatever the files hold): ``{"base_count",
"patched_count", "new": [finding...] (the first MAX_LISTED findings the patch introduced,
see below), "new_rules": {rule: count over every new finding}, "base_error": str|null,
"patched_error": str|null}`` (the error: ruff exited non-zero, e.g. crashed), each finding
``{"path", "rule", "line", "text", "message"}`` with ``text`` the stripped source line
(over 200 characters: its start and a digest).

Which findings the patch introduced: patched findings minus base findings as multisets,
paired one to one in two rounds, so that reformatting and moving code introduce nothing:

1. on the *fingerprint* ``(path, rule, scope, node)``: ``scope`` the qualname of the
   enclosing ``def``/``class`` chain (``"C.m"``, ``""`` at module level), ``node``
   ``ast.dump`` (no positions, so quotes, wrapping, comments and line numbers do not
   matter) of the smallest AST node holding ruff's range (an alias of an import, a name,
   a call, a statement), a compound statement (``def``, ``if``, ``except`` ...) by its
   header only (bodies emptied). No fingerprint (this round skips the finding) when the
   file does not parse, or when no statement holds the range (a comment line, a ``;``);
2. the findings left on both sides on ``(path, rule, stripped line text)``.

So an unchanged finding on code the patch moved or re-wrapped pairs with its base finding,
and a finding counts as introduced when the node it sits on is code the patch wrote or
changed (an edited flagged call: the patch wrote it, and could have fixed it), when there
is one more of it than the base had in that scope, or when the base had no such finding at
all (an import the patch made unused, on a line it did not touch).
"""

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict, deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths_arg import read_paths  # noqa: E402

MAX_LISTED = 200

RUFF = os.path.join(os.path.dirname(sys.executable), "ruff")
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
BODIES = ("body", "orelse", "finalbody", "handlers", "cases")
NEWLINE = re.compile(r"\r\n|\r|\n")  # the line ends of Python's tokenizer and of ruff


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
    findings, sources = [], {}
    for item in json.loads(proc.stdout or "[]"):
        rel = os.path.relpath(item["filename"], root)
        if rel not in sources:
            sources[rel] = Source(os.path.join(root, rel))
        src = sources[rel]
        start, end = item.get("location") or {}, item.get("end_location") or {}
        row = start.get("row") or 0
        findings.append({"path": rel, "rule": item.get("code") or "syntax", "line": row,
                         "text": src.text(row), "message": item.get("message", ""),
                         "fingerprint": src.fingerprint(start, end)})
    return findings, None


class Source:
    """One analysed file: its lines and, when it parses, its AST."""

    def __init__(self, path):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                self.source = fh.read()
        except OSError:
            self.source = ""
        self.lines = self.source.splitlines()  # ruff's row numbers, as before
        self.ast_lines = NEWLINE.split(self.source)  # ast's rows (col offsets in UTF-8)
        try:
            self.tree = ast.parse(self.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.tree = None

    def text(self, row):
        return self.lines[row - 1].strip() if 0 < row <= len(self.lines) else ""

    def position(self, loc):
        """ruff's ``{"row", "column"}`` (1-based, in characters) as ast's (row, byte col)."""
        row, col = loc.get("row") or 0, loc.get("column") or 1
        line = self.ast_lines[row - 1] if 0 < row <= len(self.ast_lines) else ""
        return row, len(line[:col - 1].encode("utf-8", "surrogatepass"))

    def fingerprint(self, start, end):
        """``[scope, node dump]`` of the range ``start``-``end`` (ruff locations), or None
        (see the module docstring)."""
        if self.tree is None:
            return None
        try:
            scope, node = locate(self.tree, self.position(start), self.position(end))
            return None if node is None else [scope, bounded(ast.dump(header(node)))]
        except (RecursionError, MemoryError):  # a file nested too deep: the line text only
            return None


def span(node):
    """(start, end) of ``node`` as (row, byte col); a ``def``/``class`` starts at its first
    decorator."""
    start = (node.lineno, node.col_offset)
    if getattr(node, "decorator_list", None):
        start = (node.decorator_list[0].lineno, 0)
    return start, (node.end_lineno, node.end_col_offset)


def children(node):
    """The children of ``node`` that have a position, looking through
    those that have none (``arguments``, ``comprehension``, ``withitem``, ``match_case``)."""
    for _, value in ast.iter_fields(node):
        stack = list(reversed(value)) if isinstance(value, list) else [value]
        while stack:
            child = stack.pop()
            if not isinstance(child, ast.AST):
                continue
            if getattr(child, "end_lineno", None) is not None:
                yield child
            else:
                stack.extend(reversed(list(ast.iter_child_nodes(child))))


def locate(tree, start, end):
    """(scope qualname, node): the smallest node of ``tree`` holding ``start``-``end``
    ((row, byte col) each), None for the node when only a module or a compound statement's
    body holds the range but none of its statements does."""
    scope, node = [], tree
    while True:
        child = next((c for c in children(node)
                      if span(c)[0] <= start and end <= span(c)[1]), None)
        if child is None:
            break
        if isinstance(node, SCOPES):  # its body, and its signature, bases and decorators
            scope.append(node.name)
        node = child
    body = getattr(node, "body", None)
    if node is tree or (isinstance(body, list) and body and start >= span(body[0])[0]):
        return ".".join(scope), None
    return ".".join(scope), node


def header(node):
    """``node`` with its statement lists emptied (a compound statement's header)."""
    if not any(isinstance(getattr(node, f, None), list) for f in BODIES):
        return node
    fields = {f: [] if f in BODIES else v for f, v in ast.iter_fields(node)}
    return type(node)(**fields)


def bounded(text, limit=200):
    """A long line shortened to a bounded key that still tells different lines apart."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:limit]}...[{len(text)} chars, sha256 {digest}]"


def new_findings(base, patched):
    """Findings of ``patched`` not paired with one of ``base``: on the fingerprint first,
    then on the line text (see the module docstring)."""
    def by_fingerprint(f):
        fp = f.get("fingerprint")
        return None if fp is None else (f["path"], f["rule"], *fp)

    def by_text(f):
        return f["path"], f["rule"], f["text"]

    for key in (by_fingerprint, by_text):
        base, patched = unpaired(base, patched, key)
    return patched


def unpaired(base, patched, key):
    """(base, patched) without the pairs of equal ``key`` (one base finding pairs with one
    patched finding; a None key pairs with nothing), each in input order."""
    pool = defaultdict(deque)
    for i, f in enumerate(base):
        k = key(f)
        if k is not None:
            pool[k].append(i)
    paired, left = set(), []
    for f in patched:
        k = key(f)
        if k is not None and pool[k]:
            paired.add(pool[k].popleft())
        else:
            left.append(f)
    return [f for i, f in enumerate(base) if i not in paired], left


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
    for f in fresh:
        del f["fingerprint"]  # for pairing only: the output stays as small as it was
    print(json.dumps({"base_count": len(base), "patched_count": len(patched),
                      "new": fresh[:MAX_LISTED], "new_rules": rules,
                      "base_error": err_b, "patched_error": err_p}))


if __name__ == "__main__":
    main()
