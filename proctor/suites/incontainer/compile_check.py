"""Byte-compile each given file in memory (nothing written); print one JSON line
``{"checked": n, "failed": n, "failures": {path: error}}``, bounded whatever the patch holds:
at most MAX_LISTED failures listed, paths and messages cut to 300 characters.
Run as ``python -I -B compile_check.py (PATH... | --paths-from FILE)`` from the repo root."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths_arg import read_paths  # noqa: E402

MAX_LISTED = 200


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
