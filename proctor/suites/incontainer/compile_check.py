"""Byte-compile each given file in memory (nothing written); print one JSON line
``{"checked": n, "failed": n, "failures": {path: error}}``, bounded whatever the patch holds:
at most MAX_LISTED failures listed, paths and messages cut to 300 characters.
Run as ``python -I -B compile_check.py (PATH... | --paths-from FILE)`` from the repo root."""

import json
import sys

MAX_LISTED = 200


def read_paths(args):
    """``["--paths-from", FILE]`` (a JSON list written by the harness; ``-``: on standard
    input) or the paths."""
    if args[:2] == ["--paths-from", "-"]:
        return json.load(sys.stdin)
    if args[:1] == ["--paths-from"]:
        with open(args[1], encoding="utf-8") as fh:
            return json.load(fh)
    return args


paths = read_paths(sys.argv[1:])
failures, failed = {}, 0
for path in paths:
    try:
        with open(path, "rb") as fh:
            compile(fh.read(), path, "exec", dont_inherit=True)
    except Exception as exc:  # SyntaxError, ValueError, RecursionError, MemoryError ...
        failed += 1
        if len(failures) < MAX_LISTED:
            failures[path[:300]] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps({"checked": len(paths), "failed": failed, "failures": failures}))
