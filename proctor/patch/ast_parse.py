"""``ast.parse`` / ``compile`` of untrusted source, serialised across threads.

CPython 3.11's AST constructor keeps its recursion depth in interpreter state that
concurrent threads corrupt ("SystemError: AST constructor recursion depth mismatch", seen
when batch workers scanned two patches at once). Every host-side parse of patch content
goes through this one lock. Parsing is fast (milliseconds), so the lock costs nothing
measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source)`` under the lock. Raises what ``ast.parse`` raises."""
    with _LOCK:
        return ast.parse(source, filename)


def compile_check(source: str, filename: str) -> None:
    """``compile(source, filename, "exec")`` under the lock. Raises what it raises."""
    with _LOCK:
        compile(source, filename, "exec", dont_inherit=True)
