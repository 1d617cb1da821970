"""The measurements that only read files, in one sandbox command: ``compiled`` and
``static_analysis`` (from a snapshot of the changed files), and whatever else must run
before the public suite (``then``: the pristine public tests put back, say).

They run right after the tamper check passed on the host and before any code of the patch
runs in the sandbox, as the sandbox user, as when each was a command of its own; each part
keeps its own timeout and its own evidence (command, exit code, run time, output), and
fails as before: the patch's fault (a file that crashes a checker, a timeout) is a failed
step scored 0.0, the harness's (no result, ruff failing on the base files, the snapshot
failing) an :class:`~proctor.errors.InfraError`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from proctor.record import Evidence
from proctor.sandbox import ExecResult, Sandbox, Step, run_steps
from proctor.suites.compile_check import compile_step, judge_compiles
from proctor.suites.snapshot import check_snapshot, snapshot_step
from proctor.suites.static_analysis import StaticResult, judge_static, static_step


@dataclass(frozen=True)
class FileChecks:
    """``compiled`` (1.0 / 0.0) with its evidence and the static analysis result, both None
    when no path was given; ``then``: step name -> result of the ``then`` steps (None: no
    result), for the caller to judge."""

    compiled: float | None
    compiled_evidence: Evidence | None
    static: StaticResult | None
    then: dict[str, ExecResult | None] = field(default_factory=dict)


def run_file_checks(sb: Sandbox, repo: str, paths: list[str], *, compile_timeout: float,  # noqa: PLR0913
                    static_timeout: float, then: list[Step] = (),
                    renamed_from: dict[str, str] | None = None) -> FileChecks:
    """In one sandbox command: snapshot of ``paths`` (changed ``.py`` files, relative to
    ``repo``; ``renamed_from``: new path -> old path of renamed ones, see
    :func:`~proctor.suites.snapshot.snapshot_step`), compile check, static analysis (none
    of the three when ``paths`` is empty), then the ``then`` steps. Each timeout in
    seconds.

    Raises:
        InfraError: the sandbox or the snapshot failed, or a checker gave no result (see
            :func:`~proctor.suites.compile_check.judge_compiles`,
            :func:`~proctor.suites.static_analysis.judge_static`).
    """
    workdir = f"/tmp/proctor-checks-{secrets.token_hex(6)}"  # fresh; gone with the command
    snapshot = f"{workdir}/snapshot"
    checks = [snapshot_step(repo, paths, snapshot, renamed_from=renamed_from),
              compile_step(repo, paths, compile_timeout),
              static_step(snapshot, paths, static_timeout)] if paths else []
    results = run_steps(sb, [*checks, *then], workdir=workdir)
    then_results = {s.name: results[s.name] for s in then}
    if not paths:
        return FileChecks(None, None, None, then_results)
    check_snapshot(results["snapshot"])
    compiled, evidence = judge_compiles(results["compiled"], compile_timeout)
    static = judge_static(results["static_analysis"], static_timeout)
    return FileChecks(compiled, evidence, static, then_results)
