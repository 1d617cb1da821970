"""Candidate tasks from a repository's real fix commits (the git half of ``proctor task
mine``).

A commit is a candidate when it is not a merge, has a parent, and changes both test files
and non-test Python files. Its row: base = the first parent, ``patch`` = the diff of every
file that is not a test file, ``test_patch`` = the diff of the test files (a test module
as pytest collects it, a file under a test directory, a ``conftest.py``: see
:mod:`proctor.patch.testpaths`), ``instance_id`` = ``owner__name-<12 hex digits of the
commit>``. Whether a candidate is kept (a test fails before and passes after, and no test
flips on reruns) is decided by running it: the import and ``task check``.
"""

from __future__ import annotations

from proctor.datasets.git_repos import GitRepo
from proctor.datasets.swebench_rows import SWEBenchRow
from proctor.patch import in_test_dir, is_test_module


def is_test_file(path: str) -> bool:
    """A file a commit's ``test_patch`` holds rather than its ``patch``."""
    return is_test_module(path) or in_test_dir(path) or path.rsplit("/", 1)[-1] == "conftest.py"


def candidate_commits(repo: GitRepo, revisions: str = "HEAD") -> list[str]:
    """Full names of the candidate commits in ``revisions`` (a ``git rev-list`` range such
    as ``v1.0..main``; default: all of HEAD's history), newest first.

    Raises:
        ValueError: git cannot read the range (its message).
    """
    if revisions.startswith("-"):  # a range, never an option to git (--output=FILE)
        raise ValueError(f"not a revision range: {revisions!r}")
    out = repo.git("log", "--no-merges", "--format=\x1e%H %P", "--name-only", revisions,
                   "--")
    if out.returncode != 0:
        raise ValueError(f"git log {revisions}: "
                         f"{out.stderr.decode(errors='replace').strip()[:300]}")
    found = []
    for block in out.stdout.decode(errors="replace").split("\x1e")[1:]:
        head, *paths = [line for line in block.splitlines() if line.strip()]
        commit, *parents = head.split()
        if not parents:
            continue
        tests = [p for p in paths if is_test_file(p)]
        code = [p for p in paths if not is_test_file(p) and p.endswith(".py")]
        if tests and code:
            found.append(commit)
    return found


def row_from_commit(repo: GitRepo, repo_name: str, commit: str) -> SWEBenchRow:
    """The candidate row of ``commit`` of ``repo_name`` (``owner/name``); FAIL_TO_PASS and
    PASS_TO_PASS are left empty for the runs to fill.

    Raises:
        ValueError: ``commit`` is not in the repository, is a root commit, or changes no
            test file or no other file.
    """
    full = repo.commit(commit)
    if full is None:
        raise ValueError(f"commit {commit} is not in the repository {repo.origin}")
    parent = repo.parent(full)
    if parent is None:
        raise ValueError(f"commit {full[:12]} has no parent")
    owner, name = repo_name.split("/", 1)
    row = row_from_range(repo, repo_name, parent, full, f"{owner}__{name}-{full[:12]}")
    if not row.test_patch:
        raise ValueError(f"commit {full[:12]} changes no test file")
    return row


def row_from_range(repo: GitRepo, repo_name: str, base: str, head: str,
                   instance_id: str) -> SWEBenchRow:
    """The row of the change from commit ``base`` to commit ``head`` (full names): ``patch``
    the diff of its files that are not test files, ``test_patch`` that of its test files
    (empty when it changes none); FAIL_TO_PASS and PASS_TO_PASS left for the runs.

    Raises:
        ValueError: the change touches no file, or only test files.
    """
    listed = repo.git("diff", "--name-only", "--no-renames", base, head)
    paths = [p for p in listed.stdout.decode(errors="replace").splitlines() if p]
    tests = [p for p in paths if is_test_file(p)]
    if not paths or len(tests) == len(paths):
        raise ValueError(f"{base[:12]}..{head[:12]} changes "
                         f"{'nothing' if not paths else 'only test files'}")
    return SWEBenchRow(instance_id=instance_id, repo=repo_name, base_commit=base,
                       patch=repo.diff(base, head, exclude=tests),
                       test_patch=repo.diff(base, head, paths=tests) if tests else "",
                       extra={"fix_commit": head})
