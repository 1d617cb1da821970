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
  names an install command (or as the caller says: :class:`ImportOptions`);
* ``swebench.json``: the row as read (its SWE-bench field names), for the agreement report
  and ``proctor export swebench``.

A row whose base commit is not in the repository, whose patch or test patch does not apply
to it, or that leaves no test to run, is a :class:`RowError` naming the cause; nothing of
it is left in ``TASKS_DIR``. The directory is written under a temporary name and renamed
when complete, so an interrupted import leaves no half task; a task whose
``swebench.json`` already holds the same row, imported with the same options
(``import-options.json``), is kept as it is (the import resumes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

import tomli_w

from proctor.datasets.git_repos import GitRepo
from proctor.datasets.mine import is_test_file
from proctor.datasets.swebench_rows import RowError, SWEBenchRow
from proctor.patch import in_test_dir, is_test_module, without_prefixes
from proctor.patch.testpaths import TEST_DIRS
from proctor.sandbox.ownership import claim_dir, release_dir
from proctor.task import TASK_FILE, load_task

ROW_FILE = "swebench.json"
#: The options a task was imported with (a second import with others makes it again).
OPTIONS_FILE = "import-options.json"
PUBLIC_CHOICES = ("others", "all")
INSTALL_CHOICES = ("auto", "yes", "no")
#: Directories never searched for test modules or packages.
_SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules",
                        "__pycache__", ".eggs"})
_TEST_EXTRAS = ("test", "tests", "testing")


@dataclass(frozen=True)
class ImportOptions:
    """How rows become tasks. ``public``: ``others`` (the test modules the test patch does
    not touch) or ``all``; ``install``: ``yes`` / ``no`` set the task's ``install``,
    ``auto`` sets it when the row names an install command (SWE-rebench's
    ``install_config.install``); ``baseline_runs``: the tasks' ``[baseline] runs`` (None:
    the default, 3).

    Raises:
        ValueError: a value that is not one of its choices.
    """

    public: str = "others"
    install: str = "auto"
    baseline_runs: int | None = None

    def __post_init__(self) -> None:
        for name, value, choices in (("public", self.public, PUBLIC_CHOICES),
                                     ("install", self.install, INSTALL_CHOICES)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if self.baseline_runs is not None and not 1 <= self.baseline_runs <= 20:
            raise ValueError(f"baseline-runs must be 1 to 20, got {self.baseline_runs}")


@dataclass(frozen=True)
class Imported:
    """One row's outcome: ``task`` (its directory) and ``status``: ``imported`` or
    ``kept`` (already there from the same row)."""

    instance: str
    task: Path
    status: str


def import_row(row: SWEBenchRow, repo: GitRepo, tasks_dir: Path,
               options: ImportOptions = ImportOptions()) -> Imported:
    """Write the task of ``row`` under ``tasks_dir`` (module docstring, :class:`ImportOptions`).

    Raises:
        RowError: the row cannot become a task (the cause names what failed).
    """
    tasks_dir = Path(tasks_dir).resolve()
    dest = tasks_dir / row.instance_id
    stated = row.model_dump(mode="json")
    if _same_row(dest, stated, options):
        return Imported(row.instance_id, dest, "kept")
    fail = _failing(row.instance_id, dest)
    if dest.exists() and not dest.is_dir():
        raise fail(f"{dest} is a file, not a task directory")
    commit = repo.commit(row.base_commit)
    if commit is None:
        raise fail(f"base_commit {row.base_commit} is not in the repository {repo.origin}")
    tasks_dir.mkdir(parents=True, exist_ok=True)
    # Registered with the process's host dirs: SIGINT / SIGTERM remove it too.
    work = claim_dir(f".{row.instance_id}.partial-", tasks_dir)
    try:
        _build(row, repo, commit, work, options, lambda cause: fail(
            cause.replace(str(work), str(dest))))
        work.chmod(0o755)
        if dest.exists():
            shutil.rmtree(dest)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        release_dir(work)
    return Imported(row.instance_id, dest, "imported")


def _failing(instance: str, dest: Path):
    """The row's error, saying when an older task of the instance stays at ``dest``."""
    def fail(cause: str) -> RowError:
        if (dest / ROW_FILE).is_file():
            cause += f" (the task at {dest}, from another version of the row, is left as it was)"
        return RowError(instance, cause)
    return fail


def _same_row(dest: Path, stated: dict, options: ImportOptions) -> bool:
    """The task at ``dest`` was imported from this row with these options."""
    try:
        return (json.loads((dest / ROW_FILE).read_text(encoding="utf-8")) == stated
                and json.loads((dest / OPTIONS_FILE).read_text(encoding="utf-8"))
                == asdict(options) and (dest / TASK_FILE).is_file())
    except (OSError, ValueError):
        return False


def _installs(row: SWEBenchRow, install: str) -> bool:
    if install != "auto":
        return install == "yes"
    config = row.extra.get("install_config")
    return isinstance(config, dict) and bool(str(config.get("install") or "").strip())


def _build(row: SWEBenchRow, repo: GitRepo, commit: str, work: Path,
           options: ImportOptions, fail) -> None:
    tree = work / "repo"
    try:
        repo.export(commit, tree)
    except RuntimeError as exc:
        raise fail(f"cannot write the tree of {commit[:12]}: {exc}") from None
    if not row.test_patch.strip():
        raise fail("no test_patch: the tests that check the fix (the hidden tests) come from "
                   "it")
    fixed = _paths(tree, row.patch, "patch", fail)
    tests = _paths(tree, row.test_patch, "test_patch", fail)
    not_tests = [p for p in tests if not is_test_file(p)]
    if not_tests:
        raise fail(f"test_patch changes files that are not tests: {', '.join(not_tests[:3])} "
                   "(a hidden file replaces the agent's version in the hidden run)")
    deleted = _write_hidden(row, tree, work / "hidden", tests, fail)
    if not any((work / "hidden").rglob("*")):
        raise fail("test_patch only deletes files: no hidden test is left to run")
    modules = _test_modules(tree)
    public_tests = [p for p in modules if options.public == "all" or p not in tests] or modules
    if not public_tests:
        raise fail("no public tests: the repository has no test module at base_commit")
    sources, pythonpath = _sources(tree, fixed)
    if not sources:
        raise fail("no Python module or package to mutate or scan in the repository")
    config: dict = {
        "id": row.instance_id,
        "description": f"{row.repo}@{commit[:12]} (SWE-bench instance {row.instance_id})",
        "sources": sources,
        "hidden_at_upstream_path": True,
        "install": _installs(row, options.install),
        "tests": {"public": public_tests, "hidden_dir": "hidden"},
    }
    requirements = row.requirements or _project_requirements(tree)
    if requirements:
        config["requirements"] = requirements
    if pythonpath:
        config["pythonpath"] = pythonpath
    if options.baseline_runs is not None:
        config["baseline"] = {"runs": options.baseline_runs}
    _write(work, row, config, options, deleted)
    try:
        load_task(work)
    except Exception as exc:  # noqa: BLE001 - any invalid config is this row's error
        raise fail(f"the task it makes is invalid: {exc}") from None


def _write(work: Path, row: SWEBenchRow, config: dict, options: ImportOptions,
           deleted: list[str]) -> None:
    (work / TASK_FILE).write_text(tomli_w.dumps(config), encoding="utf-8")
    (work / "reference.patch").write_text(row.patch, encoding="utf-8",
                                          errors="surrogateescape", newline="")
    stated = row.model_dump(mode="json")
    (work / ROW_FILE).write_text(json.dumps(stated, indent=1, sort_keys=True), encoding="utf-8")
    (work / OPTIONS_FILE).write_text(json.dumps(asdict(options), sort_keys=True),
                                     encoding="utf-8")
    if deleted:
        (work / "import-notes.txt").write_text(
            "test files the test_patch deletes (not expressible as hidden tests):\n"
            + "".join(f"{p}\n" for p in deleted), encoding="utf-8")


def _write_hidden(row: SWEBenchRow, tree: Path, hidden: Path, tests: list[str],
                  fail) -> list[str]:
    """Copy the files the test patch adds or changes, as they read after it, into
    ``hidden`` (the tree is put back); the paths it deletes are returned."""
    hidden.mkdir()
    _apply(tree, row.test_patch)
    deleted = []
    try:
        for path in tests:
            source = tree / path
            if source.is_symlink():
                raise fail(f"test_patch makes {path} a symbolic link: a hidden test file "
                           "must be a regular file")
            if not source.exists():
                deleted.append(path)
                continue
            (hidden / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, hidden / path)
    finally:
        _apply(tree, row.test_patch, reverse=True)
    return deleted


def _git_apply(tree: Path, patch: str, *flags: str) -> subprocess.CompletedProcess:
    """``git apply`` in ``tree`` as a plain patch tool (``-p0`` for a patch whose headers
    have no ``a/`` / ``b/``): the ceiling keeps git from taking a repository around the
    tasks directory for the tree's."""
    data = patch.encode("utf-8", errors="surrogateescape")
    strip = ["-p0"] if without_prefixes(data) else []
    return subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "core.quotepath=false",
                           "apply", "--whitespace=nowarn", *strip, *flags, "-"], cwd=tree,
                          capture_output=True, check=False, input=data,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)})


def _paths(tree: Path, patch: str, field: str, fail) -> list[str]:
    """The repo paths a diff touches, as ``git apply`` reads them (C-quoted names decoded;
    both sides of a rename), once it is checked to apply to ``tree``."""
    out = _git_apply(tree, patch, "--check")
    if out.returncode != 0:
        raise fail(f"{field} does not apply to base_commit: {_first(out.stderr)}")
    listed = _git_apply(tree, patch, "--numstat", "-z")
    if listed.returncode != 0:
        raise fail(f"{field} cannot be read: {_first(listed.stderr)}")
    fields = listed.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    paths: list[str] = []
    i = 0
    while i < len(fields):
        parts = fields[i].split("\t")
        if len(parts) == 3 and parts[2]:
            paths.append(parts[2])
        elif len(parts) == 3 and i + 2 < len(fields):  # a rename: old and new follow
            paths += [fields[i + 1], fields[i + 2]]
            i += 2
        i += 1
    if not paths:
        raise fail(f"{field} has no file diff")
    return list(dict.fromkeys(paths))


def _first(stderr: bytes) -> str:
    lines = [x.strip() for x in stderr.decode(errors="replace").splitlines() if x.strip()]
    return lines[0] if lines else "?"


def _apply(tree: Path, patch: str, reverse: bool = False) -> None:
    out = _git_apply(tree, patch, *(["--reverse"] if reverse else []))
    if out.returncode != 0:  # checked just before: only a git fault gets here
        raise RuntimeError(f"git apply: {_first(out.stderr)}")


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
    if not tops:  # the fix changes no Python file: every top-level module and package
        for base, prefix in ((tree, ""), (tree / "src", "src/")):
            if not base.is_dir():
                continue
            for name in sorted(p.name for p in base.iterdir()):
                if name.startswith(".") or name in _SKIP_DIRS or name.casefold() in TEST_DIRS:
                    continue
                if ((base / name / "__init__.py").is_file()
                        or (name.endswith(".py") and not is_test_module(name)
                            and name not in ("setup.py", "conftest.py"))):
                    tops.append(prefix + name)
                    src = src or bool(prefix)
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
