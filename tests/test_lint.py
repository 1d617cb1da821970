"""The project's lint rules (pyproject.toml [tool.ruff]) hold on the whole tree.

Among them the banned-API rule that keeps every host-side ``ast.parse`` behind
:mod:`proctor.patch.ast_parse`'s lock (CPython 3.11's AST constructor is not
thread-safe)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "proctor", "tests", "bench",
                           "examples"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
