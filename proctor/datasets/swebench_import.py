"""A SWE-bench row becomes a task directory (``proctor task import swebench``).

For a row (:class:`~proctor.datasets.swebench_rows.SWEBenchRow`) and its repository's
history (:mod:`proctor.datasets.git_repos`), ``TASKS_DIR/<instance_id>/`` gets:

* ``repo/``: the tree at ``base_commit``, without ``.git``;
* ``hidden/``: every file ``test_patch`` adds or changes, as it reads after the test patch,
  at its repo path (``hidden_at_upstream_path = true``: the hidden tests run where upstream
  has them, under their upstream ids, which the row's FAIL_TO_PASS names); a test file the
  test patch deletes cannot be a hidden test and is listed in ``import-notes.txt``;
* ``reference.patch``: the row's ``patch``;
* ``task.toml``: ``id`` = the instance id; ``sources`` = the top-level modules and packages
  the reference patch changes (all of the repository's when it changes no Python file);
  ``pythonpath = ["src"]`` when those are under ``src/``; ``[tests] public`` = the
  repository's other test modules (``public="others"``: pytest's ``test_*.py`` /
  ``*_test.py`` not touched by the test patch, or, when every one is, their versions
  before it; ``"all"``: every test module);
  ``requirements`` = the row's, or the project's own (``[project] dependencies`` and a
  ``test`` / ``tests`` / ``testing`` extra of ``pyproject.toml``); ``install`` when the row
  names an install command (or as the caller says: :func:`import_row`);
* ``swebench.json``: the row as read (its SWE-bench field names), for the agreement report
  and ``proctor export swebench``.

A row whose base commit is not in the repository, whose patch or test patch does not apply
to it, or that leaves no test to run, is a :class:`RowError` naming the cause; nothing of
it is left in ``TASKS_DIR``. The directory is written under a temporary name and renamed
when complete, so an interrupted import leaves no half task; a task whose
``swebench.json`` already holds the same row is kept as it is (the import resumes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import tomli_w
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from proctor.datasets.git_repos import GitRepo
from proctor.datasets.swebench_rows import RowError, SWEBenchRow
from proctor.patch import in_test_dir, is_test_module
from proctor.patch.testpaths import TEST_DIRS
from proctor.task import TASK_FILE, load_task

ROW_FILE = "swebench.json"
PUBLIC_CHOICES = ("others", "all")
INSTALL_CHOICES = ("auto", "yes", "no")
#: Directories never searched for test modules or packages.
_SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules",
                        "__pycache__", ".eggs"})
_TEST_EXTRAS = ("test", "tests", "testing")


@dataclass(frozen=True)
class Imported:
    """One row's outcome: ``task`` (its directory) and ``status``: ``imported`` or
    ``kept`` (already there from the same row)."""

    instance: str
    task: Path
    status: str


def import_row(row: SWEBenchRow, repo: GitRepo, tasks_dir: Path, *,
               public: str = "others", install: str = "auto") -> Imported:
    """Write the task of ``row`` under ``tasks_dir`` (module docstring). ``install``:
    ``yes`` / ``no`` set the task's ``install``; ``auto`` sets it when the row names an
    install command (SWE-rebench's ``install_config.install``).

    Raises:
        RowError: the row cannot become a task (the cause names what failed).
        ValueError: ``public`` or ``install`` is not one of its choices.
    """
    if public not in PUBLIC_CHOICES:
        raise ValueError(f"public must be one of {', '.join(PUBLIC_CHOICES)}, got {public!r}")
    if install not in INSTALL_CHOICES:
        raise ValueError(f"install must be one of {', '.join(INSTALL_CHOICES)}, "
                         f"got {install!r}")
    dest = tasks_dir / row.instance_id
    stated = row.model_dump(mode="json")
    if _same_row(dest, stated):
        return Imported(row.instance_id, dest, "kept")
    fail = _failing(row.instance_id)
    commit = repo.commit(row.base_commit)
    if commit is None:
        raise fail(f"base_commit {row.base_commit} is not in the repository {repo.origin}")
    tasks_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{row.instance_id}.", suffix=".partial",
                                 dir=tasks_dir))
    try:
        _build(row, repo, commit, work, public, _installs(row, install), fail)
        if dest.exists():
            shutil.rmtree(dest)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Imported(row.instance_id, dest, "imported")


def _failing(instance: str):
    return lambda cause: RowError(instance, cause)


def _same_row(dest: Path, stated: dict) -> bool:
    try:
        return (json.loads((dest / ROW_FILE).read_text(encoding="utf-8")) == stated
                and (dest / TASK_FILE).is_file())
    except (OSError, ValueError):
        return False


def _installs(row: SWEBenchRow, install: str) -> bool:
    if install != "auto":
        return install == "yes"
    config = row.extra.get("install_config")
    return isinstance(config, dict) and bool(str(config.get("install") or "").strip())


def _build(row: SWEBenchRow, repo: GitRepo, commit: str, work: Path, public: str,  # noqa: PLR0913
           install: bool, fail) -> None:
    tree = work / "repo"
    try:
        repo.export(commit, tree)
    except RuntimeError as exc:
        raise fail(f"cannot write the tree of {commit[:12]}: {exc}") from None
    fixed = _files(row.patch, "patch", fail)
    tests = _files(row.test_patch, "test_patch", fail) if row.test_patch.strip() else {}
    _check_applies(tree, row.patch, "patch", fail)
    hidden = work / "hidden"
    hidden.mkdir()
    deleted = [p for p, kind in tests.items() if kind == "deleted"]
    if tests:
        _check_applies(tree, row.test_patch, "test_patch", fail)
        _apply(tree, row.test_patch)
        for path, kind in tests.items():
            if kind != "deleted":
                (hidden / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / path, hidden / path)
        _apply(tree, row.test_patch, reverse=True)
    modules = _test_modules(tree)
    public_tests = [p for p in modules if public == "all" or p not in tests] or modules
    if not public_tests:
        raise fail("no public tests: the repository has no test module at base_commit")
    if not tests and not row.FAIL_TO_PASS:
        raise fail("no test_patch and no FAIL_TO_PASS: nothing tells a fix from no fix")
    sources, pythonpath = _sources(tree, [p for p, k in fixed.items() if k != "deleted"])
    if not sources:
        raise fail("no Python module or package to mutate or scan in the repository")
    config: dict = {
        "id": row.instance_id,
        "description": f"{row.repo}@{commit[:12]} (SWE-bench instance {row.instance_id})",
        "sources": sources,
        "hidden_at_upstream_path": True,
        "install": install,
        "tests": {"public": public_tests, "hidden_dir": "hidden"},
    }
    requirements = row.requirements or _project_requirements(tree)
    if requirements:
        config["requirements"] = requirements
    if pythonpath:
        config["pythonpath"] = pythonpath
    (work / TASK_FILE).write_text(tomli_w.dumps(config), encoding="utf-8")
    (work / "reference.patch").write_text(row.patch, encoding="utf-8",
                                          errors="surrogateescape", newline="")
    stated = row.model_dump(mode="json")
    (work / ROW_FILE).write_text(json.dumps(stated, indent=1, sort_keys=True), encoding="utf-8")
    if deleted:
        (work / "import-notes.txt").write_text(
            "test files the test_patch deletes (not expressible as hidden tests):\n"
            + "".join(f"{p}\n" for p in deleted), encoding="utf-8")
    try:
        load_task(work)
    except Exception as exc:  # noqa: BLE001 - any invalid config is this row's error
        raise fail(f"the task it makes is invalid: {exc}") from None


def _files(patch: str, field: str, fail) -> dict[str, str]:
    """Repo path -> ``added`` / ``modified`` / ``deleted`` for each file of a diff."""
    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as exc:
        raise fail(f"{field} is not a unified diff ({exc})") from None
    if not parsed:
        raise fail(f"{field} has no file diff")
    out = {}
    for f in parsed:
        kind = "added" if f.is_added_file else "deleted" if f.is_removed_file else "modified"
        path = f.path
        if PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
            raise fail(f"{field} names a path outside the repository: {path!r}")
        out[path] = kind
    return out


def _git_apply(tree: Path, patch: str, *flags: str) -> subprocess.CompletedProcess:
    """``git apply`` in ``tree`` as a plain patch tool: the ceiling keeps git from taking
    a repository around the tasks directory for the tree's."""
    return subprocess.run(["git", "-c", "core.autocrlf=false", "apply", "--whitespace=nowarn",
                           *flags, "-"], cwd=tree, capture_output=True, check=False,
                          input=patch.encode("utf-8", errors="surrogateescape"),
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)})


def _check_applies(tree: Path, patch: str, field: str, fail) -> None:
    out = _git_apply(tree, patch, "--check")
    if out.returncode != 0:
        first = (out.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
        raise fail(f"{field} does not apply to base_commit: {first}")


def _apply(tree: Path, patch: str, reverse: bool = False) -> None:
    out = _git_apply(tree, patch, *(["--reverse"] if reverse else []))
    if out.returncode != 0:  # checked just before: only a git fault gets here
        raise RuntimeError(f"git apply: {out.stderr.decode(errors='replace').strip()[:300]}")


def _walk(tree: Path):
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if any(part in _SKIP_DIRS for part in rel.parts):
            continue
        yield rel.as_posix(), path


def _test_modules(tree: Path) -> list[str]:
    return [rel for rel, path in _walk(tree)
            if path.is_file() and not path.is_symlink() and is_test_module(rel)]


def _sources(tree: Path, changed: list[str]) -> tuple[list[str], list[str]]:
    """The top-level modules / packages holding the changed Python files that are not
    tests (all of the repository's when there is none), and ``["src"]`` when they live
    under ``src/``."""
    tops: list[str] = []
    src = False
    for path in changed:
        parts = PurePosixPath(path).parts
        if not path.endswith(".py") or is_test_module(path) or in_test_dir(path):
            continue
        prefix = ""
        if parts[0] == "src" and len(parts) > 1:
            src, prefix, parts = True, "src/", parts[1:]
        where = prefix + parts[0]
        if (tree / where).exists() and where not in tops:
            tops.append(where)
    if not tops:
        for name in sorted(p.name for p in tree.iterdir()):
            if name.startswith(".") or name in _SKIP_DIRS or name.casefold() in TEST_DIRS:
                continue
            if ((tree / name / "__init__.py").is_file()
                    or (name.endswith(".py") and not is_test_module(name)
                        and name not in ("setup.py", "conftest.py"))):
                tops.append(name)
    return tops, (["src"] if src else [])


def _project_requirements(tree: Path) -> list[str]:
    """``[project] dependencies`` and a test extra of ``pyproject.toml`` (plain lines)."""
    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8")
                                ).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    lines = list(project.get("dependencies", []) or [])
    extras = project.get("optional-dependencies", {}) or {}
    for name in _TEST_EXTRAS:
        lines += list(extras.get(name, []) or [])
    return [x.split(";")[0].strip() for x in lines
            if isinstance(x, str) and "@" not in x and "/" not in x and x.strip()]
