"""Phase 1, integrity: the patch's diff headers judged against the forbidden paths (the
task's and the defaults), ``pyproject.toml`` judged per section, and new top-level modules
that would shadow installed ones. Decided from headers before anything is copied. Also the
host's scans of the added lines: secrets (a gate blocker) and added lint or mutation
suppressions (a flag)."""

from __future__ import annotations

from proctor.harness.integrity.check import IntegrityVerdict, check_integrity
from proctor.harness.integrity.forbidden import ForbiddenRules
from proctor.harness.integrity.pyproject_rules import is_pyproject, judge_pyproject
from proctor.harness.integrity.secrets import find_secrets
from proctor.harness.integrity.shadowing import image_top_level_modules, shadowing_reasons
from proctor.harness.integrity.suppressions import find_suppressions

__all__ = [
    "ForbiddenRules", "IntegrityVerdict", "check_integrity", "find_secrets",
    "find_suppressions", "image_top_level_modules", "is_pyproject", "judge_pyproject",
    "shadowing_reasons"
]
