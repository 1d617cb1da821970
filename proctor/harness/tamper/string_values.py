"""What strings an expression can hold, read from the AST alone (pure, nothing executed).

:mod:`proctor.harness.tamper.suspicious_code` judges a string only where the code uses it (an
environment lookup, a path handed to ``open``, a ``getattr`` name...). The string often
reaches that use through a name, so :class:`StringValues` follows the file's bindings:

* a name bound to a string expression (``KEY = "PYTEST_" + "CURRENT_TEST"``); a name bound
  more than once holds each of its values; a name also bound some other way (a parameter,
  ``with ... as``, an import, ``+=``) holds nothing known;
* a loop or comprehension variable over a literal container, or over a name bound to one
  (``for k in KEYS``; ``for k, v in TABLE.items()``: keys and values);
* ``+``, ``%`` and ``.format`` of known strings, f-strings, ``"sep".join`` of a literal
  sequence, ``str(x)``, ``x if c else y``, an entry of a literal container
  (``NAMES["env"]``), ``"a b".split()``, and paths built from constants only
  (``os.path.join("/", "proctor")``, ``Path("/") / "proctor"``).

A part that cannot be known (a parameter in an f-string) is the hole :data:`HOLE`, so
``f"/proctor/{name}"`` still reads as a path under ``/proctor``. Scopes are not told apart
(a name's bindings anywhere in the file count): it over-approximates, which only matters
where a value is used. Sizes stay small (:data:`MAX_VALUES` per expression, the
first :data:`MAX_LENGTH` characters of a concatenation) and the
work linear in the file (each expression folded once).
"""

from __future__ import annotations

import ast
import itertools
import posixpath
import re
from collections.abc import Callable

HOLE = "\x00"
MAX_VALUES = 32
MAX_ORIGINS = 64
MAX_LENGTH = 4096
_DEPTH = 24
_PCT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[a-zA-Z%]")
_BRACE_SPEC = re.compile(r"\{[^{}]*\}")
_PATH_BUILDERS = frozenset({"os.path.join", "posixpath.join", "pathlib.Path",
                            "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath"})
_SEQUENCE_CALLS = frozenset({"sorted", "list", "tuple", "set", "frozenset", "reversed", "iter"})

#: How a name is bound: ("value", expr), ("iter", container expr), ("keys" / "values",
#: mapping expr) or ("other", None).
Binding = tuple[str, ast.AST | None]


class StringValues:
    """Possible string values of expressions of one module (``resolve``: dotted name of a
    Name/Attribute chain through the imports, for ``os.path.join`` and ``pathlib``;
    ``nodes``: the module's nodes in ``ast.walk`` order, if the caller has them)."""

    def __init__(self, tree: ast.AST, resolve: Callable[[ast.AST], str],
                 nodes: list[ast.AST] | None = None) -> None:
        self.resolve = resolve
        self.bindings: dict[str, list[Binding]] = {}
        #: results per (query, node): each expression is folded once (names bound to names
        #: bound to names... stay linear); an expression met again while it is being folded
        #: (``a = b`` / ``b = a``) holds nothing known
        self._memo: dict[tuple[str, int], object] = {}
        self._busy: set[tuple[str, int]] = set()
        for node in ast.walk(tree) if nodes is None else nodes:
            self._collect(node)

    # -- bindings --
    def _bind(self, target: ast.AST, how: Binding) -> None:
        if isinstance(target, ast.Name):
            self.bindings.setdefault(target.id, []).append(how)
        elif isinstance(target, ast.Tuple | ast.List):
            src = how[1]
            pair = how[0] == "iter" and len(target.elts) == 2 and isinstance(src, ast.Call) \
                and isinstance(src.func, ast.Attribute) and src.func.attr == "items" \
                and not src.args
            for i, elt in enumerate(target.elts):
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                if pair and not isinstance(elt, ast.Starred):
                    self._bind(inner, ("keys" if i == 0 else "values", src.func.value))
                else:
                    self._bind(inner, ("other", None))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, ("other", None))

    def _collect(self, node: ast.AST) -> None:  # noqa: C901
        if isinstance(node, ast.Assign):
            for t in node.targets:
                self._bind(t, ("value", node.value) if isinstance(t, ast.Name) else
                           ("other", None))
        elif isinstance(node, ast.AnnAssign):
            self._bind(node.target, ("value", node.value) if node.value is not None
                       else ("other", None))
        elif isinstance(node, ast.NamedExpr):
            self._bind(node.target, ("value", node.value))
        elif isinstance(node, ast.AugAssign):
            self._bind(node.target, ("other", None))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._bind(node.target, ("iter", node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._bind(node.optional_vars, ("other", None))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.bindings.setdefault(node.name, []).append(("other", None))
        elif isinstance(node, ast.arg):
            self.bindings.setdefault(node.arg, []).append(("other", None))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                name = a.asname or a.name.split(".")[0]
                self.bindings.setdefault(name, []).append(("other", None))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.bindings.setdefault(node.name, []).append(("other", None))
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            self.bindings.setdefault(node.name, []).append(("other", None))
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self.bindings.setdefault(node.rest, []).append(("other", None))

    def known(self, name: str) -> list[Binding] | None:
        """The bindings of ``name`` when every one is of a kind this module follows."""
        found = self.bindings.get(name)
        if not found or any(how == "other" for how, _ in found):
            return None
        return found

    # -- values --
    def values(self, node: ast.AST | None, depth: int = 0) -> frozenset[str]:
        """The strings ``node`` may evaluate to (holes: :data:`HOLE`); empty: unknown."""
        if node is None or depth > _DEPTH:
            return frozenset()
        return self._once(("values", id(node)), lambda: _cap(self._values(node, depth + 1)))

    def _once(self, key: tuple[str, int], compute: Callable[[], object]):
        if key in self._memo:
            return self._memo[key]
        empty = False if key[0] == "constant" else frozenset()
        if key in self._busy:
            return empty
        self._busy.add(key)
        try:
            out = compute()
        finally:
            self._busy.discard(key)
        self._memo[key] = out
        return out

    def _values(self, node: ast.AST, depth: int) -> frozenset[str]:  # noqa: C901
        v = lambda n: self.values(n, depth)  # noqa: E731
        if isinstance(node, ast.Constant):
            return frozenset({node.value}) if isinstance(node.value, str) else frozenset()
        if isinstance(node, ast.Name):
            found = self.known(node.id)
            if found is None:
                return frozenset()
            out: set[str] = set()
            for how, src in found:
                got = v(src) if how == "value" else self.elements(src, depth, how)
                if not got:
                    return frozenset()
                out |= got
            return frozenset(out)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    parts.append(frozenset({str(part.value)}))
                else:
                    parts.append(v(part.value) or frozenset({HOLE}))
            return _product(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = v(node.left), v(node.right)
            if not left and not right:
                return frozenset()
            return _product([left or frozenset({HOLE}), right or frozenset({HOLE})])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return frozenset(_percent(f, node.right, v) for f in v(node.left))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = v(node.left), v(node.right)  # Path("/") / "proctor"
            if left and right and not any(HOLE in s for s in left | right):
                return frozenset(posixpath.join(a, b) for a in left for b in right)
            return frozenset()
        if isinstance(node, ast.IfExp):
            return v(node.body) | v(node.orelse)
        if isinstance(node, ast.Subscript):
            return self._entry(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return frozenset()

    def _call(self, node: ast.Call, depth: int) -> frozenset[str]:
        v = lambda n: self.values(n, depth)  # noqa: E731
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "format":
            return frozenset(_brace(f, node, v) for f in v(func.value))
        if isinstance(func, ast.Attribute) and func.attr == "join" and len(node.args) == 1:
            seps = v(func.value)
            seq = node.args[0]
            if isinstance(seq, ast.Name) and self.known(seq.id) and all(
                    how == "value" for how, _ in self.known(seq.id)):
                seqs = [src for _, src in self.known(seq.id)]
            else:
                seqs = [seq]
            out: set[str] = set()
            for s in seqs:
                if not isinstance(s, ast.List | ast.Tuple) or not s.elts:
                    return frozenset()
                parts = [v(e) for e in s.elts]
                if not seps or not all(parts):
                    return frozenset()
                for sep in seps:
                    out |= {sep.join(p) for p in itertools.islice(
                        itertools.product(*parts), MAX_VALUES)}
            return frozenset(out)
        name = self.resolve(func)
        if name in ("str", "builtins.str") and len(node.args) == 1 and not node.keywords:
            return v(node.args[0])
        if name in _PATH_BUILDERS and node.args and not node.keywords:
            parts = [v(a) for a in node.args]
            if all(parts) and not any(HOLE in s for p in parts for s in p):
                return frozenset(posixpath.join(*p) for p in itertools.islice(
                    itertools.product(*parts), MAX_VALUES))
        return frozenset()

    def _entry(self, node: ast.Subscript, depth: int) -> frozenset[str]:
        """``TABLE["k"]`` / ``SEQ[0]`` of a literal container (or a name bound to one)."""
        lit = self.literal(node.value)
        if lit is None:
            return frozenset()
        key = node.slice
        if isinstance(lit, ast.Dict):
            k = self.values(key, depth)
            hits = [val for kk, val in zip(lit.keys, lit.values, strict=True)
                    if kk is not None and (not k or self.values(kk, depth) & k)]
            return frozenset().union(*(self.values(h, depth) for h in hits)) if hits \
                else frozenset()
        if isinstance(key, ast.Constant) and type(key.value) is int and \
                -len(lit.elts) <= key.value < len(lit.elts):
            return self.values(lit.elts[key.value], depth)
        return self.elements(lit, depth)

    def literal(self, node: ast.AST) -> ast.List | ast.Tuple | ast.Set | ast.Dict | None:
        """``node`` as a container display: itself, or the display a name is bound to once."""
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            return node
        if isinstance(node, ast.Name):
            found = self.known(node.id)
            if found and len(found) == 1 and found[0][0] == "value" and isinstance(
                    found[0][1], ast.List | ast.Tuple | ast.Set | ast.Dict):
                return found[0][1]
        return None

    def elements(self, node: ast.AST | None, depth: int = 0, how: str = "iter"
                 ) -> frozenset[str]:
        """Strings iterating ``node`` yields (``how``: ``iter``; ``keys`` / ``values`` of a
        mapping for ``for k, v in m.items()``); empty: unknown."""
        if node is None or depth > _DEPTH:
            return frozenset()
        return self._once((f"elements:{how}", id(node)),
                          lambda: _cap(self._elements(node, depth + 1, how)))

    def _elements(self, node: ast.AST, depth: int, how: str) -> frozenset[str]:  # noqa: C901
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                not node.args:
            if node.func.attr == "keys":
                return self.elements(node.func.value, depth, "keys")
            if node.func.attr == "values":
                return self.elements(node.func.value, depth, "values")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "split" and len(node.args) <= 1:
            sep = None
            if node.args:
                seps = self.values(node.args[0], depth)
                if len(seps) != 1:
                    return frozenset()
                sep = next(iter(seps))
            return frozenset(p for s in self.values(node.func.value, depth)
                             for p in s.split(sep) if p)
        if isinstance(node, ast.Call) and self.resolve(node.func) in _SEQUENCE_CALLS and \
                len(node.args) == 1:
            return self.elements(node.args[0], depth, how)
        if isinstance(node, ast.Name):
            found = self.known(node.id)
            if not found or any(h != "value" for h, _ in found):
                return frozenset()
            return frozenset().union(*(self.elements(src, depth, how) for _, src in found))
        if isinstance(node, ast.Dict):
            src = node.values if how == "values" else node.keys
            return frozenset().union(*(self.values(x, depth) for x in src if x is not None))
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            out: set[str] = set()
            for e in node.elts:
                out |= self.elements(e.value, depth) if isinstance(e, ast.Starred) else \
                    self.values(e, depth)
            return frozenset(out)
        return frozenset()

    def key_values(self, node: ast.AST) -> frozenset[str]:
        """Values of a key or argument: the strings it holds, or, for a container (a tuple
        of prefixes for ``startswith``), the strings in it."""
        return self.values(node) | self.elements(node) if self.literal(node) is not None \
            else self.values(node)

    def origins(self, node: ast.AST) -> list[ast.AST]:
        """The binding expressions a value of ``node`` comes from (through names), each
        once, at most :data:`MAX_ORIGINS`."""
        out: list[ast.AST] = []
        seen: set[str] = set()
        todo = [node]
        while todo and len(out) < MAX_ORIGINS:
            for sub in ast.walk(todo.pop()):
                if isinstance(sub, ast.Name) and sub.id not in seen:
                    seen.add(sub.id)
                    for _, src in self.known(sub.id) or ():
                        if src is not None:
                            out.append(src)
                            todo.append(src)
        return out

    def constant(self, node: ast.AST, depth: int = 0) -> bool:
        """Is ``node`` a constant: a literal, a display of constants, or a name bound only
        to those (the other side of a comparison that senses nothing)?"""
        if depth > _DEPTH:
            return False
        return self._once(("constant", id(node)), lambda: self._constant(node, depth))

    def _constant(self, node: ast.AST, depth: int) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return all(self.constant(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self.constant(k, depth + 1) and
                       self.constant(x, depth + 1) for k, x in zip(node.keys, node.values,
                                                                  strict=True))
        if isinstance(node, ast.BinOp):
            return self.constant(node.left, depth + 1) and self.constant(node.right, depth + 1)
        if isinstance(node, ast.Name):
            found = self.known(node.id)
            return bool(found) and all(how == "value" and self.constant(src, depth + 1)
                                       for how, src in found)
        return False


def _cap(values: frozenset[str]) -> frozenset[str]:
    return values if len(values) <= MAX_VALUES else frozenset(sorted(values)[:MAX_VALUES])


def _product(parts: list[frozenset[str]]) -> frozenset[str]:
    return frozenset("".join(p)[:MAX_LENGTH] for p in itertools.islice(
        itertools.product(*parts), MAX_VALUES + 1))


def _percent(fmt: str, args: ast.AST, v) -> str:
    """``fmt % args``, with :data:`HOLE` for what is not known."""
    items = args.elts if isinstance(args, ast.Tuple) else [args]
    known = [v(a) for a in items]
    if all(len(k) == 1 for k in known):
        try:
            return fmt % tuple(next(iter(k)) for k in known)
        except (TypeError, ValueError, KeyError):
            pass
    return _PCT_SPEC.sub(lambda m: "%" if m.group() == "%%" else HOLE, fmt)


def _brace(fmt: str, call: ast.Call, v) -> str:
    """``fmt.format(...)``, with :data:`HOLE` for what is not known."""
    args = [v(a) for a in call.args]
    kwargs = {k.arg: v(k.value) for k in call.keywords if k.arg}
    if all(len(a) == 1 for a in args) and all(len(a) == 1 for a in kwargs.values()) and \
            len(kwargs) == len(call.keywords):
        try:
            return fmt.format(*(next(iter(a)) for a in args),
                              **{k: next(iter(a)) for k, a in kwargs.items()})
        except (IndexError, KeyError, ValueError, AttributeError):
            pass
    return _BRACE_SPEC.sub(HOLE, fmt.replace("{{", "\x01").replace("}}", "\x02")).replace(
        "\x01", "{").replace("\x02", "}")
