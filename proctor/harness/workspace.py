"""The repository inside the sandbox: fresh single-commit copy, patch application,
pristine public tests, hidden tests at a path the patch cannot know.

Everything here talks to a :class:`~proctor.sandbox.base.Sandbox`; nothing decides a reward.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from proctor.errors import InfraError
from proctor.harness.hidden_names import rename_hidden_tree
from proctor.harness.task import Task
from proctor.sandbox.base import Sandbox

REPO = "/work/repo"
PATCH_PATH = "/proctor/in/patch.diff"
GIT = ["git", "-c", "user.name=proctor", "-c", "user.email=proctor@localhost",
       "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false"]


@dataclass(frozen=True)
class ApplyResult:
    """``strategy`` names the fallback that worked (None: none did); ``output`` is git's
    message from the last attempt."""

    applied: bool
    strategy: str | None
    output: str
    duration_s: float


def prepare_repo(sb: Sandbox, task: Task, timeout: float = 120) -> None:
    """Copy ``repo/`` to ``REPO`` and make it a fresh single-commit git repository (no
    history to leak). Raises InfraError when git fails."""
    sb.put_tree(REPO, task.repo)
    res = sb.run(["sh", "-c", " ".join([
        "git init -q -b main . &&",
        *GIT, "add -A -f . &&",
        *GIT, "commit -q --no-verify -m snapshot",
    ])], timeout=timeout, cwd=REPO)
    if not res.ok:
        raise InfraError(f"cannot snapshot the repo in the sandbox: {res.output[-2000:]}")


def _with_final_newline(b: bytes) -> bytes:
    return b if b.endswith(b"\n") else b + b"\n"


#: (strategy name, extra git-apply flags, patch transform), tried in order. The integrity
#: cross-check reads the patch under every one of them (executor._git_paths_as_applied).
APPLY_STRATEGIES = (
    ("git_apply", [], None),
    ("git_apply_trailing_newline", [], lambda b: b if b.endswith(b"\n") else b + b"\n"),
    # CRLF line endings throughout (a completion from a Windows tool): the context lines
    # carry a CR the repo's LF files do not have, so git finds no match.
    ("git_apply_lf", [], lambda b: _with_final_newline(b.replace(b"\r\n", b"\n"))),
    ("git_apply_recount", ["--recount"], lambda b: b if b.endswith(b"\n") else b + b"\n"),
)


def apply_patch(sb: Sandbox, patch: bytes, timeout: float = 60) -> ApplyResult:
    """``git apply`` the patch (never GNU patch), trying the recorded fallbacks in order.
    git apply is atomic: a failed attempt leaves the tree untouched."""
    total, output = 0.0, ""
    for name, flags, transform in APPLY_STRATEGIES:
        data = transform(patch) if transform else patch
        if transform and data == patch and not flags:  # the same attempt again
            continue
        sb.put_files("/proctor/in", {"patch.diff": data})
        res = sb.run(["git", "apply", "--whitespace=nowarn", *flags, PATCH_PATH],
                     timeout=timeout, cwd=REPO)
        total += res.duration_s
        output = res.output
        if res.ok:
            return ApplyResult(True, name, output, total)
    return ApplyResult(False, None, output, total)


def restore_public_tests(sb: Sandbox, task: Task, timeout: float = 60) -> None:
    """Replace the public test paths with their pristine copies (the patch's edits to them,
    and test files it added there, are gone)."""
    paths = task.config.tests.public
    res = sb.run(["rm", "-rf", "--", *paths], timeout=timeout, cwd=REPO)
    if not res.ok:
        raise InfraError(f"cannot reset public tests: {res.output[-1000:]}")
    sb.put_tree(REPO, task.repo, only=paths)


@dataclass(frozen=True)
class HiddenPlacement:
    """Where the hidden tests went: ``root`` (the hidden run's rootdir), ``targets`` (pytest
    arguments relative to ``root``: ``Task.hidden_files`` without the helpers, which the
    tests import rather than pytest collects) and ``renamed`` (helper name -> the random
    name it has in this run, see :mod:`proctor.harness.hidden_names`)."""

    root: str
    targets: list[str]
    renamed: dict[str, str]


def place_hidden_tests(sb: Sandbox, task: Task,
                       transform: Callable[[dict[str, bytes]], dict[str, bytes]] | None = None,
                       ) -> HiddenPlacement:
    """Copy the hidden tests, root-owned and read-only, to a fresh unpredictable directory,
    every helper module or package under a fresh random name and the hidden files' imports
    of it rewritten (:func:`~proctor.harness.hidden_names.rename_hidden_tree`; test modules
    keep their paths, so test ids do not change). Called only after the patch is applied
    and after every process of the sandbox user was killed (:func:`kill_user_processes`).
    ``transform`` (relative path -> content, in and out) may then change the files, e.g. to
    hide a tripwire among them (it must keep every path).

    Raises InfraError when a hidden file cannot be read on the host."""
    root = f"/proctor/h-{secrets.token_hex(8)}"
    try:
        files = {rel: (task.hidden / rel).read_bytes() for rel in task.hidden_files
                 if not rel.endswith((".pyc", ".pyo"))}  # as tar_of_tree leaves them out
    except OSError as exc:
        raise InfraError(f"cannot read the hidden tests: {exc}") from exc
    tree = rename_hidden_tree(files, f"_p{secrets.token_hex(6)}")
    sb.put_files(root, tree.files if transform is None else transform(tree.files),
                 read_only=True)
    targets = [tree.paths.get(rel, rel) for rel in task.hidden_files
               if rel not in tree.helper_paths]
    return HiddenPlacement(root, targets, tree.names)


def place_bench_dir(sb: Sandbox, task: Task) -> str | None:
    """Copy the task's benchmark folder (if any), root-owned and read-only, to a fresh
    unpredictable directory; returns it, or None when the task has none."""
    if task.bench_dir is None:
        return None
    root = f"/proctor/b-{secrets.token_hex(8)}"
    sb.put_tree(root, task.bench_dir, read_only=True)
    return root


def kill_user_processes(sb: Sandbox, timeout: float = 10) -> None:
    """SIGKILL every process of the sandbox user (see
    :meth:`~proctor.sandbox.base.Sandbox.kill_user_processes`), so nothing the code under
    test started in one step reaches the next."""
    sb.kill_user_processes()


def reset_scratch(sb: Sandbox, timeout: float = 30) -> None:
    """Empty ``/tmp`` and ``HOME``, so every suite starts from the same scratch state (a
    patch that filled ``/tmp`` in one suite must not decide the next one's fate)."""
    sb.run(["sh", "-c", 'for d in /tmp "$HOME"; do find "$d" -mindepth 1 -delete; done '
            "2>/dev/null; true"], timeout=timeout)
