"""``compiled``: every changed ``.py`` file byte-compiles (in memory, inside the sandbox)."""

from __future__ import annotations

import json

from proctor.errors import InfraError
from proctor.record import Evidence
from proctor.sandbox import HARNESS_DIR, PYTHON, ExecResult, Step


def compile_step(repo: str, paths: list[str], timeout: float) -> Step:
    """The check as a step (:mod:`proctor.sandbox.steps`): ``compile_check.py`` on ``paths``
    (relative to ``repo``, its working directory), the list on stdin (no argv size limit,
    no file to put first)."""
    return Step("compiled", [PYTHON, "-I", "-B", f"{HARNESS_DIR}/compile_check.py",
                             "--paths-from", "-"], timeout, cwd=repo,
                stdin=json.dumps(list(paths)).encode())


def judge_compiles(res: ExecResult | None, timeout: float) -> tuple[float, Evidence]:
    """From the step's result: (1.0 if every file compiles else 0.0, evidence listing the
    failures).

    A check that timed out or was killed by a signal (a pathological file: memory,
    recursion) fails the step: 0.0, with the reason in ``evidence.details["step_failed"]``.

    Raises:
        InfraError: the checker exited normally but printed no result, or gave no result at
            all (``res`` None): a harness problem.
    """
    if res is None:
        raise InfraError("compile check printed no result: the step gave none")
    if res.timed_out or res.exit_code >= 128:
        why = (f"timed out after {timeout:g} s" if res.timed_out
               else f"killed by signal {res.exit_code - 128}")
        return 0.0, Evidence(command=res.command, exit_code=res.exit_code,
                             duration_s=round(res.duration_s, 3), output=res.output[-2000:],
                             details={"step_failed": why, "failures": {}})
    try:
        result = json.loads(res.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise InfraError(f"compile check printed no result: {res.output[-1000:]}") from None
    failures, failed = result["failures"], result["failed"]
    evidence = Evidence(command=res.command, exit_code=res.exit_code,
                        duration_s=round(res.duration_s, 3),
                        details={"failures": failures, "failed": failed})
    return (0.0 if failed else 1.0), evidence
