"""``proctor gate``: your own change, judged as an agent's patch is, before you open the PR.

:func:`gate_change` takes the change from ``BASE`` to ``HEAD`` of a repository (``git diff
BASE...HEAD``: from their merge base, committed work only) and builds a task from it the
way ``proctor task mine`` builds one from a fix commit
(:func:`~proctor.datasets.mine.row_from_range`,
:func:`~proctor.datasets.swebench_import.import_row`): the repository at the merge base,
the test files the change adds or edits as the hidden suite (at their repository paths),
the repository's other tests as the public suite, the rest of the change as the patch.
Then it scores that patch like any rollout (baseline, both suites, mutation, static
analysis; the PR description and transcript, and a judge, when given) and returns the gate
verdict with its blockers and the rule that decided.

A change that adds or edits no test has nothing that can show it works: it is not scored,
and its verdict is WARN with that rule (``untested``). A change whose tests all pass
before it too has no FAIL_TO_PASS test: the same WARN, with the baseline's words. A change
whose own tests still fail with it is FAIL (the baseline names them). The task
is written to a temporary directory (``keep``: to this one instead) and removed after; its
baseline stays cached, so running the gate again on the same change is quick.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.datasets.git_repos import RepoCache, RepoNotFound, repo_name
from proctor.datasets.mine import row_from_range
from proctor.datasets.swebench_import import ImportOptions, import_row
from proctor.datasets.swebench_rows import RowError
from proctor.errors import TaskConfigError
from proctor.harness.judge import Judge
from proctor.record import RewardRecord

#: The rule of a change with no test that fails before it and passes after it.
UNTESTED = "untested"


class GateInputError(ValueError):
    """The change cannot be gated: not a repository, unknown revisions, nothing changed."""


@dataclass
class GateResult:
    """The gate's answer: ``gate`` (PASS / WARN / FAIL), ``score`` (0 .. 100, None when not
    scored), ``rule`` (what decided), ``blockers``, the ``record`` when scored, the
    ``base`` (merge base) and ``head`` commits, and the changed files (``patch_files``,
    ``test_files``)."""

    gate: str
    rule: str
    base: str
    head: str
    score: float | None = None
    blockers: list[str] = field(default_factory=list)
    record: RewardRecord | None = None
    patch_files: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)


def _files(diff: str) -> list[str]:
    return [line[6:] for line in diff.splitlines() if line.startswith("+++ b/")]


def gate_change(repo_path: Path, base: str, head: str = "HEAD", *,  # noqa: PLR0913
                message: str | bytes | None = None, transcript: Any = None,
                judge: Judge | None = None, sandbox: str | None = None,
                image: str | None = None, baseline_runs: int | None = None,
                keep: Path | None = None) -> GateResult:
    """The gate verdict of the change ``base...head`` of the repository at ``repo_path``
    (module docstring).

    Raises:
        GateInputError: ``repo_path`` is not a git repository, a revision is unknown, or
            the change touches nothing or only tests.
    """
    from proctor.harness.pipeline.score import score

    name = repo_name(repo_path)
    with RepoCache(None, {name: Path(repo_path)}) as cache:
        try:
            repo = cache.get(name)
        except RepoNotFound as exc:
            raise GateInputError(str(exc)) from None
        head_commit = repo.commit(head)
        if head_commit is None:
            raise GateInputError(f"{head} is not a commit of {repo_path}")
        if repo.commit(base) is None:
            raise GateInputError(f"{base} is not a commit of {repo_path}")
        merge = repo.git("merge-base", base, head_commit)
        if merge.returncode != 0:
            raise GateInputError(f"{base} and {head} have no merge base")
        base_commit = merge.stdout.decode().strip()
        try:
            row = row_from_range(repo, name, base_commit, head_commit,
                                 f"gate-{head_commit[:12]}")
        except ValueError as exc:
            raise GateInputError(str(exc)) from None
        result = GateResult("WARN", UNTESTED, base_commit, head_commit,
                            patch_files=_files(row.patch), test_files=_files(row.test_patch))
        if not row.test_patch:
            result.rule = (f"{UNTESTED}: the change adds or edits no test, so nothing shows "
                           "it works; not scored")
            return result
        out = Path(keep) if keep is not None else Path(tempfile.mkdtemp(prefix="proctor-gate-"))
        try:
            task = import_row(row, repo, out, ImportOptions(baseline_runs=baseline_runs)).task
            record = score(task, row.patch, message=message, transcript=transcript,
                           judge=judge, sandbox=sandbox, image=image, rollout_id="gate",
                           message_change=row.patch + row.test_patch)
        except RowError as exc:
            raise GateInputError(exc.cause) from None
        finally:
            if keep is None:
                shutil.rmtree(out, ignore_errors=True)
    result.record = record
    if record.status == "error":
        assert record.error is not None
        said = record.error.message
        if record.error.kind == TaskConfigError.kind and "with the reference patch too" in said:
            result.gate = "FAIL"
            result.rule = f"the change's own tests fail with it ({said[:400]})"
            result.blockers = [result.rule]
            return result
        if record.error.kind == TaskConfigError.kind and "FAIL_TO_PASS" in said:
            result.rule = (f"{UNTESTED}: no test of the change fails before it and passes "
                           f"after it ({said[:300]})")
            return result
        result.gate, result.rule = "FAIL", f"error: {record.error.message[:300]}"
        return result
    assert record.verdict is not None
    result.gate, result.rule = record.verdict.gate, record.verdict.rule
    result.score, result.blockers = record.verdict.score, list(record.verdict.blockers)
    return result
