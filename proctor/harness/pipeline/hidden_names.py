"""Hidden helper modules under names the patch cannot predict (design.md section 5).

The hidden tests run with ``--import-mode=prepend``: pytest puts each test module's base
directory (the first directory upward without ``__init__.py``) at the front of ``sys.path``
and the tests import their helper modules (``helpers.py``, a ``support/`` package) by plain
name. A name already in ``sys.modules`` wins over ``sys.path``, so a patch adding a
top-level ``helpers`` module to the repo and importing it early (from library code a hidden
``conftest.py`` imports) stood in for the hidden helper and made its assertions no-ops.

:func:`rename_hidden_tree` gives every helper a fresh random name (``helpers`` ->
``helpers_p3f9a1c2e5d7``) and rewrites the import statements of every hidden ``.py`` file
that refer to it; a name the patch cannot know cannot be shadowed. Pure functions over
``{relative path: bytes}``: no I/O, no randomness (the caller passes the suffix).

What is a helper: a ``.py`` file directly in an *import root* (a directory pytest puts on
``sys.path``: the base directory of a test module or ``conftest.py``), importable by a plain
name, that is neither a test module (``test_*.py``, ``*_test.py``: the harness ini's
``python_files``) nor ``conftest.py``; or a directory directly in an import root (a
package, or a namespace package without ``__init__.py``) whose subtree holds ``.py`` files
but no test module and no ``conftest.py``. Test modules, conftests and
packages holding tests keep their names, so test ids do not change; submodules of such
packages are reached through a package name the patch cannot take over without breaking the
test modules' own import.

Not rewritten: module names inside strings (``importlib.import_module("helpers")``,
``pytest_plugins = ["helpers"]``, ``mock.patch("helpers.f")``). A hidden test using those
fails with the reference patch too, so the baseline quarantines it (no credit either way).
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from proctor.patch import ast_parse, is_test_module

#: The harness ini's ``python_files`` (proctor/suites/incontainer/pytest.ini).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
#: What may stand between ``from`` and the module name: blanks and backslash continuations.
_GAP = re.compile(r"(?:[ \t\f]|\\(?:\r\n|\r|\n))*")


@dataclass(frozen=True)
class RenamedTree:
    """A hidden tree with its helpers renamed.

    ``files``: new relative path -> content (imports rewritten); ``paths``: every old
    relative path -> its new one (equal for everything but helpers); ``names``: top-level
    helper name -> the name it now has (empty: nothing was renamed, ``files`` equals the
    input); ``helper_paths``: the old paths that belong to a renamed helper."""

    files: dict[str, bytes]
    paths: dict[str, str]
    names: dict[str, str]
    helper_paths: frozenset[str]


def _importable(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _import_roots(files: set[str], package: set[str]) -> set[str]:
    """The directories pytest's prepend mode puts on ``sys.path`` for this tree: the base
    directory (first directory upward without ``__init__.py``) of every test module and
    conftest."""
    roots = set()
    for f in files:
        p = PurePosixPath(f)
        if p.name == "conftest.py" or is_test_module(p.name):
            d = p.parent
            while str(d) != "." and str(d) in package:
                d = d.parent
            roots.add(str(d))
    return roots


def _helper_locations(paths: Collection[str], packages: Collection[str] = (),
                      ) -> list[tuple[str, str, bool]]:
    """(top-level name, module file or package directory, is a directory) of every helper
    (see the module docstring), sorted. ``packages``: directories (relative) that hold an
    ``__init__.py`` outside ``paths`` (the visible tree the hidden files are placed into)."""
    files = set(paths)
    dirs = {str(p) for f in files for p in PurePosixPath(f).parents} - {"."}
    package = {d for d in dirs if f"{d}/__init__.py" in files} | set(packages)
    out: list[tuple[str, str, bool]] = []
    for root in sorted(_import_roots(files, package)):
        for f in sorted(files):
            p = PurePosixPath(f)
            if (str(p.parent) == root and p.suffix == ".py" and _importable(p.stem)
                    and p.stem != "__init__" and p.name != "conftest.py"
                    and not is_test_module(p.name)):
                out.append((p.stem, f, False))
        for d in sorted(dirs):
            p = PurePosixPath(d)
            if str(p.parent) != root or not _importable(p.name):
                continue
            names = [PurePosixPath(f).name for f in files if f.startswith(f"{d}/")]
            # a package, or a namespace package (no __init__.py), holding no test
            if any(n.endswith(".py") for n in names) and not any(
                    n == "conftest.py" or is_test_module(n) for n in names):
                out.append((p.name, d, True))
    return out


def helper_units(paths: Collection[str], packages: Collection[str] = (),
                 ) -> dict[str, set[str]]:
    """The helpers of a hidden tree: top-level importable name -> the relative paths
    (POSIX, as in ``Task.hidden_files``) that make it up (see the module docstring;
    ``packages``: as for :func:`rename_hidden_tree`)."""
    units: dict[str, set[str]] = {}
    for name, where, is_dir in _helper_locations(paths, packages):
        members = {f for f in paths if f.startswith(f"{where}/")} if is_dir else {where}
        units.setdefault(name, set()).update(members)
    return units


def _new_path(path: str, renames: Mapping[str, str]) -> str:
    """``path`` with its helper module file or helper directory (``renames``: old -> new
    location) replaced."""
    if path in renames:
        return renames[path]
    for parent in PurePosixPath(path).parents:
        if str(parent) in renames:
            return f"{renames[str(parent)]}/{PurePosixPath(path).relative_to(parent)}"
    return path


def rename_hidden_tree(files: Mapping[str, bytes], suffix: str,
                       packages: Collection[str] = (),
                       visible: Collection[str] = ()) -> RenamedTree:
    """Rename every helper of ``files`` (relative POSIX path -> content) to ``name +
    suffix`` and rewrite the imports of every ``.py`` file that refer to one
    (:func:`rewrite_imports`; a file that does not parse is kept verbatim).

    The hidden files are placed into the task's repository at these paths, so the import
    roots depend on the visible tree too: ``packages`` are the relative directories that
    hold a visible ``__init__.py`` (a hidden ``tests/mixin.py`` under a visible
    ``tests/__init__.py`` is the submodule ``tests.mixin``, no top-level helper), and
    ``visible`` the relative paths of the visible tree: a helper any of them occupies
    (its file, or anything under its directory) keeps its name, since visible code may
    import it by that name.

    ``suffix`` must keep names identifiers (e.g. ``"_p" + secrets.token_hex(6)``); raises
    ValueError otherwise, or when a new path would collide with an existing one."""
    if not ("x" + suffix).isidentifier():
        raise ValueError(f"suffix {suffix!r} does not keep module names identifiers")
    seen = set(visible)
    seen_dirs = {str(p) for f in seen for p in PurePosixPath(f).parents}
    locations = [(name, where, is_dir) for name, where, is_dir
                 in _helper_locations(files, packages)
                 if where not in seen and where not in seen_dirs]
    names = {name: name + suffix for name, _, _ in locations}
    renames = {where: str(PurePosixPath(where).with_name(
        names[name] if is_dir else names[name] + ".py")) for name, where, is_dir in locations}
    helper_paths = frozenset(p for members in helper_units(files, packages).values()
                             for p in members)
    paths = {p: _new_path(p, renames) for p in files}
    if len(set(paths.values())) != len(paths) or any(
            new in files and new != old for old, new in paths.items()):
        raise ValueError(f"renaming helpers with suffix {suffix!r} collides with a hidden file")
    out: dict[str, bytes] = {}
    for old, data in files.items():
        if names and old.endswith(".py"):
            data = rewrite_imports(data, names)
        out[paths[old]] = data
    return RenamedTree(out, paths, names, helper_paths)


def rewrite_imports(source: bytes, names: Mapping[str, str]) -> bytes:
    """``source`` with every absolute import of a top-level module in ``names`` (old ->
    new) made to import the new name while binding what it bound before; everything else
    byte for byte (line numbers, formatting, strings and comments that mention the name).

    * ``import helpers`` -> ``import helpers_X as helpers``
    * ``import helpers as h`` / ``import helpers.sub as h`` -> ``import helpers_X... as h``
    * ``import helpers.sub`` -> ``import helpers_X.sub, helpers_X as helpers`` (it binds the
      top package)
    * ``from helpers import x`` / ``from helpers.sub import y`` -> ``from helpers_X...``
    * relative imports (``from . import helpers``, ``from .helpers import x``): unchanged.

    Source that cannot be decoded or parsed (or whose decoding does not round-trip) is
    returned unchanged: it fails as a collection error, as it would have anyway.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        text = source.decode(encoding)
        if text.encode(encoding) != source:
            return source
        tree = ast_parse.parse(text)
    except (SyntaxError, ValueError, LookupError, RecursionError, MemoryError):
        return source
    try:
        edits = _import_edits(tree, _Positions(text), names)
    except _Unlocatable:
        return source
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text.encode(encoding)


class _Positions:
    """Offsets into ``text`` of the AST's (line, column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def offset(self, lineno: int, col: int) -> int:
        """The string offset of ``col`` (the AST's, in UTF-8 bytes) on line ``lineno``."""
        line_start = self.starts[lineno - 1]
        prefix = self.text[line_start:line_start + col].encode("utf-8")[:col]
        return line_start + len(prefix.decode("utf-8", "ignore"))


def _import_edits(tree: ast.AST, at: _Positions, names: Mapping[str, str]
                  ) -> list[tuple[int, int, str]]:
    """The (start, end, replacement) edits of :func:`rewrite_imports`.

    Raises:
        _Unlocatable: an import is not where the AST says it is.
    """
    text, edits = at.text, []

    def rename_at(pos: int, old: str) -> None:
        if not text.startswith(old, pos):
            raise _Unlocatable
        edits.append((pos, pos + len(old), names[old]))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in names:
                    continue
                rename_at(at.offset(alias.lineno, alias.col_offset), top)
                if alias.asname is None:
                    end = at.offset(alias.end_lineno, alias.end_col_offset)
                    bind = f" as {top}" if "." not in alias.name else f", {names[top]} as {top}"
                    edits.append((end, end, bind))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top not in names:
                continue
            pos = at.offset(node.lineno, node.col_offset)
            if not text.startswith("from", pos):
                raise _Unlocatable
            rename_at(_GAP.match(text, pos + 4).end(), top)
    return edits


class _Unlocatable(Exception):
    """An import the AST reports is not where its position says (never seen; the file is
    then kept verbatim rather than half rewritten)."""
