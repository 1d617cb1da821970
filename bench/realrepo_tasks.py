"""Proctor tasks built from real PyPI sdists, with one real function broken.

    from bench.realrepo_tasks import TASKS, build_task, patches
    task_dir = build_task("more-itertools", Path("/tmp/t"))   # writes /tmp/t/{task.toml,...}
    p = patches("more-itertools", task_dir)                   # name -> patch bytes

Each task is the sdist's tree (pinned version, sha256-checked) with one function's body
replaced by a plausible wrong implementation; ``hidden/`` holds the upstream test file(s)
that exercise it, at their upstream paths; ``tests.public`` lists the other test files;
``reference.patch`` restores the upstream code. Shapes covered:

* ``isodate``: src layout (``src/isodate``), needs the task field ``pythonpath``;
* ``more-itertools``: unittest ``TestCase`` classes, 600+ tests;
* ``inflect``: the whole library in the package's ``__init__.py``;
* ``pyflakes``: tests import a helper module at its upstream path
  (``from pyflakes.test.harness import TestCase``) and each other
  (``pyflakes/test/test_doctests.py`` imports ``pyflakes.test.test_other``).

Candidate patches (:func:`patches`): ``reference``; ``partial`` (fixes one of the two parts
of the bug: some hidden tests still fail); ``reformat`` (the reference fix plus about 60
lines elsewhere in the same package with their string quotes swapped, checked to leave
every module's ``ast.dump`` unchanged); ``empty``.

Sdists are downloaded with ``pip download --no-deps --no-binary :all:`` into
``$PROCTOR_CACHE_DIR/sdists`` (default ``bench/.cache/sdists``). Standard library only.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class RealTask:
    """One task: where the sdist comes from and what is broken in it.

    ``original`` / ``buggy`` / ``partial``: the text of the function upstream, in the task's
    repo, and after the partial fix (each found exactly once in ``file``). ``hidden``: test
    files moved from repo/ to hidden/ (repo-relative). ``public``: the public test paths.
    ``reformat_files``: the source files whose string quotes ``reformat`` swaps, in order,
    until :data:`REFORMAT_LINES` lines changed (lines inside ``original`` are never touched).
    """

    name: str
    task_id: str
    version: str
    sha256: str
    shape: str
    sources: list[str]
    file: str
    function: str
    original: str
    buggy: str
    partial: str
    hidden: list[str]
    public: list[str]
    reformat_files: list[str]
    description: str
    pythonpath: list[str] = field(default_factory=list)
    dist: str = ""  # the requirement's project name when it differs from ``name``

    @property
    def requirement(self) -> str:
        return f"{self.dist or self.name}=={self.version}"


REFORMAT_LINES = 60

ISODATE_ORIGINAL = '''\
    seconds = tdelta.days * 24 * 60 * 60 + tdelta.seconds
    sign = ((seconds < 0) and "-") or "+"
    seconds = abs(seconds)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours > 99:
        raise OverflowError("can not handle differences > 99 hours")
    if format == "%Z":
        return "%s%02d:%02d" % (sign, hours, minutes)
    elif format == "%z":
        return "%s%02d%02d" % (sign, hours, minutes)
    elif format == "%h":
        return "%s%02d" % (sign, hours)
'''
# Two independent mistakes: the offset ignores timedelta.days, so a negative offset such
# as -05:00 (timedelta(days=-1, seconds=68400)) is rendered +19:00, and "%h" renders the
# minutes too (copied from "%z").
ISODATE_BUGGY = '''\
    seconds = tdelta.seconds
    sign = ((seconds < 0) and "-") or "+"
    seconds = abs(seconds)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours > 99:
        raise OverflowError("can not handle differences > 99 hours")
    if format == "%Z":
        return "%s%02d:%02d" % (sign, hours, minutes)
    elif format == "%z":
        return "%s%02d%02d" % (sign, hours, minutes)
    elif format == "%h":
        return "%s%02d%02d" % (sign, hours, minutes)
'''
ISODATE_PARTIAL = ISODATE_ORIGINAL.replace(
    '        return "%s%02d" % (sign, hours)\n',
    '        return "%s%02d%02d" % (sign, hours, minutes)\n')

MI_ORIGINAL = '''\
    if obj is None:
        return iter(())

    if (base_type is not None) and isinstance(obj, base_type):
        return iter((obj,))

    try:
        return iter(obj)
    except TypeError:
        return iter((obj,))
'''
# None is treated as a scalar, and base_type is ignored (always str/bytes).
MI_BUGGY = '''\
    if isinstance(obj, (str, bytes)):
        return iter((obj,))

    try:
        return iter(obj)
    except TypeError:
        return iter((obj,))
'''
MI_PARTIAL = '''\
    if obj is None:
        return iter(())

    if isinstance(obj, (str, bytes)):
        return iter((obj,))

    try:
        return iter(obj)
    except TypeError:
        return iter((obj,))
'''

INFLECT_ORIGINAL = '''\
        if conj_spaced:
            if conj == "":
                conj = " "
            else:
                conj = f" {conj} "

        if len(words) == 2:
            return f"{words[0]}{conj}{words[1]}"

        if sep is None:
            if "," in "".join(words):
                sep = ";"
            else:
                sep = ","
'''
# Two independent mistakes: an empty conj gives two spaces ("apple  carrot"), and words
# containing commas are no longer separated by semicolons.
INFLECT_BUGGY = '''\
        if conj_spaced:
            conj = f" {conj} "

        if len(words) == 2:
            return f"{words[0]}{conj}{words[1]}"

        if sep is None:
            sep = ","
'''
INFLECT_PARTIAL = '''\
        if conj_spaced:
            conj = f" {conj} "

        if len(words) == 2:
            return f"{words[0]}{conj}{words[1]}"

        if sep is None:
            if "," in "".join(words):
                sep = ";"
            else:
                sep = ","
'''

PYFLAKES_ORIGINAL = '''\
def _is_singleton(node):  # type: (ast.AST) -> bool
    return (
        isinstance(node, ast.Constant) and
        isinstance(node.value, (bool, type(Ellipsis), type(None)))
    )


def _is_tuple_constant(node):  # type: (ast.AST) -> bool
    return (
        isinstance(node, ast.Tuple) and
        all(_is_constant(elt) for elt in node.elts)
    )
'''
# `x is True` / `x is ...` are reported as comparisons with a literal, and so is
# `x is (a, b)` with variables in the tuple.
PYFLAKES_BUGGY = '''\
def _is_singleton(node):  # type: (ast.AST) -> bool
    return (
        isinstance(node, ast.Constant) and
        node.value is None
    )


def _is_tuple_constant(node):  # type: (ast.AST) -> bool
    return isinstance(node, ast.Tuple)
'''
PYFLAKES_PARTIAL = '''\
def _is_singleton(node):  # type: (ast.AST) -> bool
    return (
        isinstance(node, ast.Constant) and
        isinstance(node.value, (bool, type(Ellipsis), type(None)))
    )


def _is_tuple_constant(node):  # type: (ast.AST) -> bool
    return isinstance(node, ast.Tuple)
'''

TASKS: dict[str, RealTask] = {t.name: t for t in [
    RealTask(
        name="isodate", task_id="isodate-tz-isoformat", version="0.7.2",
        sha256="4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        shape="src layout (src/isodate), pytest-style tests",
        sources=["src/isodate"], pythonpath=["src"],
        file="src/isodate/isotzinfo.py", function="isodate.isotzinfo.tz_isoformat",
        original=ISODATE_ORIGINAL, buggy=ISODATE_BUGGY, partial=ISODATE_PARTIAL,
        hidden=["tests/test_datetime.py", "tests/test_time.py"],
        public=["tests/test_date.py", "tests/test_duration.py", "tests/test_pickle.py",
                "tests/test_strf.py"],
        reformat_files=["src/isodate/isodates.py", "src/isodate/isostrf.py",
                        "src/isodate/isotime.py"],
        description="isodate.isotzinfo.tz_isoformat is wrong: a negative UTC offset such as "
                    "-05:00 is rendered '+19:00', and the '%h' format renders minutes "
                    "('+0100' instead of '+01'). Fix tz_isoformat.",
    ),
    RealTask(
        name="more-itertools", task_id="more-itertools-always-iterable", version="10.5.0",
        sha256="5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
        shape="unittest.TestCase classes, 660+ tests",
        sources=["more_itertools"],
        file="more_itertools/more.py", function="more_itertools.more.always_iterable",
        original=MI_ORIGINAL, buggy=MI_BUGGY, partial=MI_PARTIAL,
        hidden=["tests/test_more.py"], public=["tests/test_recipes.py"],
        reformat_files=["more_itertools/recipes.py", "more_itertools/more.py"],
        description="more_itertools.always_iterable is wrong: `always_iterable(None)` yields "
                    "None instead of nothing, and the base_type argument is ignored "
                    "(`always_iterable({'a': 1}, base_type=dict)` iterates the dict). "
                    "Fix always_iterable.",
    ),
    RealTask(
        name="inflect", task_id="inflect-join", version="5.6.2",
        sha256="aadc7ed73928f5e014129794bbac03058cca35d0a973a5fc4eb45c7fa26005f9",
        shape="the library in the package __init__.py",
        sources=["inflect"],
        file="inflect/__init__.py", function="inflect.engine.join",
        original=INFLECT_ORIGINAL, buggy=INFLECT_BUGGY, partial=INFLECT_PARTIAL,
        hidden=["tests/test_join.py", "tests/test_pwd.py"], public=[],  # filled in below
        reformat_files=["inflect/__init__.py"],
        description="inflect.engine().join is wrong: `join(['apple', 'carrot'], conj='')` "
                    "returns 'apple  carrot' (two spaces) instead of 'apple carrot', and "
                    "words containing commas are no longer separated by semicolons "
                    "(`join(['apple', '1,000', 'carrot'])` should be "
                    "'apple; 1,000; and carrot'). Fix engine.join.",
    ),
    RealTask(
        name="pyflakes", task_id="pyflakes-is-literal", version="3.2.0",
        sha256="1c61603ff154621fb2a9172037d84dca3500def8c8b630657d1701f026f8af3f",
        shape="tests import a helper module (pyflakes.test.harness) at its upstream path",
        sources=["pyflakes"],
        file="pyflakes/checker.py", function="pyflakes.checker._is_singleton/_is_tuple_constant",
        original=PYFLAKES_ORIGINAL, buggy=PYFLAKES_BUGGY, partial=PYFLAKES_PARTIAL,
        hidden=["pyflakes/test/test_is_literal.py"], public=[],  # filled in below
        reformat_files=["pyflakes/messages.py", "pyflakes/api.py",
                        "pyflakes/checker.py"],
        description="pyflakes reports `x is True`, `x is ...` and `x is (a, b)` as "
                    "comparisons with a literal (IsLiteral), which they are not. Fix the "
                    "literal detection in pyflakes/checker.py.",
    ),
]}

_INFLECT_TESTS = ["an", "classical_all", "classical_ancient", "classical_herd",
                  "classical_names", "classical_person", "classical_zero", "compounds",
                  "inflections", "numwords", "pl_si", "unicode"]
TASKS["inflect"].public.extend(f"tests/test_{n}.py" for n in _INFLECT_TESTS)
_PYFLAKES_TESTS = ["api", "builtin", "code_segment", "dict", "doctests", "imports", "match",
                   "other", "type_annotations", "undefined_names"]
TASKS["pyflakes"].public.extend(f"pyflakes/test/test_{n}.py" for n in _PYFLAKES_TESTS)


class DownloadError(RuntimeError):
    """The sdist could not be fetched from PyPI."""


def cache_dir() -> Path:
    """Where sdists are cached: ``$PROCTOR_CACHE_DIR/sdists`` or ``bench/.cache/sdists``."""
    base = os.environ.get("PROCTOR_CACHE_DIR")
    return (Path(base) if base else HERE / ".cache") / "sdists"


def fetch_sdist(t: RealTask, cache: Path | None = None) -> Path:
    """The sdist of ``t`` (downloaded once, then cached), its sha256 verified.

    Raises:
        DownloadError: pip could not download it.
        RuntimeError: the file's sha256 is not the pinned one (the file is deleted).
    """
    cache = cache or cache_dir()
    found = [p for p in cache.glob("*.tar.gz")
             if p.name.lower().replace("_", "-").startswith(f"{t.dist or t.name}-{t.version}.t")]
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
               "--retries", "2", "--timeout", "30", "--no-deps", "--no-binary", ":all:",
               t.requirement, "-d", str(cache)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        found = [p for p in cache.glob("*.tar.gz") if
                 p.name.lower().replace("_", "-").startswith(f"{t.dist or t.name}-{t.version}.t")]
        if proc.returncode != 0 or not found:
            raise DownloadError(f"pip download {t.requirement} failed:\n{proc.stderr[-2000:]}")
    path = found[0]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != t.sha256:
        path.unlink()
        raise RuntimeError(f"{path}: sha256 {digest} != expected {t.sha256} (deleted, rerun)")
    return path


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_bytes().decode("utf-8")
    if (n := text.count(old)) != 1:
        raise RuntimeError(f"{path}: expected the text to replace exactly once, found {n}")
    path.write_bytes(text.replace(old, new).encode("utf-8"))


def _git(cwd: Path, *args: str) -> bytes:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "LC_ALL": "C"}
    proc = subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=cwd, env=env,
                          check=False, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}:\n{proc.stderr.decode()}")
    return proc.stdout


def _diff(repo: Path, edit) -> bytes:
    """``git diff`` of a scratch copy of ``repo`` after ``edit(copy)`` changed it."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(repo, work)
        _git(work, "init", "-q")
        _git(work, "add", "-A")
        base = _git(work, "write-tree").decode().strip()
        edit(work)
        _git(work, "add", "-A")
        return _git(work, "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames",
                    "--diff-algorithm=myers", "--src-prefix=a/", "--dst-prefix=b/", base)


def swap_quotes(source: str, max_lines: int, skip: tuple[int, int] | None = None) -> str:
    """Swap the quote character of simple string literals on up to ``max_lines`` lines.

    Simple: single-quoted (not triple), no prefix other than ``r``/``b``/``u``, no quote of
    either kind and no backslash inside, on one line. ``skip``: a 1-based inclusive line
    range left alone. Returns the new source; raises RuntimeError when its ``ast.dump``
    differs from the input's (never expected: only the delimiters change).
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    changed: set[int] = set()
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for tok in tokens:
        if tok.type != tokenize.STRING or tok.start[0] != tok.end[0]:
            continue
        row = tok.start[0]
        if skip and skip[0] <= row <= skip[1]:
            continue
        s = tok.string
        prefix = s[: len(s) - len(s.lstrip("rRbBuU"))]
        body = s[len(prefix):]
        if len(body) < 2 or body[0] not in "'\"" or body[:3] in ("'''", '"""'):
            continue
        inner = body[1:-1]
        if "'" in inner or '"' in inner or "\\" in inner:
            continue
        if row not in changed and len(changed) >= max_lines:
            continue
        other = "'" if body[0] == '"' else '"'
        changed.add(row)
        edits.setdefault(row, []).append((tok.start[1], tok.end[1], prefix + other + inner + other))
    for row, spans in edits.items():
        line = lines[row - 1]
        for start, end, new in sorted(spans, reverse=True):
            line = line[:start] + new + line[end:]
        lines[row - 1] = line
    out = "".join(lines)
    if ast.dump(ast.parse(out)) != ast.dump(ast.parse(source)):
        raise RuntimeError("quote swap changed the AST")
    return out


def _fix(t: RealTask, work: Path, text: str) -> None:
    _replace_once(work / t.file, t.buggy, text)


def _reformat(t: RealTask, work: Path) -> None:
    _fix(t, work, t.original)
    left = REFORMAT_LINES
    for rel in t.reformat_files:
        path = work / rel
        source = path.read_text(encoding="utf-8")
        skip = None
        if rel == t.file:
            start = source[: source.index(t.original)].count("\n") + 1
            skip = (start, start + t.original.count("\n"))
        new = swap_quotes(source, left, skip)
        left -= sum(a != b for a, b in zip(source.splitlines(), new.splitlines(), strict=True))
        path.write_text(new, encoding="utf-8", newline="")
    if left:
        raise RuntimeError(f"{t.name}: {left} of {REFORMAT_LINES} lines left to reformat "
                           f"in {t.reformat_files}")


def task_toml(t: RealTask) -> str:
    """The task.toml text of ``t``."""
    lines = [f'id = "{t.task_id}"',
             f'description = """\n{t.description}\n"""',
             "sources = [" + ", ".join(f'"{s}"' for s in t.sources) + "]"]
    if t.pythonpath:
        lines.append("pythonpath = [" + ", ".join(f'"{p}"' for p in t.pythonpath) + "]")
    lines += ["", "[tests]", "public = ["] + [f'    "{p}",' for p in t.public] + [
        "]", 'hidden_dir = "hidden"', "known_broken = []", "",
        "[timeouts]", "per_test = 30", "per_suite = 300", "per_patch = 900", "",
        "[baseline]", "runs = 2", ""]
    return "\n".join(lines)


def build_task(name: str, dest: Path) -> Path:
    """Build task ``name`` (a key of :data:`TASKS`) into ``dest`` (emptied first) and return
    ``dest``: task.toml, repo/, hidden/, reference.patch.

    Raises:
        KeyError: unknown name. DownloadError / RuntimeError: see :func:`fetch_sdist`;
        RuntimeError also when an edit does not match the sdist's text.
    """
    t = TASKS[name]
    sdist = fetch_sdist(t)
    dest = Path(dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        shutil.copytree(top, dest / "repo", ignore=shutil.ignore_patterns(
            "*.egg-info", "__pycache__", ".pytest_cache", ".github"))
    repo = dest / "repo"
    _replace_once(repo / t.file, t.original, t.buggy)
    for rel in t.hidden:
        target = dest / "hidden" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(repo / rel, target)
    (dest / "task.toml").write_text(task_toml(t), encoding="utf-8", newline="\n")
    (dest / "reference.patch").write_bytes(_diff(repo, lambda w: _fix(t, w, t.original)))
    return dest


def patches(name: str, task: Path) -> dict[str, bytes]:
    """Candidate patches against the repo/ of ``task`` (a directory built by
    :func:`build_task` for ``name``): keys ``reference``, ``partial``, ``reformat``,
    ``empty``; values are ``git diff`` bytes (``empty`` is ``b""``)."""
    t = TASKS[name]
    repo = Path(task) / "repo"
    return {
        "reference": _diff(repo, lambda w: _fix(t, w, t.original)),
        "partial": _diff(repo, lambda w: _fix(t, w, t.partial)),
        "reformat": _diff(repo, lambda w: _reformat(t, w)),
        "empty": b"",
    }
