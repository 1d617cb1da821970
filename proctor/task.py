"""Task directories: ``task.toml`` + ``repo/`` + ``hidden/`` + optional ``reference.patch``.

``hidden/`` mirrors the repository layout: ``hidden/pkg/tests/test_x.py`` is a hidden
test that upstream lives at ``pkg/tests/test_x.py``. Every such repo path with no file in
``repo/`` is forbidden to patches (:attr:`Task.hidden_only_files`); a hidden file at the path
of a visible one replaces it in the hidden run and leaves the visible file editable. The
agent only ever sees ``repo/``.

Example ``task.toml``::

    id = "toolz-get"
    sources = ["toolz"]              # source paths inside repo/ (mutation, static analysis)
    pythonpath = ["src"]             # repo dirs put on sys.path after the repo (src layout)
    hidden_at_upstream_path = false  # true: hidden tests run inside the repo at their paths
    requirements = ["six==1.16.0"]   # the tests' Python requirements (pip lines, no options)
    requirements_file = "requirements.txt"   # more of them, in the task dir (not repo/)
    install = true   # pip-install repo/ (offline) before the tests: see below
    forbidden = ["docs/secret/**"]   # extra forbidden patterns, added to the defaults

    [tests]
    public = ["toolz/tests/test_itertoolz.py"]   # files or dirs inside repo/
    hidden_dir = "hidden"                        # inside the task dir
    known_broken = []                            # test ids that fail for reasons no patch can fix

    [timeouts]    # seconds
    per_test = 30
    per_suite = 300
    per_patch = 900

    [limits]      # per sandbox; the defaults (docs/sandboxes.md) are safe
    memory_mib = 2048        # everything in the sandbox, swap off
    cpus = 1.0
    pids = 512
    disk_mib = 1024          # the writable work area /work (holds the repo)
    tmp_mib = 512            # /tmp
    file_size_mib = 256      # largest single file
    output_kib = 256         # output kept per command
    cpu_seconds = 0          # per process; 0 = none
    required = []            # limits a backend must enforce to run this task ("memory", ...)

    [weights]     # overrides of the defaults in proctor.rewards.weights
    hidden_tests = 0.35

    [baseline]
    runs = 3

    [benchmark]   # optional: the `performance` component (see proctor.suites.benchmark)
    command = ["{python}", "{bench}/bench_getter.py"]   # argv; {python} {repo} {bench}
    dir = "bench"          # task-dir folder copied in read-only at a random path ({bench})
    metric = "wall_s"      # wall_s | max_rss_mib (harness-measured) | a NAME printed NAME=VALUE
    target = 0.5           # lower is better; must be > 0
    tolerance = 1.0        # score falls linearly to 0 at target * (1 + tolerance)
    weight = 0.10          # the other weights are scaled to sum to 1 - weight
    timeout_s = 60
    repeat = 3             # the median is scored
    [mutation]    # mutation score on the changed source lines (proctor/suites/mutation.py)
    max_mutants = 30          # per patch; a seeded sample when there are more
    killers = ["trusted"]     # or ["trusted", "agent"]: the patch's own tests may kill too
    timeout_s = 120           # budget of the whole step, seconds
    seed = 0                  # seed of the sample
    [judge]       # an optional judge may only veto (proctor/harness/judge.py)
    veto_cap = 0.0            # a vetoed record's reward is at most this

``install`` (default false): for a project whose tests need it installed (an
``importlib.metadata`` version lookup, an entry point). Every sandbox that runs tests (the
baseline's and each patch's two) first runs ``pip install --no-index --no-deps
--no-build-isolation --target /work/.proctor-site`` of a copy of ``repo/`` as the sandbox
user, after the patch is applied and before the pristine public tests are put back
(:mod:`proctor.harness.pipeline.install`); the runners put that directory on ``sys.path`` after the
repo and ``pythonpath``. The build backend of ``repo/pyproject.toml`` ``[build-system]``
(setuptools when there is none) and what it needs must be in the image or ``requirements``:
the image's setuptools 66.1.1 needs ``wheel`` there. A base repo or reference patch that
does not build is a TaskConfigError; a patch that breaks the build fails its suites (reason
and note ``install_failed``, pip's output in evidence ``install``); a patch whose build code
writes into the repo is an integrity violation.
"""

from __future__ import annotations

import hashlib
import tomllib
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
)

from proctor.errors import TaskConfigError
from proctor.rewards import Weights
from proctor.sandbox import SITE_DIR, Limits

TASK_FILE = "task.toml"


def _requirement(line: str) -> str:
    """One pip requirement (``name``, ``name==1.0``, ``name[extra]>=2``): no options, no
    paths or URLs, so it can only name a package from the wheelhouse."""
    line = line.strip()
    if not line or line.startswith("-") or "/" in line or "\\" in line or "@" in line:
        raise ValueError(f"not a plain requirement (no options, paths or URLs): {line!r}")
    return line


def _repo_relative(value: str) -> str:
    p = PurePosixPath(value.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"must be a relative path inside repo/, got {value!r}")
    return str(p)


class TestsConfig(BaseModel):
    """``[tests]``: ``public``, the visible tests (files or directories, relative to
    ``repo/``, at least one); ``hidden_dir``, the task-dir folder of the hidden tests (laid
    out at their repo paths); ``known_broken``, test ids that fail for reasons no patch can
    fix, quarantined by the baseline instead of becoming FAIL_TO_PASS. A public path that
    is absolute, empty or leaves the repo (``..``) fails validation."""

    model_config = ConfigDict(extra="forbid")

    public: list[str] = Field(min_length=1)
    hidden_dir: str = "hidden"
    known_broken: list[str] = []

    @field_validator("public")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        return [_repo_relative(x) for x in v]


class Timeouts(BaseModel):
    """Timeouts in seconds."""

    model_config = ConfigDict(extra="forbid")

    per_test: float = Field(30.0, gt=0)
    per_suite: float = Field(300.0, gt=0)
    per_patch: float = Field(900.0, gt=0)


LIMIT_NAMES = ("memory", "pids", "disk", "file_size")


class LimitsConfig(BaseModel):
    """Sandbox limits of the task (units in the field names). See :class:`Limits`."""

    model_config = ConfigDict(extra="forbid")

    memory_mib: int = Field(2048, ge=64)
    cpus: float = Field(1.0, gt=0, le=64)
    pids: int = Field(512, ge=16)
    disk_mib: int = Field(1024, ge=16)
    tmp_mib: int = Field(512, ge=16)
    file_size_mib: int = Field(256, ge=1)
    output_kib: int = Field(256, ge=1)
    cpu_seconds: int = Field(0, ge=0)
    required: list[str] = []

    @field_validator("required")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if x not in LIMIT_NAMES]
        if bad:
            raise ValueError(f"unknown limit {bad[0]!r}; known: {', '.join(LIMIT_NAMES)}")
        return v

    def to_limits(self) -> Limits:
        """The :class:`~proctor.sandbox.base.Limits` (bytes) these settings describe."""
        mib = 1024**2
        return Limits(memory_bytes=self.memory_mib * mib, cpus=self.cpus, pids=self.pids,
                      output_cap=self.output_kib * 1024, disk_bytes=self.disk_mib * mib,
                      tmp_bytes=self.tmp_mib * mib, file_size_bytes=self.file_size_mib * mib,
                      cpu_seconds=self.cpu_seconds)


class BaselineConfig(BaseModel):
    """``[baseline]``: ``runs`` (1..20) of every suite on the base repo, and as many with
    the reference patch, to tell flaky tests (quarantined) from stable ones. More runs
    catch more flakiness and cost each task's preparation as many suite runs; the number
    is part of the baseline's cache key."""

    model_config = ConfigDict(extra="forbid")

    runs: int = Field(3, ge=1, le=20)


class BenchmarkConfig(BaseModel):
    """A task's benchmark: the ``performance`` component (design.md section 3)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1)
    dir: str | None = None
    metric: str = Field("wall_s", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    target: float
    tolerance: float = Field(1.0, ge=0)
    weight: float = Field(0.10, ge=0, le=1)
    timeout_s: float = Field(60.0, gt=0)
    repeat: int = Field(1, ge=1, le=20)

    @field_validator("target")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:  # also rejects NaN
            raise ValueError(f"target must be > 0 (a non-positive target is a configuration "
                             f"error), got {v}")
        return v


class MutationConfig(BaseModel):
    """``[mutation]``: budget and killers of the mutation score."""

    model_config = ConfigDict(extra="forbid")

    max_mutants: int = Field(30, ge=1, le=10_000)
    killers: list[Literal["trusted", "agent"]] = ["trusted"]
    timeout_s: float = Field(120.0, gt=0)
    seed: int = 0

    @field_validator("killers")
    @classmethod
    def _trusted_first(cls, v: list[str]) -> list[str]:
        if "trusted" not in v:
            raise ValueError('must include "trusted" (the pristine public and hidden tests)')
        return v


class JudgeConfig(BaseModel):
    """``[judge]``: what a judge's veto does to the reward (:mod:`proctor.harness.judge`)."""

    model_config = ConfigDict(extra="forbid")

    veto_cap: float = Field(0.0, ge=-1.0, le=1.0)  # the reward of a vetoed record, at most


class TaskConfig(BaseModel):
    """The validated contents of ``task.toml``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    install: StrictBool = False  # pip-install repo/ before the tests (module docstring)
    sources: list[str] = Field(min_length=1)
    forbidden: list[str] = []
    tests: TestsConfig
    timeouts: Timeouts = Timeouts()
    weights: Weights = Weights()
    baseline: BaselineConfig = BaselineConfig()
    benchmark: BenchmarkConfig | None = None
    limits: LimitsConfig = LimitsConfig()
    mutation: MutationConfig = MutationConfig()
    judge: JudgeConfig = JudgeConfig()
    requirements: list[str] = []
    requirements_file: str | None = None
    #: Repo-relative directories put on ``sys.path`` after the repository root, in this
    #: order, for every suite, the baseline and mutation (pytest's ``pythonpath`` ini
    #: option; a src layout needs ``["src"]``). Checked by :func:`load_task`.
    pythonpath: list[str] = []
    #: True: the hidden tests run where upstream has them, placed into the patched
    #: repository at their paths (``hidden/tests/test_x.py`` at ``tests/test_x.py``) with
    #: the repository as the rootdir, so they import their own package (``from . import
    #: helper``), the visible test directory's helper modules (``from common import x``)
    #: and are governed by the visible ``conftest.py`` files
    #: (:func:`proctor.harness.pipeline.workspace.plan_hidden_upstream`). Needs a backend that can
    #: make files root-owned: the Docker sandbox (the ``local`` one refuses the task with a
    #: TaskConfigError). False: they run from a fresh directory under ``/proctor`` of
    #: their own, as their own rootdir.
    hidden_at_upstream_path: bool = False

    def effective_weights(self) -> Weights:
        """The weights the reward uses. With a benchmark, ``performance`` gets its weight
        and the other weights are scaled to sum to ``1 - weight`` (so a perfect patch still
        scores 1.0 minus the diff cost); without one, :attr:`weights` as given."""
        if self.benchmark is None:
            return self.weights
        w = self.weights.as_dict()
        others = {k: v for k, v in w.items() if k != "performance"}
        scale = (1.0 - self.benchmark.weight) / (sum(others.values()) or 1.0)
        return Weights(**{k: v * scale for k, v in others.items()},
                       performance=self.benchmark.weight, message=self.weights.message)

    @field_validator("requirements")
    @classmethod
    def _plain_requirements(cls, v: list[str]) -> list[str]:
        return [_requirement(x) for x in v]

    @field_validator("sources")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        return [_repo_relative(x) for x in v]

    @field_validator("pythonpath")
    @classmethod
    def _path_dirs(cls, v: list[str]) -> list[str]:
        out = []
        for x in v:
            if ":" in x:
                raise ValueError(f"a sys.path entry cannot hold ':', got {x!r}")
            if not PurePosixPath(x.replace("\\", "/")).parts:  # the repo: already there
                continue
            rel = _repo_relative(x)
            if rel not in out:
                out.append(rel)
        return out


class Task(BaseModel):
    """A loaded task: its config plus the paths of its parts on the host."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: TaskConfig
    root: Path

    @property
    def id(self) -> str:
        """The task's ``id`` from ``task.toml``."""
        return self.config.id

    @property
    def repo(self) -> Path:
        """The host path of ``repo/``, the repository the agent sees."""
        return self.root / "repo"

    @property
    def hidden(self) -> Path:
        """The host path of the hidden tests' folder (``tests.hidden_dir``); its layout
        mirrors the repo's."""
        return self.root / self.config.tests.hidden_dir

    @property
    def reference_patch(self) -> Path | None:
        """The host path of ``reference.patch``, or None when the task has none (the
        baseline then classifies the tests without a reference run)."""
        p = self.root / "reference.patch"
        return p if p.is_file() else None

    @property
    def bench_dir(self) -> Path | None:
        """The benchmark's folder on the host, or None."""
        b = self.config.benchmark
        return self.root / b.dir if b is not None and b.dir is not None else None

    def pythonpath_in(self, repo: str) -> list[str]:
        """What the runners put on ``sys.path`` after ``repo`` (the repository's path in the
        sandbox): the ``pythonpath`` entries as absolute paths under ``repo``, in order,
        then, with ``install = true``, the install's site directory
        (:data:`proctor.sandbox.layout.SITE_DIR`)."""
        return [f"{repo}/{d}" for d in self.config.pythonpath] + (
            [SITE_DIR] if self.config.install else [])

    @cached_property
    def hidden_files(self) -> list[str]:
        """Repo-relative paths of the hidden test files (their upstream location)."""
        return sorted(p.relative_to(self.hidden).as_posix() for p in _files(self.hidden))

    @cached_property
    def hidden_only_files(self) -> list[str]:
        """The :attr:`hidden_files` with no file at the same path in ``repo/``: the paths a
        patch may not touch (forbidden as "hidden test file"). A hidden file at the path of
        a visible one replaces it in the hidden run; the visible file stays editable."""
        return [h for h in self.hidden_files if not (self.repo / h).is_file()]

    @cached_property
    def requirements(self) -> list[str]:
        """The tests' Python requirements: ``requirements`` plus the lines of
        ``requirements_file`` (comments and blank lines dropped), sorted, without duplicates.

        Raises:
            TaskConfigError: the file is missing or a line is not a plain requirement.
        """
        lines = list(self.config.requirements)
        if self.config.requirements_file:
            path = self.root / self.config.requirements_file
            if not path.is_file() or self.repo in path.resolve().parents:
                raise TaskConfigError(f"{self.root / TASK_FILE}: field 'requirements_file': "
                                      f"{path} not found (it lives in the task dir, not repo/)")
            for raw in path.read_text(encoding="utf-8").splitlines():
                raw = raw.split("#", 1)[0].strip()
                if raw:
                    try:
                        lines.append(_requirement(raw))
                    except ValueError as exc:
                        raise TaskConfigError(f"{path}: {exc}") from None
        return sorted(set(lines))

    def _input_files(self) -> set[Path]:
        """The files :attr:`fingerprint` covers."""
        req = self.config.requirements_file
        parts = [self.root / TASK_FILE, self.repo, self.hidden, self.reference_patch,
                 self.bench_dir, self.root / req if req else None]
        return {p for part in parts for p in _files_under(part)}

    @cached_property
    def fingerprint(self) -> str:
        """sha256 (hex) over the files a measurement of the task reads: ``task.toml``,
        ``repo/``, the hidden dir, ``reference.patch``, the requirements file and the
        benchmark dir (path, mode bit x, content). Other files of the task dir (notes, an
        import's ``swebench.json`` and ``agreement.json``) are not part of it, so writing
        them keeps the cached baseline."""
        h = hashlib.sha256()
        for p in sorted(self._input_files()):
            rel = p.relative_to(self.root).as_posix()
            h.update(rel.encode() + b"\0" + (b"x" if p.stat().st_mode & 0o100 else b"-"))
            h.update(hashlib.sha256(p.read_bytes()).digest())
        return h.hexdigest()


def _files_under(path: Path | None) -> list[Path]:
    if path is None or not path.exists():
        return []
    return [path] if path.is_file() else _files(path)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def _field_name(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(top level)"


def _check_installable(task: Task, toml_path: Path) -> None:
    """``install = true`` needs something pip can build: ``repo/pyproject.toml`` (valid
    TOML, a table ``[build-system]`` if any) or ``repo/setup.py``.

    Raises:
        TaskConfigError: neither exists, or the pyproject cannot say how to build.
    """
    pyproject = task.repo / "pyproject.toml"
    if not pyproject.is_file():
        if not (task.repo / "setup.py").is_file():
            raise TaskConfigError(f"{toml_path}: field 'install': repo/ has neither "
                                  f"pyproject.toml nor setup.py, so pip cannot install it")
        return
    try:
        doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskConfigError(f"{toml_path}: field 'install': {pyproject} is not valid "
                              f"TOML: {exc}") from None
    build = doc.get("build-system", {})
    if not isinstance(build, dict) or not isinstance(build.get("requires", []), list) \
            or not isinstance(build.get("build-backend", ""), str):
        raise TaskConfigError(f"{toml_path}: field 'install': {pyproject} [build-system] "
                              f"must be a table with a list 'requires' and a string "
                              f"'build-backend'")


def load_task(path: str | Path) -> Task:  # noqa: C901
    """Load and validate a task directory.

    Raises:
        TaskConfigError: the directory, ``task.toml``, ``repo/``, ``hidden/`` or a public
            test path is missing, or a field is missing or invalid. The message names the
            file and the field.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskConfigError(f"task directory not found: {path}")
    toml_path = root / TASK_FILE
    if not toml_path.is_file():
        raise TaskConfigError(f"{toml_path}: missing (a task needs task.toml, repo/, hidden/)")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskConfigError(f"{toml_path}: not valid TOML: {exc}") from None
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TaskConfigError(
            f"{toml_path}: field '{_field_name(first['loc'])}': {first['msg']}{more}"
        ) from None
    task = Task(config=config, root=root)
    if not task.repo.is_dir():
        raise TaskConfigError(f"{root}: missing repo/ directory")
    if not task.hidden.is_dir():
        raise TaskConfigError(
            f"{toml_path}: field 'tests.hidden_dir': directory {task.hidden} not found"
        )
    if not task.hidden_files:
        raise TaskConfigError(f"{toml_path}: field 'tests.hidden_dir': {task.hidden} is empty")
    for rel in config.sources:
        if not (task.repo / rel).exists():
            raise TaskConfigError(
                f"{toml_path}: field 'sources': {rel!r} matches no file in repo/"
            )
    bench = config.benchmark
    if bench is not None and bench.dir is not None and not (root / bench.dir).is_dir():
        raise TaskConfigError(
            f"{toml_path}: field 'benchmark.dir': directory {root / bench.dir} not found"
        )
    _check_pythonpath(task, toml_path)
    task.requirements  # noqa: B018 - validates requirements_file now, not mid-run
    if config.install:
        _check_installable(task, toml_path)
    for rel in config.tests.public:
        if not (task.repo / rel).exists():
            raise TaskConfigError(
                f"{toml_path}: field 'tests.public': {rel!r} does not exist in repo/"
            )
    return task


def _check_pythonpath(task: Task, toml_path: Path) -> None:
    """Each ``pythonpath`` entry must be a directory inside ``repo/`` (after symlinks).

    Raises:
        TaskConfigError: naming the entry, when it is missing, not a directory, or resolves
            outside ``repo/``.
    """
    repo = task.repo.resolve()
    for rel in task.config.pythonpath:
        where = task.repo / rel
        if not where.exists():
            raise TaskConfigError(f"{toml_path}: field 'pythonpath': {rel!r} does not exist "
                                  f"in repo/")
        real = where.resolve()
        if real != repo and repo not in real.parents:
            raise TaskConfigError(f"{toml_path}: field 'pythonpath': {rel!r} resolves to "
                                  f"{real}, outside repo/")
        if not real.is_dir():
            raise TaskConfigError(f"{toml_path}: field 'pythonpath': {rel!r} is not a "
                                  f"directory")
