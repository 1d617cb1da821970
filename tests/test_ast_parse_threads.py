"""Regression: host-side parses of patch content from concurrent batch workers.

CPython 3.11's AST constructor corrupted its recursion depth under concurrent
``ast.parse`` calls ("SystemError: AST constructor recursion depth mismatch"), which made a
batch rollout an internal error. Every scan now parses through one lock."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from proctor.harness import ast_parse
from proctor.harness.suspicious_code import scan_source

NESTED = "x = " + "(" * 50 + "1" + ")" * 50 + "\n" + "def f(a):\n    return [[a]]\n" * 200


def test_concurrent_scans_never_raise():
    def work(_):
        for _ in range(20):
            ast_parse.parse(NESTED)
            scan_source("pkg/m.py", NESTED)
        return True

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(work, range(16)))
