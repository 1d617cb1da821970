"""Task directories: ``task.toml`` + ``repo/`` + ``hidden/`` + optional ``reference.patch``.

``hidden/`` mirrors the repository layout: ``hidden/pkg/tests/test_x.py`` is a hidden
test that upstream lives at ``pkg/tests/test_x.py``. Every such repo path is forbidden to
patches. The agent only ever sees ``repo/``.

Example ``task.toml``::

    id = "toolz-get"
    sources = ["toolz"]              # source paths inside repo/ (mutation, static analysis)
    forbidden = ["docs/secret/**"]   # extra forbidden patterns, added to the defaults

    [tests]
    public = ["toolz/tests/test_itertoolz.py"]   # files or dirs inside repo/
    hidden_dir = "hidden"                        # inside the task dir
    known_broken = []                            # test ids that fail for reasons no patch can fix

    [timeouts]    # seconds
    per_test = 30
    per_suite = 300
    per_patch = 900

    [weights]     # overrides of the defaults in proctor.rewards.weights
    hidden_tests = 0.35

    [baseline]
    runs = 3

    [mutation]    # mutation score on the changed source lines (proctor/suites/mutation.py)
    max_mutants = 30          # per patch; a seeded sample when there are more
    killers = ["trusted"]     # or ["trusted", "agent"]: the patch's own tests may kill too
    timeout_s = 120           # budget of the whole step, seconds
    seed = 0                  # seed of the sample
"""

from __future__ import annotations

import hashlib
import tomllib
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from proctor.errors import TaskConfigError
from proctor.rewards.weights import Weights

TASK_FILE = "task.toml"


def _repo_relative(value: str) -> str:
    p = PurePosixPath(value.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"must be a relative path inside repo/, got {value!r}")
    return str(p)


class TestsConfig(BaseModel):
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


class BaselineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: int = Field(3, ge=1, le=20)


class MutationConfig(BaseModel):
    """``[mutation]``: budget and killers of the mutation score (issue 3)."""

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


class TaskConfig(BaseModel):
    """The validated contents of ``task.toml``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    sources: list[str] = Field(min_length=1)
    forbidden: list[str] = []
    tests: TestsConfig
    timeouts: Timeouts = Timeouts()
    weights: Weights = Weights()
    baseline: BaselineConfig = BaselineConfig()
    mutation: MutationConfig = MutationConfig()

    @field_validator("sources")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        return [_repo_relative(x) for x in v]


class Task(BaseModel):
    """A loaded task: its config plus the paths of its parts on the host."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: TaskConfig
    root: Path

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def hidden(self) -> Path:
        return self.root / self.config.tests.hidden_dir

    @property
    def reference_patch(self) -> Path | None:
        p = self.root / "reference.patch"
        return p if p.is_file() else None

    @cached_property
    def hidden_files(self) -> list[str]:
        """Repo-relative paths of the hidden test files (their upstream location)."""
        return sorted(p.relative_to(self.hidden).as_posix() for p in _files(self.hidden))

    @cached_property
    def fingerprint(self) -> str:
        """sha256 (hex) over every file of the task: path, mode bit x, and content."""
        h = hashlib.sha256()
        for p in sorted(_files(self.root)):
            rel = p.relative_to(self.root).as_posix()
            h.update(rel.encode() + b"\0" + (b"x" if p.stat().st_mode & 0o100 else b"-"))
            h.update(hashlib.sha256(p.read_bytes()).digest())
        return h.hexdigest()


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def _field_name(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(top level)"


def load_task(path: str | Path) -> Task:
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
    for rel in config.tests.public:
        if not (task.repo / rel).exists():
            raise TaskConfigError(
                f"{toml_path}: field 'tests.public': {rel!r} does not exist in repo/"
            )
    return task
