"""The repositories a dataset's rows name, read from this machine only (no network).

``--repos DIR`` holds, for a row whose ``repo`` is ``owner/name``, one of (first found):
``DIR/owner__name``, ``DIR/owner/name``, ``DIR/name`` (SWE-bench's and SWE-smith's
directory names), each a checkout (a directory with ``.git``), a bare repository, or the
same name with ``.git`` or ``.bundle`` (a ``git bundle`` file). A bundle is cloned once per
run into a scratch directory; a checkout or bare repository is only read: trees are
written out through a temporary index file, so its index, work tree and refs are never
touched.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path

from proctor.sandbox import host_dir

_GIT = ("git", "-c", "core.autocrlf=false", "-c", "core.quotepath=false",
        "-c", "advice.detachedHead=false")


#: How long the bundles' clones may live before a sweep may remove them with their
#: process still running (an import of a large dataset runs for hours).
_SCRATCH_TTL_S = 7 * 24 * 3600.0


class RepoNotFound(LookupError):
    """No repository for a row's ``repo`` under the repos directory (the message lists the
    places looked at)."""


def candidates(repos: Path, repo: str) -> list[Path]:
    """Where the history of ``repo`` (``owner/name``) may be under ``repos``, in order."""
    owner, name = repo.split("/", 1)
    stems = [repos / f"{owner}__{name}", repos / owner / name, repos / name]
    return [p for stem in stems for p in (stem, stem.with_name(stem.name + ".git"),
                                           stem.with_name(stem.name + ".bundle"))]


def _first_line(stderr: bytes) -> str:
    """git's message, one line (its first non-empty one, at most 300 characters)."""
    lines = [x.strip() for x in stderr.decode(errors="replace").splitlines() if x.strip()]
    return (lines[0] if lines else "(no message)")[:300]


def repo_name(path: Path) -> str:
    """``owner/name`` for a repository at ``path``: from its ``origin`` URL when it has one
    (``https://host/owner/name.git``, ``git@host:owner/name``), else ``local/<name>``."""
    path = Path(path)
    git_dir = path / ".git" if (path / ".git").exists() else path
    out = subprocess.run([*_GIT, f"--git-dir={git_dir}", "config", "--get",
                          "remote.origin.url"], capture_output=True, check=False)
    url = out.stdout.decode(errors="replace").strip().removesuffix("/").removesuffix(".git")
    parts = url.replace(":", "/").split("/")
    if out.returncode == 0 and len(parts) >= 2 and all(parts[-2:]):
        return f"{parts[-2]}/{parts[-1]}"
    stem = path.name.removesuffix(".bundle").removesuffix(".git") or "repo"
    return f"local/{stem}"


class GitRepo:
    """One repository's history: ``git_dir`` (a ``.git`` directory or a bare repository)."""

    def __init__(self, git_dir: Path, origin: Path):
        self.git_dir, self.origin = Path(git_dir).resolve(), Path(origin)

    def git(self, *args: str, env: dict | None = None, data: bytes | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        """``git --git-dir=... ARGS`` (captured, never raising on its exit status)."""
        return subprocess.run([*_GIT, f"--git-dir={self.git_dir}", *args], env=env,
                              input=data, cwd=cwd, capture_output=True, check=False)

    def commit(self, name: str) -> str | None:
        """The full object name of commit ``name`` (a hex prefix), or None if it is not here."""
        out = self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
        return out.stdout.decode().strip() or None if out.returncode == 0 else None

    def parent(self, commit: str) -> str | None:
        """The first parent of ``commit`` (None for a root commit)."""
        return self.commit(f"{commit}^")

    def export(self, commit: str, dest: Path) -> None:
        """Write the tree of ``commit`` into the empty or missing directory ``dest``, without
        ``.git`` (submodules are left as empty directories).

        Raises:
            RuntimeError: git failed (its message).
        """
        dest = Path(dest).resolve()
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="proctor-index-") as scratch:
            env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
            for name, args in (("read-tree", ("read-tree", commit)),
                               ("checkout-index", (f"--work-tree={dest}", "checkout-index",
                                                   "--all", "--force"))):
                out = self.git(*args, env=env, cwd=dest)
                if out.returncode != 0:
                    raise RuntimeError(f"git {name}: {_first_line(out.stderr)}")

    def diff(self, base: str, commit: str, paths: list[str] | None = None,
             exclude: list[str] | None = None) -> str:
        """``git diff`` from ``base`` to ``commit`` (binary as git binary patches, renames
        as a deletion and an addition), limited to ``paths`` and without ``exclude`` when
        given (literal repo paths)."""
        spec = [*(f":(literal){p}" for p in paths or []),
                *(f":(exclude,literal){p}" for p in exclude or [])]
        out = self.git("diff", "--no-color", "--no-ext-diff", "--no-renames", "--binary",
                       "--full-index", base, commit, "--", *spec)
        if out.returncode != 0:
            raise RuntimeError(f"git diff: {_first_line(out.stderr)}")
        return out.stdout.decode("utf-8", errors="surrogateescape")


class RepoCache:
    """The repositories of one run: found under ``repos`` (or, for a name of ``pinned``,
    at its path), bundles cloned into a scratch host directory (swept by ``proctor
    cleanup`` once this process is gone) removed by :meth:`close` (or on leaving a
    ``with`` block)."""

    def __init__(self, repos: Path | None = None, pinned: dict[str, Path] | None = None):
        self.repos = Path(repos).resolve() if repos is not None else None
        self.pinned = {k: Path(v).resolve() for k, v in (pinned or {}).items()}
        self._open: dict[str, GitRepo] = {}
        self._stack = ExitStack()
        self._scratch: Path | None = None

    def __enter__(self) -> RepoCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Remove the bundles' clones."""
        self._stack.close()
        self._scratch = None

    def get(self, repo: str) -> GitRepo:
        """The history of ``repo`` (``owner/name``).

        Raises:
            RepoNotFound: none of :func:`candidates` is a repository or a bundle.
            RuntimeError: a bundle that git cannot clone (its message).
        """
        if repo in self._open:
            return self._open[repo]
        if repo in self.pinned:
            found = self._open_path(self.pinned[repo])
            if found is None:
                raise RepoNotFound(f"{self.pinned[repo]} is not a git repository, a bare "
                                   "one or a .bundle file")
            self._open[repo] = found
            return found
        if self.repos is None:
            raise RepoNotFound(f"no repository for {repo}: no repositories directory given")
        for path in candidates(self.repos, repo):
            found = self._open_path(path)
            if found is not None:
                self._open[repo] = found
                return found
        looked = ", ".join(str(p.relative_to(self.repos))
                           for p in candidates(self.repos, repo)[::3])
        raise RepoNotFound(f"no repository for {repo} under {self.repos} (looked for "
                           f"{looked}, each also with .git or .bundle)")

    def _open_path(self, path: Path) -> GitRepo | None:
        if path.is_file() and path.suffix == ".bundle":
            if self._scratch is None:
                self._scratch = self._stack.enter_context(host_dir("repos", _SCRATCH_TTL_S))
            clone = self._scratch / f"{len(self._open)}-{path.stem}.git"
            out = subprocess.run([*_GIT, "clone", "--quiet", "--mirror", str(path), str(clone)],
                                 capture_output=True, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"git clone of the bundle {path}: {_first_line(out.stderr)}")
            return GitRepo(clone, path)
        if (path / ".git").exists():
            return GitRepo(path / ".git", path)
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            return GitRepo(path, path)
        return None
