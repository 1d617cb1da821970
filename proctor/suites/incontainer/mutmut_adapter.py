"""The one place Proctor touches mutmut (pinned 3.8.1 in proctor/sandbox/toolchain.py).

mutmut has no diff mode. The narrowest hook is the ``covered_lines`` parameter of
``mutmut.mutation.file_mutation.create_mutations(filename, code, covered_lines,
coverage_excluded_lines)``: mutmut's own "mutate only covered lines" filter, which skips
every node whose first line is not in the set. We pass the lines the patch added or
changed, then let ``combine_mutations_to_source`` write mutmut's trampolined module, so
mutmut generates and names every mutant. At test time the active mutant is set in the
trampoline's process-local slot (``trampoline._mutant_under_test``), never in the
``MUTANT_UNDER_TEST`` environment variable, so code that reads the environment sees nothing.
``tests/test_mutation.py`` fails loudly when an upgrade moves any of these.

Run as ``python -I -B mutmut_adapter.py generate SPEC.json`` (root, in the throw-away
copy; no code of the repo runs): SPEC is ``{"root": dir, "files": {path: [line, ...]}}``;
each file is rewritten in place with its mutants and one JSON object is printed:
``{"mutants": [{"name", "path", "line", "function", "diff"}], "errors": [str],
"unmutated": [{"path", "line", "function", "why"}]}`` where ``name`` is the value the
trampoline dispatches on (``module.x_func__mutmut_3``), ``function`` the trampoline's
coverage key (``module.x_func``), and ``unmutated`` the changed lines in code no mutant
can be made for (see :data:`_MARK`: decorated functions get their mutants).

``python -I -B mutmut_adapter.py serve``: the same generation as a long-lived process on the
host (:mod:`proctor.suites.mutant_generator`), sources in and rewritten sources out, one
JSON line each way (see :func:`_serve`), so mutmut and libcst load once per process, not
once per rollout. It only parses: no code of the repo runs there either.
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import os
import re
import sys
import tempfile
import tokenize

from mutmut import configuration
from mutmut.mutation import trampoline
from mutmut.mutation.trampoline_templates import mangle_function_name, trampoline_imports
from mutmut.state import state

# libcst and mutmut's generator load in 0.4 s: imported by generate() only, so the test
# runner (which needs activate / take_hits) does not pay for them.

_PRAGMA = re.compile(r"no\s+mutate")


def _lines(text: str) -> list[str]:
    """``text``'s lines with their ends, split where Python's tokenizer splits them , so that
    line ``n`` is the one ``ast`` numbers ``n`` (``str.splitlines`` also splits at a form
    feed, a line or paragraph separator, which Python keeps inside a line)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)


def use_neutral_config() -> None:
    """Load mutmut's configuration from an empty directory of ours (no patterns, no
    ``[tool.mutmut]`` of the repo), so nothing in the repo can steer what is mutated."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "pyproject.toml"), "w") as fh:
            fh.write('[tool.mutmut]\nsource_paths = ["."]\n')
        os.chdir(tmp)
        try:
            configuration.reset_config()
            configuration.config()
        finally:
            os.chdir(here)


def strip_pragmas(code: str, lines: set[int]) -> str:
    """Blank ``# pragma: no mutate`` comments on ``lines`` (the patch's own), keeping columns."""
    out = _lines(code)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    for tok in tokens:
        row = tok.start[0]
        if tok.type == tokenize.COMMENT and row in lines and _PRAGMA.search(tok.string):
            line = out[row - 1]
            c0, c1 = tok.start[1], tok.end[1]
            out[row - 1] = line[:c0] + "#" + " " * (c1 - c0 - 1) + line[c1:]
    return "".join(out)


#: Repo dirs on ``sys.path`` besides the repo (the task's ``pythonpath``): a file under one
#: imports by its path below it. Set per request (:func:`set_import_roots`).
IMPORT_ROOTS: list[str] = []


def set_import_roots(roots) -> None:
    """Use ``roots`` (repo-relative dirs) for :func:`module_name`, longest first."""
    IMPORT_ROOTS[:] = sorted((r.strip("/") for r in roots or () if r.strip("/")),
                             key=lambda r: -r.count("/"))


def module_name(path: str) -> str:
    """Import name of a repo-relative ``.py`` path: below the deepest import root holding
    it, else from the repo (``src/`` layout stripped, as mutmut does)."""
    for root in IMPORT_ROOTS:
        if path.startswith(root + "/"):
            path = path[len(root) + 1:]
            break
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not IMPORT_ROOTS and parts and parts[0] == "src":
        parts = parts[1:]
    return ".".join(parts)


def _owners(module):
    """Top-level functions and methods of top-level classes -> class name (mutmut's scope)."""
    import libcst as cst

    owners = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            owners[stmt] = None
        elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
            for meth in stmt.body.body:
                if isinstance(meth, cst.FunctionDef):
                    owners[meth] = stmt.name.value
    return owners


def _diff(path: str, module, func, start: int, mutated, mask: _Mask) -> str:
    before = [x.rstrip("\r\n") for x in _lines(module.code_for_node(
        func.with_changes(leading_lines=[])))]
    after = [x.rstrip("\r\n") for x in _lines(module.code_for_node(
        mutated.with_changes(leading_lines=[])))]
    out = [f"--- a/{path}", f"+++ b/{path}"]
    for line in list(difflib.unified_diff(before, after, n=1, lineterm=""))[2:]:
        m = re.match(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", line)
        if m:
            line = (f"@@ -{int(m[1]) + start - 1}{m[2] or ''} "
                    f"+{int(m[3]) + start - 1}{m[4] or ''} @@")
        else:
            line = line[:1] + mask.line(line[1:])
        out.append(line)
    return "\n".join(out)


class Part:
    """What goes through mutmut on its own: a top-level function or class
    (``header`` None: lines ``start``..``end``), or one method of a top-level class
    (``header``: the class's decorator and header lines ``top[0]``..``header``, followed
    by the method's lines ``start``..``end``; ``top``: the whole class's span). A method
    alone keeps generation proportional to the method, not to its class (a 3,500-line
    class took seconds per rollout), and mutmut's scope for it is the same: methods of
    top-level classes (``_owners``)."""

    def __init__(self, start: int, end: int, header: int | None = None,
                 top: tuple[int, int] | None = None):
        self.start, self.end, self.header = start, end, header
        self.top = top or (start, end)

    def text(self, src: list[str]) -> str:
        head = src[self.top[0] - 1:self.header] if self.header is not None else []
        return "".join(head + src[self.start - 1:self.end])

    def to_file(self, line: int) -> int:
        """Line number in the file of ``line`` of :meth:`text`."""
        if self.header is None:
            return self.start + line - 1
        head = self.header - self.top[0] + 1
        return self.top[0] + line - 1 if line <= head else self.start + line - head - 1

    def to_text(self, line: int) -> int:
        """Inverse of :meth:`to_file` for a line of the method (or statement)."""
        if self.header is None:
            return line - self.start + 1
        return self.header - self.top[0] + 1 + line - self.start + 1


def _start(node) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _method_parts(node, src: list[str], lines: set[int]) -> list[Part] | None:
    """One :class:`Part` per method of class ``node`` holding any of ``lines``; None when
    the class cannot be split (its first body statement on its header line, a method
    whose text with the header alone does not parse as that class and that method)."""
    top = (_start(node), node.end_lineno)
    header = _start(node.body[0]) - 1
    if header < node.lineno:
        return None
    parts = []
    for meth in node.body:
        if not isinstance(meth, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue  # mutmut makes no mutant outside a function
        part = Part(_start(meth), meth.end_lineno, header, top)
        if not any(part.start <= n <= part.end for n in lines):
            continue
        try:
            tree = ast.parse(part.text(src))
        except SyntaxError:
            return None
        if (len(tree.body) != 1 or not isinstance(tree.body[0], ast.ClassDef)
                or [getattr(b, "name", None) for b in tree.body[0].body] != [meth.name]):
            return None
        parts.append(part)
    return parts


def touched_parts(code: str, lines: set[int], tree=None) -> list[Part]:
    """The :class:`Part` s holding any of ``lines``, in file order: top-level functions,
    and the touched methods of top-level classes (the whole class when it cannot be
    split, see :func:`_method_parts`). ``tree``: ``code`` parsed, when it already is."""
    src = _lines(code)
    parts = []
    for node in (tree or ast.parse(code)).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = _start(node)
        if not any(start <= n <= node.end_lineno for n in lines):
            continue
        split = _method_parts(node, src, lines) if isinstance(node, ast.ClassDef) else None
        parts.extend(split if split is not None else [Part(start, node.end_lineno)])
    return parts


#: mutmut never mutates a function that has decorators, but for a lone ``@staticmethod`` or
#: ``@classmethod`` (``MutationVisitor._skip_node_and_children``): ``@property`` would break
#: its trampoline, and copying the function with its decorators for the original and each
#: mutant would run them once per copy (registering ``@app.route("/x")`` several times, say).
#: Those functions are shown to mutmut without their decorator lines, each line replaced by
#: a mark (a comment, so line numbers hold: :class:`Part`) naming its line in the file;
#: mutmut makes, names and renders the mutants and its trampoline as for any function, and
#: :meth:`_Mask.restore` puts the decorator lines back above the trampoline's own
#: ``@_mutmut_mutated(...)`` decorator only: the decorators apply to the trampoline (the
#: object they register, cache or wrap is what dispatches to the active mutant), in their
#: order and with Python's own decorator semantics (``@x.setter`` reads the property ``x``
#: before the new ``x`` is bound), while the original's and the mutants' copies stay
#: undecorated plain functions the trampoline calls. The trampoline is a ``functools.wraps``
#: of the function (``__name__``, ``__qualname__``, ``__doc__``, ``__annotations__``,
#: ``__dict__``, ``__wrapped__``), so what decorators read of it is the function's own: the
#: type hints ``functools.singledispatch`` registers by, the signature ``inspect`` follows
#: through ``__wrapped__``, the generator or coroutine nature. A function decorated inside a
#: changed function (``@functools.wraps(fn) def wrapper``) gets its decorator lines back in
#: every copy, since each copy defines it anew when it runs.
#:
#: What this cannot measure, and so counts as not killed (``unmutated``, never "nothing to
#: measure"): the changed lines of a function decorated with a compiler
#: (:data:`_COMPILERS`: it would compile mutmut's dispatcher, not the code), of those
#: mutmut never mutates whatever the decorators (``__new__``, ``__getattribute__``,
#: ``__setattr__``, an enum's ``__init__`` and ``_generate_next_value_``), and of the
#: functions outside mutmut's scope, top-level functions and the methods of top-level
#: classes: a method of a nested class, a function defined under a module-level ``if`` or
#: ``try`` (or ``if True:``). Module- and class-level statements stay outside: they
#: are no function's code, and a patch that changes only them has nothing measured. A
#: ``# pragma: no mutate`` on a decorator line goes with the line: mutmut never mutates a
#: decorator's expression, so it protected nothing there, and a function's own pragma
#: (``no mutate block`` on its ``def`` line) stays where mutmut reads it.
#:
#: A decorator that caches (``functools.cache``) caches the trampoline's results: a value
#: cached before a mutant is active (at import, in the parent of the forked mutant runs)
#: hides that mutant, which then survives; the stats pass and each mutant run are forked
#: children, so nothing a test caches reaches another mutant. A decorator that calls the
#: function at import (``@lambda f: f()``) computes with the original code: its mutants
#: survive. Both err towards "not killed", never towards a higher score.
_MARK = "# proctor: decorator line "
_MARK_LINE = re.compile(r"[ \t]*# proctor: decorator line (\d+)[ \t]*(?:\r?\n)?")
#: Last name of a decorator's callee that compiles the function (numba's ``jit``, ``njit``,
#: ``vectorize``, ...; ``jax.jit``; ``torch.jit.script``, ``torch.compile``).
_COMPILERS = frozenset({"jit", "njit", "vectorize", "guvectorize", "cfunc", "stencil",
                        "generated_jit", "script", "compile"})
#: Suffix of the k-th (k >= 2) changed function of a scope that shares its name with an
#: earlier one (a property's getter and setter, ``@f.register def _``): mutmut names the
#: trampoline's dict, copies and mutants after the function's name, so each gets its own
#: (``xǁCǁxǀ2__mutmut_1``); the trampoline keeps the function's name.
_ALIAS = "ǀ"
_DEF = r"^([ \t]*(?:async[ \t]+)?def[ \t]+){}(?=[ \t]*[(\[])"


def _functions(node) -> list:
    return [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _skipped_for_decorators(func) -> bool:
    """mutmut skips ``func`` for its decorators (its rule, see :data:`_MARK`)."""
    decs = func.decorator_list
    return bool(decs) and not (len(decs) == 1 and isinstance(decs[0], ast.Name)
                               and decs[0].id in ("staticmethod", "classmethod"))


def _compiler(func) -> str | None:
    """The name of a decorator of ``func`` that compiles it (:data:`_COMPILERS`), or None."""
    for dec in func.decorator_list:
        callee = dec.func if isinstance(dec, ast.Call) else dec
        last = (callee.attr if isinstance(callee, ast.Attribute)
                else callee.id if isinstance(callee, ast.Name) else None)
        if last in _COMPILERS:
            return ast.unparse(callee)
    return None


class _Mask:
    """The text mutmut reads for one file, and how to undo it in what mutmut renders
    (see :data:`_MARK`). ``src``: the file's lines; ``lines``: the changed ones."""

    def __init__(self, tree, src: list[str], lines: set[int], modname: str):
        self.src, self.masked, self.changed = src, list(src), lines
        self.originals: dict[int, str] = {}  # file line shown as a mark -> its text
        self.every_copy: set[int] = set()  # marks of nested functions: back in every copy
        self.aliases: dict[str, str] = {}  # alias -> the function's name
        #: (class name or None, name shown to mutmut) of the functions shown undecorated
        self.undecorated: set[tuple[str | None, str]] = set()
        #: (line, function, why) of the changed lines no mutant can be made for; their
        #: lines, which mutmut is not asked to mutate
        self.unmutated: list[tuple[int, str, str]] = []
        self.excluded: set[int] = set()
        names: dict[tuple[str | None, str], int] = {}
        for owner, func in self._top(tree):
            qual = f"{modname}.{owner.name + '.' if owner else ''}{func.name}"
            why = self._never(owner, func)
            if why is None and _skipped_for_decorators(func):
                why = self._undecorate(func, every_copy=False)
            if why is None:
                self._inner(func, qual)
                key = (owner.name if owner else None, func.name)
                names[key] = names.get(key, 0) + 1
                shown = self._alias(func, names[key]) if names[key] > 1 else func.name
                if shown is None:
                    why = "another changed function of its scope has its name"
                elif _start(func) in self.originals:
                    self.undecorated.add((key[0], shown))
            if why:
                self._unmutated(func, qual, why)
        self._outside(tree, modname)

    def _outside(self, tree, modname: str) -> None:
        """Count as unmutated the changed functions outside mutmut's scope (top-level
        functions and the methods of top-level classes): methods of a nested class, and
        functions defined under a module-level statement (``if``, ``try``, ...)."""
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.ClassDef):
                for inner in node.body:
                    for func in _functions(inner) if isinstance(inner, ast.ClassDef) else ():
                        if self._touched(func):
                            self._unmutated(
                                func, f"{modname}.{node.name}.{inner.name}.{func.name}",
                                "a method of a nested class: mutmut has no trampoline for it")
                continue
            for func in _functions(node):
                if self._touched(func):
                    self._unmutated(func, f"{modname}.{func.name}",
                                    "a function defined under a module-level statement: "
                                    "mutmut has no trampoline for it")

    @staticmethod
    def _never(owner, func) -> str | None:
        """Why mutmut never mutates ``func`` (of class ``owner`` or None), whatever its
        decorators, or None."""
        from mutmut.mutation.file_mutation import (
            ENUM_BASE_NAMES,
            NEVER_MUTATE_ENUM_FUNCTION_NAMES,
            NEVER_MUTATE_FUNCTION_NAMES,
        )

        if func.name in NEVER_MUTATE_FUNCTION_NAMES:
            return f"mutmut never mutates {func.name}"
        bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)
                 for b in (owner.bases if owner is not None else ())]
        if func.name in NEVER_MUTATE_ENUM_FUNCTION_NAMES and set(bases) & ENUM_BASE_NAMES:
            return f"mutmut never mutates an enum's {func.name}"
        return None

    def _inner(self, func, qual: str) -> None:
        """The functions defined inside ``func`` that hold changed lines: decorated ones
        shown undecorated (their lines back in every copy), the others mutmut skips
        counted as unmutated."""
        for inner in _functions(func)[1:]:
            if not self._touched(inner):
                continue
            why = self._never(None, inner)
            if why is None and _skipped_for_decorators(inner):
                why = self._undecorate(inner, every_copy=True)
            if why:
                self._unmutated(inner, f"{qual}.<locals>.{inner.name}", why)

    def _top(self, tree):
        """(class or None, function) of mutmut's scope holding changed lines, in file order."""
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if self._touched(node):
                    yield None, node
            elif isinstance(node, ast.ClassDef):
                for meth in node.body:
                    if isinstance(meth, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                            self._touched(meth):
                        yield node, meth

    def _touched(self, func) -> bool:
        return any(_start(func) <= n <= func.end_lineno for n in self.changed)

    def _unmutated(self, func, qual: str, why: str) -> None:
        found = [n for n in sorted(self.changed - self.excluded)
                 if func.lineno <= n <= func.end_lineno]
        self.unmutated.extend((n, qual, why) for n in found)
        self.excluded.update(found)

    def _undecorate(self, func, every_copy: bool) -> str | None:
        """Show ``func``'s decorator lines to mutmut as marks; or why it cannot be."""
        first = _start(func)
        block = range(first, func.lineno)
        compiler = _compiler(func)
        if compiler:
            return (f"decorated with @{compiler}, which compiles the function: no "
                    "trampoline can stand in for it")
        indent = re.match(r"[ \t]*", self.src[first - 1])[0]
        for n in block:
            text = self.src[n - 1]
            eol = text[len(text.rstrip("\r\n")):]
            self.originals[n] = text
            self.masked[n - 1] = f"{indent}{_MARK}{n}{eol or chr(10)}"
            if every_copy:
                self.every_copy.add(n)
        return None

    def _alias(self, func, k: int) -> str | None:
        """Show ``func`` to mutmut under its alias (:data:`_ALIAS`); the alias, or None when
        its ``def`` line is not one we can rewrite."""
        alias = f"{func.name}{_ALIAS}{k}"
        line = self.masked[func.lineno - 1]
        new = re.sub(_DEF.format(re.escape(func.name)), lambda m: m[1] + alias, line, count=1)
        if new == line:
            return None
        self.masked[func.lineno - 1] = new
        self.aliases[alias] = func.name
        return alias

    def line(self, text: str) -> str:
        """A line of a mutant's diff (after its ``+``, ``-`` or space) as in the file."""
        m = _MARK_LINE.fullmatch(text)
        if m and int(m[1]) in self.originals:
            return self.originals[int(m[1])].rstrip("\r\n")
        for alias, name in self.aliases.items():
            text = re.sub(_DEF.format(re.escape(alias)), lambda m, n=name: m[1] + n, text)
        return text

    def restore(self, rendered: str) -> str:
        """mutmut's rendering with the decorator lines back (on the first rendering of a
        function of mutmut's scope, its trampoline, and dropped from the copies; on every
        copy for a nested function), each alias's trampoline named as the function, and
        each decorated trampoline moved below the original's copy, after a line that puts
        that copy in the trampoline's dict: a decorator that calls the function when it is
        defined (``@lambda f: f()``) gets the original's result instead of a KeyError from
        the trampoline (mutmut fills the dict after the function, or after the class)."""
        out, seen = [], set()
        for text in _lines(rendered):
            m = _MARK_LINE.fullmatch(text)
            n = int(m[1]) if m else None
            if n not in self.originals:
                out.append(text)
                continue
            if n in self.every_copy or n not in seen:
                out.append(self.originals[n])
            seen.add(n)
        if not self.aliases and not self.undecorated:
            return "".join(out)
        out = _lines("".join(out))
        moves = []
        for owner, scope in _scopes(ast.parse("".join(out))):
            funcs = {n.name: n for n in scope
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for node in funcs.values():
                dicts = [d.args[0].id for d in node.decorator_list
                         if isinstance(d, ast.Call) and getattr(d.func, "id", None)
                         == "_mutmut_mutated" and d.args and isinstance(d.args[0], ast.Name)]
                orig = funcs.get(f"{dicts[0].removeprefix('mutants_')}_orig") if dicts else None
                if (owner, node.name) in self.undecorated and orig is not None \
                        and orig.lineno > node.end_lineno:
                    indent = re.match(r"[ \t]*", out[orig.lineno - 1])[0]
                    fill = f"{indent}{dicts[0]}['_mutmut_orig'] = {orig.name}\n"
                    moves.append((_start(node), node.end_lineno, orig.end_lineno, fill))
                name = self.aliases.get(node.name)
                if name is not None:
                    out[node.lineno - 1] = re.sub(_DEF.format(re.escape(node.name)),
                                                  lambda m, n=name: m[1] + n,
                                                  out[node.lineno - 1], count=1)
        for first, last, after, fill in sorted(moves, reverse=True):
            out[first - 1:after] = out[last:after] + [fill] + out[first - 1:last]
        return "".join(out)


def _scopes(tree):
    """(class name or None, statements) of a module's body and of each top-level class."""
    yield None, tree.body
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield node.name, node.body


class _Statement:
    """One :class:`Part` holding changed lines: its mutmut module and the mutations on
    those lines (``kept``: (mutation, function node, line in the file)). ``text``: the
    part as mutmut reads it (``mask``), ``original``: as in the file."""

    def __init__(self, path: str, part: Part, text: str, local: set[int], mask: _Mask,
                 original: str):
        from libcst.metadata import MetadataWrapper, PositionProvider
        from mutmut.mutation.file_mutation import create_mutations

        self.path, self.part, self.text = path, part, text
        self.mask, self.original = mask, original
        self.start, self.end = part.start, part.end
        (self.module, mutations, self.ignored_classes,
         self.ignored_functions) = create_mutations(path, text, covered_lines=set(local))
        self.positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(
            PositionProvider)
        self.owners = _owners(self.module)
        self.kept = []
        for mut in mutations:
            func = mut.contained_by_top_level_function
            if func not in self.owners:
                continue  # not in a function: mutmut has no trampoline for it
            line = self.positions[mut.original_node].start.line
            if line not in local:
                raise RuntimeError(
                    f"mutmut hook broken: mutant on line {part.to_file(line)} of {path}, "
                    f"asked for {sorted(part.to_file(n) for n in local)}")
            self.kept.append((mut, func, part.to_file(line)))

    def names(self) -> list[str]:
        """The name each kept mutation gets when all are rendered (mutmut counts per
        function, in order)."""
        modname, counter, out = module_name(self.path), {}, []
        for _mut, func, _line in self.kept:
            counter[func] = counter.get(func, 0) + 1
            mangled = mangle_function_name(name=func.name.value, class_name=self.owners[func])
            out.append(f"{modname}.{mangled}__mutmut_{counter[func]}")
        return out

    def render(self, chosen: set[int]) -> tuple[str, str, str, list[dict]]:
        """mutmut's trampolined rendering with the kept mutations whose index is in
        ``chosen`` only, as (module-level text before the part's top-level statement, the
        part's replacement, module-level text after that statement), and one dict per
        mutant; ``("", the part's own text, "", [])`` when none is chosen."""
        from mutmut.mutation.file_mutation import combine_mutations_to_source, deep_replace

        modname, counter, muts, infos = module_name(self.path), {}, [], []
        for i, (mut, func, line) in enumerate(self.kept):
            if i not in chosen:
                continue
            mangled = mangle_function_name(name=func.name.value, class_name=self.owners[func])
            counter[func] = counter.get(func, 0) + 1
            muts.append(mut)
            mutated = deep_replace(func, mut.original_node, mut.mutated_node)
            infos.append({
                "name": f"{modname}.{mangled}__mutmut_{counter[func]}", "path": self.path,
                "line": line, "function": f"{modname}.{mangled}",
                "diff": _diff(self.path, self.module, func,
                              self.part.to_file(self.positions[func].start.line), mutated,
                              self.mask),
            })
        if not muts:
            src = _lines(self.original)
            own = src[len(src) - (self.end - self.start + 1):]
            return "", "".join(own), "", []
        result = combine_mutations_to_source(self.module, muts, self.ignored_classes,
                                             self.ignored_functions)
        expected = {i["name"].rpartition(".")[2] for i in infos}
        if set(result.mutant_names) != expected:
            raise RuntimeError(f"mutmut hook broken: mutmut named {sorted(result.mutant_names)}"
                               f", expected {sorted(expected)}")
        head, sep, body = result.code.partition(trampoline_imports.strip())
        marks = [line for line in _lines(head) if line.strip()]
        if not sep or not all(_MARK_LINE.fullmatch(line) for line in marks):
            raise RuntimeError("mutmut hook broken: the rendering does not start with "
                               f"{trampoline_imports.strip()!r}")
        body = body.lstrip("\n")
        if marks:  # a top-level function's: libcst keeps a module's first comments apart
            body = _above_trampoline(body, marks)
        body = self.mask.restore(body)
        if self.part.header is None:
            return "", body, "", infos
        return (*_split_method(body, self.text, self.part), infos)


def _above_trampoline(rendered: str, marks: list[str]) -> str:
    """``rendered`` (mutmut's rendering of a top-level function) with ``marks`` put right
    above its trampoline's decorators. Raises RuntimeError when it has no trampoline."""
    lines = _lines(rendered)
    for node in ast.parse(rendered).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", None) == "_mutmut_mutated"
                for d in node.decorator_list):
            at = _start(node) - 1
            return "".join(lines[:at] + marks + lines[at:])
    raise RuntimeError("mutmut hook broken: a decorated function's rendering has no "
                       "trampoline")


def _split_method(rendered: str, text: str, part: Part) -> tuple[str, str, str]:
    """(before, method replacement, after) of mutmut's rendering of a method ``part``
    (its class header and the method alone, ``text``): the module-level lines mutmut puts
    before and after the class (its mutant dict and the dict's entries) and the class body
    it wrote in place of the method. Raises RuntimeError when the rendering does not hold
    the class header unchanged."""
    lines = _lines(rendered)
    classes = [n for n in ast.parse(rendered).body if isinstance(n, ast.ClassDef)]
    head = "".join(_lines(text)[:part.header - part.top[0] + 1])
    if len(classes) != 1:
        raise RuntimeError("mutmut hook broken: a method's rendering holds "
                           f"{len(classes)} classes")
    first, last = _start(classes[0]), classes[0].end_lineno
    klass = "".join(lines[first - 1:last])
    if not klass.startswith(head):
        raise RuntimeError("mutmut hook broken: a method's rendering changed its class header")
    return "".join(lines[:first - 1]), klass[len(head):], "".join(lines[last:])


def _statements(path: str, code: str, lines: set[int]
                ) -> tuple[str, list[_Statement], list[dict]]:
    """(``code`` without the patch's pragmas, the statements holding ``lines``, one dict
    ``{"path", "line", "function", "why"}`` per changed line no mutant can be made for)."""
    code = strip_pragmas(code, lines)
    src = _lines(code)
    tree = ast.parse(code)
    mask = _Mask(tree, src, lines, module_name(path))
    out = []
    for part in touched_parts(code, lines, tree):
        local = {part.to_text(n) for n in lines - mask.excluded if part.start <= n <= part.end}
        out.append(_Statement(path, part, part.text(mask.masked), local, mask,
                              part.text(src)))
    unmutated = [{"path": path, "line": n, "function": f, "why": why}
                 for n, f, why in sorted(mask.unmutated)]
    return code, out, unmutated


def _render_file(code: str, statements: list[_Statement], chosen: list[set[int]]
                 ) -> tuple[str, list[dict]]:
    """``code`` with each statement's rendering in place: a part's replacement over its
    lines, the module-level text mutmut adds for a method before and after its class, and
    mutmut's import before the first top-level statement that got mutants."""
    src = _lines(code)
    before: dict[int, list[str]] = {}
    after: dict[int, list[str]] = {}
    replace: dict[int, tuple[int, str]] = {}
    infos: list[dict] = []
    for st, picks in zip(statements, chosen, strict=True):
        pre, body, post, found = st.render(picks)
        top = st.part.top
        if found and not infos:
            before.setdefault(top[0], []).insert(0, trampoline_imports.strip() + "\n")
        before.setdefault(top[0], []).append(pre)
        after.setdefault(top[1], []).append(post)
        replace[st.start] = (st.end, body)
        infos.extend(found)
    out, i = [], 1
    while i <= len(src):
        out.extend(before.get(i, ()))
        if i in replace:
            j, body = replace[i]
            out.append(body)
        else:
            j = i
            out.append(src[i - 1])
        for k in range(i, j + 1):
            out.extend(after.get(k, ()))
        i = j + 1
    return "".join(out), infos


def generate(path: str, code: str, lines: set[int]) -> tuple[str, list[dict]]:
    """Mutants of ``code`` (the file at repo path ``path``) on ``lines`` only: every one
    (see :func:`generate_all`). Returns (the source to write in place of the file, one dict
    per mutant as in the module docstring). Raises RuntimeError when the hook broke."""
    code, statements, _unmutated = _statements(path, code, lines)
    return _render_file(code, statements, [set(range(len(s.kept))) for s in statements])


def activate(name: str | None) -> None:
    """Make ``name`` (``module.x_func__mutmut_N``, ``"stats"``, or None for the original
    code) the active mutant of this process, without touching the environment."""
    os.environ.pop("MUTANT_UNDER_TEST", None)
    trampoline._mutant_under_test = name


def take_hits() -> set[str]:
    """Coverage keys (``module.x_func``) the trampolines recorded in ``"stats"`` mode since
    the last call; clears them."""
    hits = set(state()._stats)
    state()._stats.clear()
    return hits


def generate_all(sources: dict[str, tuple[str, set[int]]], max_mutants: int | None = None,
                 seed: int = 0
                 ) -> tuple[dict[str, str], list[dict], list[str], list[dict]]:
    """Mutants of every file: ``sources`` maps repo path -> (code, changed lines).

    Each top-level function, and each method of a top-level class, holding a changed line
    goes through mutmut on its own (its text alone, a method with its class's header; line
    numbers mapped back: :class:`Part`), and mutmut's trampolined rendering replaces it in
    the file (for a method, mutmut's module-level lines go before and after its class);
    mutmut's import goes before the first one. Parsing only those parts keeps generation
    proportional to the code the patch touched, not to the file or the class.

    With more than ``max_mutants`` mutations in all, a sample of ``max_mutants`` is drawn
    *before* rendering, the way ``proctor.suites.mutation.select_mutants`` draws it
    (``random.Random(seed)`` over the names sorted), so the same mutants are chosen as when
    all were rendered; only those are rendered (rendering is quadratic in a
    function's size: one list literal of 4,000 numbers takes minutes and would run the
    step out of time). Names then count the chosen ones only.

    Returns (path -> rewritten source, only for files that got mutants; the mutants, in
    path order; one message per file that could not be parsed; the changed lines no mutant
    can be made for, ``{"path", "line", "function", "why"}`` in path and line order, see
    :data:`_MARK`). Raises RuntimeError when the mutmut hook broke."""
    import random

    parsed, errors = {}, []
    for path, (code, lines) in sorted(sources.items()):
        try:
            parsed[path] = _statements(path, code, set(lines))
        except RuntimeError:
            raise  # the hook broke: fail loudly (the step is then degraded)
        except Exception as exc:  # noqa: BLE001 - unparsable: no mutants there
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    unmutated = [u for _c, _sts, found in parsed.values() for u in found]
    slots = [(path, i, j, name) for path, (_c, sts, _u) in parsed.items()
             for i, st in enumerate(sts) for j, name in enumerate(st.names())]
    if max_mutants is not None and len(slots) > max_mutants:
        names = sorted(slot[3] for slot in slots)
        keep = set(random.Random(seed).sample(names, max_mutants))
        slots = [slot for slot in slots if slot[3] in keep]
    chosen = {}
    for path, i, j, _name in slots:
        chosen.setdefault((path, i), set()).add(j)
    rewritten, mutants = {}, []
    for path, (code, sts, _u) in parsed.items():
        try:
            new_code, infos = _render_file(code, sts, [chosen.get((path, i), set())
                                                       for i in range(len(sts))])
        except RuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - mutmut cannot render it: no mutants there
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        if infos:
            rewritten[path] = new_code
        mutants.extend(infos)
    return rewritten, mutants, sorted(errors), unmutated


def _generate_spec(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    sources, errors = {}, []
    for path, lines in sorted(spec["files"].items()):
        try:
            with open(os.path.join(spec["root"], path), encoding="utf-8") as fh:
                sources[path] = (fh.read(), set(lines))
        except (OSError, UnicodeDecodeError) as exc:  # unreadable: no mutants there
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    set_import_roots(spec.get("import_roots"))
    rewritten, mutants, more, unmutated = generate_all(sources, spec.get("max_mutants"),
                                                       spec.get("seed", 0))
    for path, code in rewritten.items():
        with open(os.path.join(spec["root"], path), "w", encoding="utf-8") as fh:
            fh.write(code)
    print(json.dumps({"mutants": mutants, "errors": sorted(errors + more),
                      "unmutated": unmutated}))
    return 0


def _serve(stdin, stdout) -> int:
    """One request a line on ``stdin``: ``{"files": {path: {"code": str, "lines": [int]}}}``;
    one answer a line on ``stdout``: ``{"files": {path: rewritten}, "mutants": [...],
    "errors": [...], "unmutated": [...]}``, or ``{"fatal": why}`` when the hook broke or
    the request is not understood. A ``{"ready": versions}`` line comes first, once mutmut
    is loaded. Ends at the end of ``stdin``."""
    from importlib.metadata import version

    import mutmut.mutation.file_mutation  # noqa: F401 - loaded once, before the first request

    versions = {name: version(name) for name in ("mutmut", "libcst")}
    stdout.write(json.dumps({"ready": versions}) + "\n")
    stdout.flush()
    for line in stdin:
        try:
            request = json.loads(line)
            sources = {p: (f["code"], set(f["lines"])) for p, f in request["files"].items()}
            set_import_roots(request.get("import_roots"))
            rewritten, mutants, errors, unmutated = generate_all(
                sources, request.get("max_mutants"), request.get("seed", 0))
            answer = {"files": rewritten, "mutants": mutants, "errors": errors,
                      "unmutated": unmutated}
        except Exception as exc:  # noqa: BLE001 - answered, never a dead server
            answer = {"fatal": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    if argv == ["serve"]:
        use_neutral_config()
        return _serve(sys.stdin, sys.stdout)
    if argv[:1] != ["generate"] or len(argv) != 2:
        print("usage: mutmut_adapter.py generate SPEC.json | serve", file=sys.stderr)
        return 2
    use_neutral_config()
    return _generate_spec(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
