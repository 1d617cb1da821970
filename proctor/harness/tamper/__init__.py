"""Phase 3, tamper: the patched tree read back from the sandbox and judged before any of its
code runs: tests weakened, reference data altered, and the code scan's suspicions."""

from __future__ import annotations

from proctor.harness.tamper.suspicious_code import (
    probes,
    scan_patch,
    scan_source,
    suspicions,
    violations,
)
from proctor.harness.tamper.tests_weakened import scan_test_changes
from proctor.harness.tamper.tree import (
    PatchedTree,
    TamperVerdict,
    TextVerdict,
    inspect_patched_tree,
    judge_texts,
    predicted_texts,
    pristine_hashes,
    pristine_text,
    read_patched_tree,
    tree_report_argv,
    wanted_texts,
)

__all__ = [
    "PatchedTree", "TamperVerdict", "TextVerdict", "inspect_patched_tree", "judge_texts",
    "predicted_texts", "pristine_hashes", "pristine_text", "probes",
    "read_patched_tree", "scan_patch", "scan_source", "scan_test_changes", "suspicions",
    "tree_report_argv", "violations", "wanted_texts"
]
