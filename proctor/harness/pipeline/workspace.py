"""The repository inside the sandbox: fresh single-commit copy, patch application,
pristine public tests, hidden tests placed at their upstream paths once the patch's code
is gone, where the code under test cannot change them.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

from proctor import cache_dirs
from proctor.errors import InfraError
from proctor.harness.pipeline.hidden_names import rename_hidden_tree
from proctor.harness.tamper import tree_report_argv
from proctor.patch import apply_variants, is_test_module
from proctor.sandbox import (
    CLEAR_PARENTS_SH,
    REPO,
    SANDBOX_UID,
    ExecResult,
    Sandbox,
    Step,
    host_dir,
    tar_of_tree,
)
from proctor.task import Task

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
    :data:`~proctor.patch.apply.APPLY_STRATEGIES`, all in one sandbox command (the
    repository is built once per task on the host, :func:`repo_archive`; the command only
    extracts it). With
    ``tree_paths`` (the touched paths whose text the tamper judges read) the same command,
    once an attempt applied, also runs the post-apply tree report
    (:func:`proctor.harness.tamper.tree.tree_report_argv`, as the sandbox user like the rest:
    nothing of the patch has run yet) and returns what it printed in
    ``ApplyResult.tree_report``, each part of the output after a marker with a fresh nonce
    the patch cannot know. The harness files must already be in the sandbox then.

    Returns the :class:`ApplyResult`, or None without a patch. Raises InfraError when the
    copy fails (or the whole command does, e.g. times out)."""
    token = secrets.token_hex(8)
    variants = apply_variants(patch) if patch is not None else []
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
    path = cache_dirs.repos() / f"{fingerprint}-v{_REPO_TAR_FORMAT}.tar"
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
    with host_dir("repo") as tmp:
        work = tmp / "repo"
        compiled = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
        shutil.copytree(repo, work, symlinks=True, ignore=lambda d, names: compiled(d, names)
                        | ({".git"} if Path(d) == Path(repo) else set()))  # no history
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
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


def restore_public_tests(sb: Sandbox, task: Task, timeout: float = 60) -> None:
    """Replace the public test paths with their pristine copies (the patch's edits to them,
    and test files it added there, are gone): :func:`restore_public_tests_step` as a
    command of its own. Raises InfraError when that fails."""
    step = restore_public_tests_step(task, timeout)
    check_restored(sb.run(step.argv, timeout=step.timeout, cwd=step.cwd, stdin=step.stdin))


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
    """Where the hidden tests went: ``root`` (the hidden run's rootdir: a fresh directory
    under ``/proctor`` of :func:`plan_hidden_tests`, or the repository, as upstream runs
    them, for :func:`plan_hidden_upstream`), ``targets`` (pytest arguments relative to
    ``root``: the hidden files without the helpers, which the tests import rather than
    pytest collects; upstream: only the test modules, ``test_*.py`` / ``*_test.py``),
    ``renamed`` (helper name -> the random name it has in this run, see
    :mod:`proctor.harness.pipeline.hidden_names`). Upstream placement only (empty otherwise):
    ``files`` (the repo-relative paths placed, sorted), ``locked`` (the repo-relative
    directories that directly hold a placed file), ``chain`` (every directory from
    ``/work`` down to a locked one, absolute, parents first), ``state`` (a fresh token
    naming the placement's scratch directories under ``/work``), ``shadows``
    (repo-relative paths that would shadow a hidden module: :func:`_shadow_candidates`)
    and ``conftests`` (the conftests written root-owned on the way: :func:`_chain_conftests`)."""

    root: str
    targets: list[str]
    renamed: dict[str, str]
    files: tuple[str, ...] = ()
    locked: tuple[str, ...] = ()
    chain: tuple[str, ...] = ()
    state: str = ""
    shadows: tuple[str, ...] = ()
    conftests: dict[str, bytes] = field(default_factory=dict)


def visible_packages(task: Task, paths: list[str]) -> set[str]:
    """The repo-relative ancestor directories of ``paths`` that hold an ``__init__.py`` in
    the task's (visible) repository."""
    dirs = {str(p) for rel in paths for p in PurePosixPath(rel).parents} - {"."}
    return {d for d in dirs if (task.repo / d / "__init__.py").is_file()}


def plan_hidden_tests(task: Task,
                      transform: Callable[[dict[str, bytes]], dict[str, bytes]] | None = None,
                      ) -> tuple[HiddenPlacement, dict[str, bytes]]:
    """Where the hidden tests go and what: (placement, files: relative path -> bytes), for
    the caller to put root-owned and read-only at ``placement.root`` (a fresh unpredictable
    directory under ``/proctor``), only after the patch is applied and after every process
    of the sandbox user was killed (:func:`kill_user_processes`). Every helper module or
    package gets a fresh random name and the hidden files' imports of it are rewritten
    (:func:`~proctor.harness.pipeline.hidden_names.rename_hidden_tree`; test modules keep their
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



def plan_hidden_upstream(task: Task,
                         transform: Callable[[dict[str, bytes]], dict[str, bytes]] | None = None,
                         ) -> tuple[HiddenPlacement, dict[str, bytes]]:
    """Where the hidden tests go and what: (placement, files: repo-relative path -> bytes)
    for :func:`place_hidden_tests`, which puts them into the patched repository at their
    upstream paths (``hidden/tests/test_x.py`` at ``tests/test_x.py``), root-owned and
    read-only, only after the patch is applied and after every process of the sandbox
    user was killed (:func:`kill_user_processes`; a fresh sandbox has none). The run's
    rootdir is the repository: the tests import their own package (``from . import x``,
    ``from tests import x``), the visible test directory's helper modules, and are governed
    by the visible ``conftest.py`` files, as upstream.

    Every helper module or package in an import root (see
    :mod:`~proctor.harness.pipeline.hidden_names`, with the visible tree's ``__init__.py`` files
    counted) that no visible path occupies gets a fresh random name and the hidden files'
    imports of it are rewritten; test modules keep their paths, so test ids are upstream's
    (``tests/test_x.py::test_a``). ``transform`` (relative path -> content, in and out) may
    then change the files, e.g. to hide a tripwire among them (it must keep every path).
    Nothing is put here.

    The tasks that set ``hidden_at_upstream_path`` only; the others:
    :func:`plan_hidden_tests`.

    Raises InfraError when a hidden file cannot be read on the host."""
    try:
        files = {rel: (task.hidden / rel).read_bytes() for rel in task.hidden_files
                 if not rel.endswith((".pyc", ".pyo"))}  # as tar_of_tree leaves them out
    except OSError as exc:
        raise InfraError(f"cannot read the hidden tests: {exc}") from exc
    visible = _visible_near(task, files)
    tree = rename_hidden_tree(files, f"_p{secrets.token_hex(6)}",
                              visible_packages(task, list(files)), visible)
    targets = [tree.paths[rel] for rel in task.hidden_files if rel in tree.paths
               and rel not in tree.helper_paths
               and is_test_module(PurePosixPath(tree.paths[rel]).name)]
    out = tree.files if transform is None else transform(tree.files)
    locked = sorted({str(PurePosixPath(rel).parent) for rel in out})
    chain: list[str] = ["/work", REPO]
    for d in locked:
        parts = PurePosixPath(d).parts if d != "." else ()
        for i in range(1, len(parts) + 1):
            where = f"{REPO}/{'/'.join(parts[:i])}"
            if where not in chain:
                chain.append(where)
    shadows = sorted(_shadow_candidates(task, out))
    conftests = _chain_conftests(task, chain, out)
    return HiddenPlacement(REPO, targets, tree.names, tuple(sorted(out)), tuple(locked),
                           tuple(chain), secrets.token_hex(8), tuple(shadows),
                           conftests), out


def _chain_conftests(task: Task, chain: list[str], hidden: dict[str, bytes],
                     ) -> dict[str, bytes]:
    """Repo-relative ``conftest.py`` of every chain directory under the repository that no
    hidden file provides -> its bytes in the task's ``repo/`` (patches may not touch a
    conftest, so these are the patched tree's), or empty where the task has none.

    Raises InfraError when one cannot be read on the host."""
    out: dict[str, bytes] = {}
    for d in chain:
        if d != REPO and not d.startswith(REPO + "/"):
            continue
        rel = "conftest.py" if d == REPO else f"{d[len(REPO) + 1:]}/conftest.py"
        if rel in hidden:
            continue
        host = task.repo / rel
        try:
            out[rel] = host.read_bytes() if host.is_file() and not host.is_symlink() else b""
        except OSError as exc:
            raise InfraError(f"cannot read {host}: {exc}") from exc
    return out


def _shadow_candidates(task: Task, files: dict[str, bytes]) -> set[str]:
    """Repo-relative directories the import system would prefer to a hidden module
    ``d/name.py``: a package ``d/name/`` (one the visible repository does not have, so a
    patch's), for :func:`place_hidden_tests` to move aside. Extension modules next to it
    (``d/name.*.so``) are matched by the placement itself."""
    out = set()
    hidden_dirs = {str(p) for rel in files for p in PurePosixPath(rel).parents}
    for rel in files:
        p = PurePosixPath(rel)
        if p.suffix != ".py" or p.name == "__init__.py":
            continue
        cand = str(p.with_suffix(""))
        if cand not in hidden_dirs and not (task.repo / cand).exists():
            out.add(cand)
    return out


def _visible_near(task: Task, files: dict[str, bytes]) -> list[str]:
    """Repo-relative paths of the visible repository that sit in a directory holding a
    hidden file (and, for a directory there, anything under it): what a hidden helper's
    name could collide with."""
    out: list[str] = []
    for d in sorted({str(PurePosixPath(rel).parent) for rel in files}):
        base = task.repo if d == "." else task.repo / d
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            rel = entry.name if d == "." else f"{d}/{entry.name}"
            out.append(f"{rel}/x" if entry.is_dir() else rel)
    return out


#: Mode of a directory on the way to the hidden files (the repo, ...): root's,
#: world-writable with the sticky bit: the sandbox user still creates, changes and removes
#: its own entries there, but cannot rename or remove the root-owned directory that
#: leads to the hidden files (``/work`` itself is a root-owned 1777 tmpfs in the Docker
#: sandbox).
CHAIN_MODE = 0o1777
#: Mode of a directory that directly holds a hidden file: root's, not writable by the
#: sandbox user, so nothing can be added next to the hidden modules (a ``name/__init__.py``
#: package or a ``name.*.so`` extension that the import system would prefer to
#: ``name.py``, a ``__pycache__`` with forged bytecode), nothing renamed or removed.
LOCKED_MODE = 0o755

# The placement alternates between the sandbox user (who owns the repository's entries
# and may move them) and root (who, without capabilities, cannot chown, but owns what it
# makes): the user moves the repository aside, root makes the directories on the way to
# the hidden files anew (its own), the user moves every other entry back into them, root
# adds conftests and the hidden files. Nothing else runs meanwhile: a fresh sandbox, or
# one whose user processes were killed. Each script: python3 -I -S -c, JSON on argv[1].
_U1 = r"""
import json, os, stat, sys
a = json.loads(sys.argv[1])
modes = {}
for d in a["chain"]:
    st = os.lstat(d) if os.path.lexists(d) else None
    if st is not None and stat.S_ISDIR(st.st_mode):
        modes[d] = stat.S_IMODE(st.st_mode)
os.rename(a["repo"], a["stage"])
print(json.dumps(modes))
"""

_R1 = r"""
import json, os, sys
a = json.loads(sys.argv[1])
for d in a["chain"]:
    os.mkdir(d)
    os.chmod(d, 0o1777)
"""

_U2 = r"""
import json, os, shutil, sys
a = json.loads(sys.argv[1])
repo, stage, aside = a["repo"], a["stage"], a["aside"]
chain, locked = set(a["chain"]), set(a["locked"])
keep_out = set(a["hidden"]) | set(a["shadows"])
stems = {}
for f in a["hidden"]:
    if f.endswith(".py"):
        stems.setdefault(os.path.dirname(f), set()).add(os.path.basename(f)[:-3])
moved = []
def put_aside(src, rel):
    dst = aside + rel
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)
    moved.append(rel)
os.mkdir(aside)
for d in a["chain"]:
    rel = d[len(repo):]
    s = stage + rel
    if not os.path.lexists(s):
        continue
    if os.path.islink(s) or not os.path.isdir(s):
        put_aside(s, rel)
        continue
    for name in sorted(os.listdir(s)):
        t, e = f"{d}/{name}", f"{s}/{name}"
        if t in chain:
            continue
        if name == "__pycache__" and d in locked:
            shutil.rmtree(e, ignore_errors=True)
            continue
        so = any(name.startswith(stem + ".") and name.endswith(".so")
                 for stem in stems.get(d, ()))
        if name == "conftest.py" or t in keep_out or so:
            put_aside(e, f"{rel}/{name}")
        else:
            os.rename(e, t)
for d in sorted(a["chain"], key=len, reverse=True):
    s = stage + d[len(repo):]
    if os.path.isdir(s) and not os.path.islink(s):
        os.rmdir(s)
print(json.dumps(moved))
"""

_R2 = r"""
import io, json, os, sys, tarfile
a = json.loads(sys.argv[1])
repo = a["repo"]
def write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o444)
with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read())) as tar:
    for info in tar.getmembers():
        write(f"{repo}/{info.name}", tar.extractfile(info).read())
for d in a["locked"]:
    os.chmod(d, 0o755)
"""

_R3 = r"""
import json, os, sys
a = json.loads(sys.argv[1])
for f in a["hidden"]:
    if os.path.lexists(f):
        os.unlink(f)
for d in a["chain"]:
    c = f"{d}/conftest.py"
    if os.path.lexists(c) and os.lstat(c).st_uid == 0:
        os.unlink(c)
    os.chmod(d, 0o1777)
"""

_U3 = r"""
import json, os, sys
a = json.loads(sys.argv[1])
repo, back, aside = a["repo"], a["back"], a["aside"]
chain, modes = set(a["chain"]), a["modes"]
os.mkdir(back)
for d in a["chain"]:
    if d not in modes:
        continue
    b = back + d[len(repo):]
    if d != repo:
        os.mkdir(b)
    for name in sorted(os.listdir(d)):
        t = f"{d}/{name}"
        if t not in chain:
            os.rename(t, f"{b}/{name}")
for rel in reversed(a["moved"]):
    dst = back + rel
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(aside + rel, dst)
for root, dirs, files in os.walk(aside, topdown=False):
    os.rmdir(root)
for d, mode in modes.items():
    os.chmod(back + d[len(repo):], mode)
"""

_R4 = r"""
import json, os, sys
a = json.loads(sys.argv[1])
for d in sorted(a["chain"], key=len, reverse=True):
    os.rmdir(d)
"""

_U4 = r"""
import json, os, sys
a = json.loads(sys.argv[1])
os.rename(a["back"], a["repo"])
"""


@dataclass
class PlacedHidden:
    """What :func:`place_hidden_tests` did, for :func:`unplace_hidden_tests` to undo:
    ``modes`` (chain directory that existed -> its mode), ``moved`` (repo-relative paths,
    with a leading ``/``, moved into the aside directory)."""

    placement: HiddenPlacement
    modes: dict[str, int]
    moved: list[str]


@dataclass(frozen=True)
class _Commands:
    """The placement's commands in ``sb``: each a Python script given the placement's
    ``args`` (JSON) and ``timeout`` seconds."""

    sb: Sandbox
    args: dict
    timeout: float

    def run(self, script: str, what: str, *, root: bool, stdin: bytes | None = None) -> str:
        """Run ``script`` as root or as the sandbox user; its output.

        Raises:
            InfraError: the command failed (``what``: the verb the message names).
        """
        res = self.sb.run(["python3", "-I", "-S", "-c", script, json.dumps(self.args)],
                          timeout=self.timeout, user="0:0" if root else None, cwd="/",
                          stdin=stdin)
        if not res.ok:
            raise InfraError(f"cannot {what} the hidden tests: {res.output[-1000:]}")
        return res.output


def _placement_args(placement: HiddenPlacement) -> dict:
    chain = [d for d in placement.chain if d == REPO or d.startswith(REPO + "/")]
    return {"repo": REPO, "chain": chain,
            "locked": [REPO if d == "." else f"{REPO}/{d}" for d in placement.locked],
            "hidden": [f"{REPO}/{rel}" for rel in placement.files],
            "shadows": [f"{REPO}/{rel}" for rel in placement.shadows],
            "stage": f"/work/.proctor-stage-{placement.state}",
            "aside": f"/work/.proctor-aside-{placement.state}",
            "back": f"/work/.proctor-back-{placement.state}"}


def place_hidden_tests(sb: Sandbox, placement: HiddenPlacement, files: dict[str, bytes],
                       timeout: float = 60) -> PlacedHidden:
    """Put ``files`` (repo-relative path -> bytes, :func:`plan_hidden_upstream`) into the
    repository at their paths, in four commands alternating the sandbox user and root (see
    the scripts above; nothing else may run in the sandbox meanwhile):

    * every directory of ``placement.chain`` under ``/work`` (the repo, the directories
      down to the hidden files) is made anew by root with :data:`CHAIN_MODE` (sticky), the
      user's entries moved into it, so the sandbox user cannot rename or replace a
      directory on the way to a hidden file; those that directly hold one get
      :data:`LOCKED_MODE` and lose their ``__pycache__``;
    * moved aside instead (into a directory of the user's under ``/work``, back on undo):
      a visible file at a hidden path (an upstream test file the hidden version replaces),
      what the import system would load instead of a hidden module ``d/name.py`` (a
      package ``d/name/`` the visible repository lacks: ``placement.shadows``; an
      extension ``d/name.*.so``), and every visible ``conftest.py`` on the way;
    * the hidden files are written root-owned, mode 0444, and every directory of the
      chain gets a root-owned read-only ``conftest.py`` (``placement.conftests``: the
      task's own, from the host, else an empty one), so neither a conftest written at run
      time before the placement nor code run by the tests (conftests import the code
      under test) can change a conftest pytest loads or add one.

    The code under test (the sandbox user) can then neither change, rename nor unlink a
    hidden file, nor put anything beside it that the import system would load instead.
    Other visible files keep their owner: the user may change them as the patch could
    have. The sandbox must make root-owned files (``ROOT_OWNED_FILES``); ``/work`` must
    be root's and sticky (the Docker sandbox's tmpfs). Returns what
    :func:`unplace_hidden_tests` needs. Raises InfraError when a command fails."""
    if not getattr(sb, "ROOT_OWNED_FILES", True):
        raise InfraError(f"the {getattr(sb, 'name', '?')} sandbox cannot make the hidden "
                         "tests root-owned (hidden_at_upstream_path needs --sandbox docker)")
    cmd = _Commands(sb, _placement_args(placement), timeout)
    modes = json.loads(cmd.run(_U1, "stage", root=False) or "{}")
    cmd.run(_R1, "place", root=True)
    moved = json.loads(cmd.run(_U2, "place", root=False) or "[]")
    cmd.run(_R2, "place", root=True, stdin=_hidden_tar({**placement.conftests, **files}))
    return PlacedHidden(placement, modes, moved)


def _hidden_tar(files: dict[str, bytes]) -> bytes:
    """The hidden files as a tar of regular files, paths relative to the repo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in sorted(files.items()):
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o444, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def unplace_hidden_tests(sb: Sandbox, placed: PlacedHidden, timeout: float = 60) -> None:
    """Undo :func:`place_hidden_tests` (four commands again): the hidden files and root's
    conftests go, the directories are the user's again with their modes, what was moved
    aside comes back, directories made only for the hidden files go; later steps (a
    public run of the baseline, the benchmark) see the patched repository as before. Call
    it only after every process of the hidden run is gone (the runner's supervisor kills
    what the tests left). Raises InfraError when a command fails."""
    cmd = _Commands(sb, {**_placement_args(placed.placement), "modes": placed.modes,
                         "moved": placed.moved}, timeout)
    cmd.run(_R3, "remove", root=True)
    cmd.run(_U3, "remove", root=False)
    cmd.run(_R4, "remove", root=True)
    cmd.run(_U4, "remove", root=False)


def place_bench_dir(sb: Sandbox, task: Task) -> str | None:
    """Copy the task's benchmark folder (if any), root-owned and read-only, to a fresh
    unpredictable directory; returns it, or None when the task has none."""
    if task.bench_dir is None:
        return None
    root = f"/proctor/b-{secrets.token_hex(8)}"
    sb.put_tree(root, task.bench_dir, read_only=True)
    return root


@contextmanager
def repo_moved(sb: Sandbox, where: str, timeout: float = 30) -> Iterator[None]:
    """The repository at ``where`` instead of :data:`~proctor.sandbox.layout.REPO` while the
    body runs (the ``path`` variant of a differential run): its directory renamed by root,
    nothing copied, nothing left at the usual path, and renamed back after, also when the
    body raises. What the code under test put at the usual path meanwhile (``/work`` is
    the sandbox user's to write) is moved aside, its processes killed first: it cannot
    keep the repository from coming back. ``where == REPO``: nothing moves.

    Raises:
        InfraError: a rename failed (the sandbox is then no longer usable).
    """
    if where == REPO:
        yield
        return
    _rename_repo(sb, REPO, where, timeout)
    try:
        yield
    finally:
        sb.kill_user_processes()
        _rename_repo(sb, where, REPO, timeout)


def _rename_repo(sb: Sandbox, src: str, dst: str, timeout: float) -> None:
    # Whatever is at ``dst`` goes aside first (a rename: root may not remove the sandbox
    # user's files, but owns /work).
    script = ('if [ -e "$2" ] || [ -L "$2" ]; then aside=$(mktemp -d /work/.aside-XXXXXXXX) '
              '&& mv -T -- "$2" "$aside" || exit 1; fi; mv -T -- "$1" "$2"')
    res = sb.run(["sh", "-c", script, "sh", src, dst], timeout=timeout, user="0:0", cwd="/")
    if not res.ok:
        raise InfraError(f"could not rename the repository {src} to {dst} "
                         f"(exit {res.exit_code}): {res.output[-300:]}")


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
