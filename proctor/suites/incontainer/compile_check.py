"""Byte-compile each given file in memory (nothing written); print {path: error or null} as JSON.
Run as ``python -I -B compile_check.py PATH...`` from the repo root."""

import json
import sys

result = {}
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as fh:
            compile(fh.read(), path, "exec", dont_inherit=True)
        result[path] = None
    except Exception as exc:  # SyntaxError, ValueError, RecursionError, MemoryError ...
        result[path] = f"{type(exc).__name__}: {exc}"
print(json.dumps(result))
