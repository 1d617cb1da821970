"""Static analysis of what the patch added: ruff findings patched minus base.

Rule tiers (the one place they are): the *error* tier scores, the *style* tier is only
reported. Findings are compared as a multiset keyed on (path, rule, stripped line text),
so a finding the patch causes on an untouched line (an import made unused) still counts,
and line shifts do not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from proctor.errors import InfraError
from proctor.record import Evidence
from proctor.sandbox import HARNESS_DIR, PYTHON, ExecResult, Step

#: Scored: syntax errors (E9), pyflakes (F), bugbear (B), pylint errors (PLE), and dangerous
#: calls from flake8-bandit (exec, eval, pickle, shell=True, os.system ...).
ERROR_RULES = ("E9", "F", "B", "PLE", "S102", "S301", "S307", "S602", "S605")
#: Reported only.
STYLE_RULES = ("E4", "E7", "W6", "UP", "SIM")


def _tier(rule: str) -> str:
    syntax = rule in ("syntax", "invalid-syntax")  # ruff 0.17 codes them invalid-syntax
    return "error" if any(rule.startswith(r) for r in ERROR_RULES) or syntax else "style"


@dataclass(frozen=True)
class StaticResult:
    """``new_errors`` / ``new_style``: the listed new findings (at most static_check.py's
    MAX_LISTED); ``error_count``: every new error-tier finding, listed or not (it scores)."""

    new_errors: list[dict]
    new_style: list[dict]
    evidence: Evidence
    step_failed: bool = False
    error_count: int = 0


def static_step(snapshot: str, paths: list[str], timeout: float) -> Step:
    """The analysis as a step (:mod:`proctor.sandbox.steps`): ruff (both tiers) on the base
    and patched copies of the changed ``.py`` files in ``snapshot`` (see
    :mod:`proctor.suites.snapshot`), the path list on stdin (no argv limit, no file to
    put)."""
    select = ",".join(ERROR_RULES + STYLE_RULES)
    return Step("static_analysis", [PYTHON, "-I", "-B", f"{HARNESS_DIR}/static_check.py",
                                    select, snapshot, "--", "--paths-from", "-"], timeout,
                cwd=snapshot, stdin=json.dumps(list(paths)).encode())


def judge_static(res: ExecResult | None, timeout: float) -> StaticResult:
    """The static analysis result from the step's result.

    A run that timed out, or ruff failing on the patched files only (a pathological file
    the patch wrote: ruff's stack overflows), fails the step: the result then has
    ``step_failed=True``, no findings and the reason in ``evidence.details``; the executor
    scores it 0.0. Never an infrastructure error: a patch must not be able to turn its own
    rollout into an unscored one.

    Raises:
        InfraError: ruff failed on the base files, or printed no JSON, or the step gave no
            result at all (``res`` None): a tool or harness problem.
    """
    if res is None:
        raise InfraError("static analysis printed no result: the step gave none")
    if res.timed_out:
        return StaticResult([], [], Evidence(
            command=res.command, exit_code=res.exit_code, duration_s=round(res.duration_s, 3),
            output=res.output[-2000:], details={"step_failed": f"timed out after {timeout:g} s"}
        ), step_failed=True)
    try:
        data = json.loads(res.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise InfraError(f"static analysis printed no result: {res.output[-1000:]}") from None
    if data["base_error"]:  # the pristine files: a tool or task problem, never the patch's
        raise InfraError(f"ruff failed on the base files: {data['base_error']}")
    if data["patched_error"]:  # only on what the patch wrote (e.g. a stack overflow)
        return StaticResult([], [], Evidence(
            command=res.command, exit_code=res.exit_code, duration_s=round(res.duration_s, 3),
            output=data["patched_error"][-2000:],
            details={"step_failed": "ruff failed on the patched files"}), step_failed=True)
    fresh = data["new"]
    errors = [f for f in fresh if _tier(f["rule"]) == "error"]
    style = [f for f in fresh if _tier(f["rule"]) == "style"]
    error_count = sum(n for rule, n in data["new_rules"].items() if _tier(rule) == "error")
    evidence = Evidence(
        command=res.command, exit_code=res.exit_code, duration_s=round(res.duration_s, 3),
        details={"new_error_findings": errors, "new_style_findings": style,
                 "new_error_count": error_count,
                 "base_findings": data["base_count"], "patched_findings": data["patched_count"]},
    )
    return StaticResult(errors, style, evidence, error_count=error_count)
