"""Regression: host-side parses of patch content from concurrent scoring threads.

CPython 3.11's AST constructor keeps its recursion depth in interpreter state; a thread
switch while it builds the tree (a garbage collection running a ``__del__`` is enough)
corrupts it ("SystemError: AST constructor recursion depth mismatch"), which made a rollout
scored alongside others an ``internal_error``. Every host-side parse goes through one lock
(:mod:`proctor.patch.ast_parse`; ruff's banned-api rule keeps it so). The test forces the
switches: cyclic garbage whose finalizers run Python code, and a tiny switch interval."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from proctor.harness.tamper import scan_source
from proctor.patch import ast_parse
from proctor.suites.changed_code import changed_lines

SOURCE = "def f(a):\n    return [[(a, {1: [a]})]]\n" * 300
PATCHED = SOURCE + "y = 1\n"
NEW_LINE = SOURCE.count("\n") + 1


class _Finalized:
    def __del__(self):
        sum(range(50))  # Python code run by the collector, so the GIL can switch


def _garbage():
    for _ in range(200):
        cycle = _Finalized()
        cycle.self = cycle


@pytest.fixture
def fast_switches():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("parse", [
    pytest.param(lambda: ast_parse.parse(SOURCE), id="ast_parse"),
    pytest.param(lambda: scan_source("pkg/m.py", SOURCE), id="suspicious_code"),
    pytest.param(lambda: changed_lines(SOURCE, PATCHED, {NEW_LINE}) == {NEW_LINE},
                 id="changed_code"),
])
def test_concurrent_parses_never_raise(fast_switches, parse):
    def work(_):
        for _ in range(6):
            _garbage()
            assert parse() is not False
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(work, range(8)))
