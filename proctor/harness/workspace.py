"""The repository inside the sandbox: fresh single-commit copy, patch application,
pristine public tests, hidden tests at a path the patch cannot know.

Everything here talks to a :class:`~proctor.sandbox.base.Sandbox`; nothing decides a reward.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from proctor.errors import InfraError
from proctor.harness.hidden_names import rename_hidden_tree
from proctor.harness.tamper import tree_report_argv
from proctor.harness.task import Task
from proctor.sandbox.base import SANDBOX_UID, ExecResult, Sandbox, tar_of_tree
from proctor.sandbox.steps import Step
from proctor.suites.baseline import cache_dir

REPO = "/work/repo"
PATCH_PATH = "/proctor/in/patch.diff"
GIT = ["git", "-c", "user.name=proctor", "-c", "user.email=proctor@localhost",
       "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false"]


@dataclass(frozen=True)
class ApplyResult:
    """``strategy`` names the fallback that worked (None: none did); ``output`` is git's
    message from the last attempt; ``duration_s``: the copy and the apply (seconds).

    ``tree_report``: when :func:`prepare_repo` was asked for it and the patch applied, the
    JSON ``tree_report.py`` printed right after the apply in the same command (None: not
    asked, not applied, the script failed, or its output was cut at the sandbox's output
    cap: then ``tree_report_cut``); ``tree_report_s``: its run time in the sandbox."""

    applied: bool
    strategy: str | None
    output: str
    duration_s: float
    tree_report: str | None = None
    tree_report_s: float = 0.0
    tree_report_cut: bool = False


def prepare_repo(sb: Sandbox, task: Task, timeout: float = 120,
                 patch: bytes | None = None, tree_paths: list[str] | None = None,
                 ) -> ApplyResult | None:
    """Put ``repo/`` at ``REPO`` as a fresh single-commit git repository (no history to
    leak) and, when ``patch`` is given, ``git apply`` it with the fallbacks of
    :data:`APPLY_STRATEGIES`, all in one sandbox command (the repository is built once per
    task on the host, :func:`repo_archive`; the command only extracts it). With
    ``tree_paths`` (the touched paths whose text the tamper judges read) the same command,
    once an attempt applied, also runs the post-apply tree report
    (:func:`proctor.harness.tamper.tree_report_argv`, as the sandbox user like the rest:
    nothing of the patch has run yet) and returns what it printed in
    ``ApplyResult.tree_report``, each part of the output after a marker with a fresh nonce
    the patch cannot know. The harness files must already be in the sandbox then.

    Returns the :class:`ApplyResult`, or None without a patch. Raises InfraError when the
    copy fails (or the whole command does, e.g. times out)."""
    token = secrets.token_hex(8)
    variants = _apply_variants(patch) if patch is not None else []
    extra = {f"{APPLY_DIR.rpartition('/')[2]}/{i}.diff": data
             for i, (_n, _f, data) in enumerate(variants)}
    lines = ["set -u", "cd /work || exit 90", "tar -x --no-same-permissions -f - || exit 90",
             "cd repo || exit 90", "report() { :; }"]
    if tree_paths is not None and variants:
        extra[f"{APPLY_DIR.rpartition('/')[2]}/paths.json"] = json.dumps(
            list(tree_paths)).encode()
        argv = shlex.join(tree_report_argv(REPO, "-", f"{APPLY_DIR}/paths.json"))
        lines.append(f'report() {{ echo "@@proctor-{token}-tree $(date +%s%N)"; '
                     f"(cd /work && exec {argv} </dev/null) 2>&1; c=$?; echo; "
                     f'echo "@@proctor-{token}-tree-end $c $(date +%s%N)"; }}')
    for i, (name, flags, _data) in enumerate(variants):
        lines += [f"echo '@@proctor-{token} {name}'",
                  f"if git apply --whitespace=nowarn {' '.join(flags)} {APPLY_DIR}/{i}.diff "
                  f"2>&1; then echo '@@proctor-{token}-applied'; report; rm -rf {APPLY_DIR}; "
                  "exit 0; fi"]
    lines.append(f"rm -rf {APPLY_DIR}; exit 0")
    res = sb.run(["sh", "-c", "\n".join(lines)], timeout=timeout, cwd="/work",
                 stdin=repo_archive(task, extra))
    if res.exit_code != 0 or res.timed_out:
        raise InfraError(f"cannot copy the repo into the sandbox: {res.output[-2000:]}")
    if patch is None:
        return None
    applying, _, tree = res.output.partition(f"@@proctor-{token}-tree ")
    applied = f"@@proctor-{token}-applied"
    attempts = applying.split(f"@@proctor-{token} ")
    last = attempts[-1].partition("\n")
    output = last[2].replace(applied + "\n", "").replace(applied, "")
    strategy = last[0].strip() if applied in applying else None
    report, report_s = _tree_report(tree, token)
    return ApplyResult(strategy is not None, strategy, output,
                       max(0.0, res.duration_s - report_s), report, report_s,
                       tree_report_cut=strategy is not None and tree_paths is not None
                       and report is None and res.truncated)


def _tree_report(text: str, token: str) -> tuple[str | None, float]:
    """(the tree report's JSON text, its seconds) from the part of the apply command's
    output after the tree marker; (None, seconds or 0.0) when it failed or was cut."""
    start, _, rest = text.partition("\n")
    body, sep, end = rest.rpartition(f"\n@@proctor-{token}-tree-end ")
    if not sep:
        return None, 0.0
    try:
        code, t1 = (int(x) for x in end.split()[:2])
        seconds = max(0.0, (t1 - int(start.strip())) / 1e9)
    except ValueError:
        return None, 0.0
    return (body if code == 0 else None), seconds


#: Where :func:`prepare_repo` puts the patch variants (outside the repo; removed after).
APPLY_DIR = "/work/.proctor-apply"


def _apply_variants(patch: bytes) -> list[tuple[str, list[str], bytes]]:
    """(strategy name, git-apply flags, patch bytes) of :data:`APPLY_STRATEGIES`, in order,
    without an attempt that would repeat the one before it (same bytes, no flags)."""
    out = []
    for name, flags, transform in APPLY_STRATEGIES:
        data = transform(patch) if transform else patch
        if transform and data == patch and not flags:
            continue
        out.append((name, flags, data))
    return out


def repo_archive(task: Task, extra: dict[str, bytes] | None = None) -> bytes:
    """An uncompressed tar holding ``repo/`` (the task's repo without ``__pycache__``,
    compiled files and its own top-level ``.git``, as a fresh single-commit git repository)
    and ``extra`` (relative path -> bytes), everything owned by the sandbox user. The
    repository is built with the host's git once per task (cached by fingerprint)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in sorted((extra or {}).items()):
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            tar.addfile(_user_owned(info), io.BytesIO(data))
    # A tar without its end-of-archive blocks, then a whole one: tar reads them as one.
    return _repo_tar(str(task.repo), task.fingerprint) + buf.getvalue()


def _user_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = SANDBOX_UID
    info.uname = info.gname = ""
    info.mtime = 0
    return info


#: Bump when the archive's layout changes (keys the on-disk cache).
_REPO_TAR_FORMAT = 2  # 2: a task repo's own .git left out


@lru_cache(maxsize=4)
def _repo_tar(repo: str, fingerprint: str) -> bytes:
    """The task's repository as a fresh single-commit git repo, tarred under ``repo/``
    (sandbox user's), without the end-of-archive blocks. ``fingerprint`` keys the caches
    (this process's last few, and ``$PROCTOR_CACHE_DIR/repos/``, written atomically): a
    changed task gets a new archive, a batch over many tasks builds each once."""
    path = cache_dir() / "repos" / f"{fingerprint}-v{_REPO_TAR_FORMAT}.tar"
    try:
        return path.read_bytes()
    except OSError:
        pass
    data = _build_repo_tar(repo)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as fh:
            tmp = fh.name
            fh.write(data)
        os.replace(tmp, path)
    except OSError:  # a cache only
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return data


def _build_repo_tar(repo: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="proctor-repo-") as tmp:
        work = Path(tmp) / "repo"
        compiled = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
        shutil.copytree(repo, work, symlinks=True, ignore=lambda d, names: compiled(d, names)
                        | ({".git"} if Path(d) == Path(repo) else set()))  # no history
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp,
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z", "LANG": "C"}
        script = " ".join(["git init -q -b main . &&", *GIT, "add -A -f . &&",
                           *GIT, "commit -q --no-verify --allow-empty -m snapshot"])
        res = subprocess.run(["sh", "-c", script], cwd=work, env=env, capture_output=True,
                             text=True)
        if res.returncode != 0:
            raise InfraError(f"cannot snapshot the repo: {(res.stderr or res.stdout)[-2000:]}")
        buf = io.BytesIO()
        tar = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
        tar.add(work, arcname="repo", filter=_user_owned)
        end = tar.offset  # before close() writes the end-of-archive blocks
        tar.close()
        return buf.getvalue()[:end]


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
    and test files it added there, are gone): :func:`restore_public_tests_step` as a
    command of its own. Raises InfraError when that fails."""
    step = restore_public_tests_step(task, timeout)
    check_restored(sb.run(step.argv, timeout=step.timeout, cwd=step.cwd, stdin=step.stdin))


#: Shell: for each path in ``"$@"`` (relative), remove any parent that is not a real
#: directory (a file or a symlink the patch put there), top down, so the pristine copy can
#: go back (red4: a file named like a public test directory made the restore fail, an
#: unscored ``error``).
CLEAR_PARENTS_SH = (
    'for p in "$@"; do rest=$p; cur=; '
    'while case $rest in */*) true;; *) false;; esac; do '
    'cur=${cur:+$cur/}${rest%%/*}; rest=${rest#*/}; '
    'if [ -L "$cur" ] || { [ -e "$cur" ] && [ ! -d "$cur" ]; }; then rm -f -- "$cur"; fi; '
    'done; done')


def restore_public_tests_step(task: Task, timeout: float = 60) -> Step:
    """The restore of the pristine public tests as a step (:mod:`proctor.sandbox.steps`),
    e.g. the last of the command before the public run: remove the public test paths (and
    any non-directory in place of one of their parents), then extract the pristine copies
    (sandbox user's) from stdin."""
    paths = task.config.tests.public
    return Step("restore_public_tests",
                ["sh", "-c", f'{CLEAR_PARENTS_SH}; rm -rf -- "$@" && '
                 'exec tar -x --no-same-permissions -f -', "sh", *paths], timeout, cwd=REPO,
                stdin=tar_of_tree(task.repo, paths))


def check_restored(res: ExecResult | None) -> None:
    """Raises InfraError when the restore (``res``: its result) did not succeed."""
    if res is None or not res.ok:
        why = "no result" if res is None else res.output[-1000:]
        raise InfraError(f"cannot reset public tests: {why}")


@dataclass(frozen=True)
class HiddenPlacement:
    """Where the hidden tests went: ``root`` (the hidden run's rootdir), ``targets`` (pytest
    arguments relative to ``root``: ``Task.hidden_files`` without the helpers, which the
    tests import rather than pytest collects) and ``renamed`` (helper name -> the random
    name it has in this run, see :mod:`proctor.harness.hidden_names`)."""

    root: str
    targets: list[str]
    renamed: dict[str, str]


def plan_hidden_tests(task: Task,
                      transform: Callable[[dict[str, bytes]], dict[str, bytes]] | None = None,
                      ) -> tuple[HiddenPlacement, dict[str, bytes]]:
    """Where the hidden tests go and what: (placement, files: relative path -> bytes), for
    the caller to put root-owned and read-only at ``placement.root`` (a fresh unpredictable
    directory under ``/proctor``), only after the patch is applied and after every process
    of the sandbox user was killed (:func:`kill_user_processes`). Every helper module or
    package gets a fresh random name and the hidden files' imports of it are rewritten
    (:func:`~proctor.harness.hidden_names.rename_hidden_tree`; test modules keep their
    paths, so test ids do not change). ``transform`` (relative path -> content, in and out)
    may then change the files, e.g. to hide a tripwire among them (it must keep every path).
    Nothing is put here.

    Raises InfraError when a hidden file cannot be read on the host."""
    root = f"/proctor/h-{secrets.token_hex(8)}"
    try:
        files = {rel: (task.hidden / rel).read_bytes() for rel in task.hidden_files
                 if not rel.endswith((".pyc", ".pyo"))}  # as tar_of_tree leaves them out
    except OSError as exc:
        raise InfraError(f"cannot read the hidden tests: {exc}") from exc
    tree = rename_hidden_tree(files, f"_p{secrets.token_hex(6)}")
    targets = [tree.paths.get(rel, rel) for rel in task.hidden_files
               if rel not in tree.helper_paths]
    out = tree.files if transform is None else transform(tree.files)
    return HiddenPlacement(root, targets, tree.names), out


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
