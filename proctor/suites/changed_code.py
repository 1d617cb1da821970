"""Which added lines belong to code whose meaning changed: the lines mutation judges.

A patch's added lines include lines that only reformat code (quote style, re-wrapping,
parentheses, comments, blank lines, a function moved unchanged). Mutants there would judge
the tests on code the patch did not change. :func:`changed_lines` keeps an added line only
when the statement it belongs to differs, as an AST, from its counterpart in the base text.

Units and lines. The units are statements, ``except`` handlers and ``match`` cases. A line
belongs to the innermost unit whose span holds it (a ``def``'s or ``class``'s span starts at
its first decorator); a compound unit owns its header lines, ``else:``/``finally:`` lines
and anything between its children. A unit's *header* is its AST with its child blocks
(``body``, ``orelse``, ``finalbody``, ``handlers``, ``cases``) emptied, dumped with
``ast.dump(include_attributes=False)``: positions, comments, wrapping, parentheses and quote
style are not in it; string prefixes (``u"..."``) are dropped too. Docstrings are compared
as :func:`inspect.cleandoc` leaves them (what Python 3.13's compiler stores): formatters
re-indent them, which changes no meaning; a changed docstring text counts (mutmut makes no
mutant of it anyway).

Matching, block by block (a block: the statements of one body):

* ``def``/``async def``/``class`` match the base's definition of the same name in the
  corresponding block (the n-th of that name with the n-th), wherever it sits: moving a
  definition inside its block changes nothing. A definition with no counterpart (new,
  renamed, or moved to another block: into a class, say) is changed, all its lines.
* The other statements keep their order: the sequence of their full dumps is aligned with
  :class:`difflib.SequenceMatcher`. Equal runs are unchanged. In a replaced run, a compound
  statement pairs with the first unpaired base statement of that run with the same header
  (then its blocks are compared the same way); every other statement there is changed.
  So reordering statements changes the moved ones (order is meaning there), and an edit
  deep in an ``if`` changes only the edited statement, not the ``if``.

A matched definition whose header differs (a decorator, a default, a base class) is
changed on its header lines only; its body is compared on its own.

Pure; no code is run. A base or patched text that does not parse (``SyntaxError``,
``ValueError``: null bytes; ``RecursionError``: absurd nesting) falls back to the added lines,
less blank and comment-only ones.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import io
import tokenize
from collections import defaultdict, deque
from collections.abc import Iterable

from proctor.patch import ast_parse

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: Fields of a unit holding its child units.
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def changed_lines(base_text: str | None, patched_text: str, added_lines: set[int]
                  ) -> set[int]:
    """The lines of ``added_lines`` (1-based, numbered in ``patched_text``) that hold code
    whose statement changed from ``base_text`` (None: the file is new, so every added code
    line counts). Blank and comment-only lines never count. Falls back to the added code
    lines when either text does not parse. See the module docstring. Never raises."""
    code = _code_lines(patched_text)
    wanted = {n for n in added_lines if n in code}
    if not wanted:
        return set()
    try:
        new = _parse(patched_text)
        old = None if base_text is None else _parse(base_text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return wanted
    if old is None:
        return wanted
    owner = _owners(new)
    changed: set[int] = set()
    try:
        _compare_block(old.body, new.body, changed)
    except RecursionError:
        return wanted
    return {n for n in wanted if owner.get(n) in changed}


def _code_lines(text: str) -> set[int]:
    """Lines holding at least one token that is not a comment or a line break (a string
    spanning lines holds all of them). On a tokenizer error: the lines whose stripped text
    is neither empty nor starts with ``#``."""
    out: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in skip:
                out.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return {i for i, line in enumerate(text.splitlines(), 1)
                if line.strip() and not line.lstrip().startswith("#")}
    return out


def _parse(text: str) -> ast.Module:
    tree = ast_parse.parse(text)  # under the process-wide lock: see ast_parse
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            node.kind = None  # u"x" and "x" are the same string
        elif isinstance(node, (ast.Module, *_DEFS)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                first.value.value = inspect.cleandoc(first.value.value)
    return tree


def _blocks(node: ast.AST) -> list[list[ast.AST]]:
    return [getattr(node, f) for f in _BLOCK_FIELDS if isinstance(getattr(node, f, None), list)]


def _span(node: ast.AST) -> tuple[int, int]:
    if isinstance(node, ast.match_case):  # no positions of its own
        last = node.body[-1] if node.body else node.pattern
        return node.pattern.lineno, last.end_lineno
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    return start, node.end_lineno


def _owners(tree: ast.Module) -> dict[int, int]:
    """Line -> ``id`` of the innermost unit whose span holds it."""
    owner: dict[int, int] = {}
    todo = deque(tree.body)
    while todo:  # parents before their children, which overwrite their lines
        node = todo.popleft()
        start, end = _span(node)
        for n in range(start, end + 1):
            owner[n] = id(node)
        for block in _blocks(node):
            todo.extend(block)
    return owner


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _header(node: ast.AST) -> str:
    """The unit's dump with its child blocks emptied."""
    saved = {f: getattr(node, f) for f in _BLOCK_FIELDS if isinstance(getattr(node, f, None),
                                                                       list)}
    try:
        for f in saved:
            setattr(node, f, [])
        return type(node).__name__ + _dump(node)
    finally:
        for f, v in saved.items():
            setattr(node, f, v)


def _mark_all(nodes: Iterable[ast.AST], changed: set[int]) -> None:
    todo = list(nodes)
    while todo:
        node = todo.pop()
        changed.add(id(node))
        for block in _blocks(node):
            todo.extend(block)


def _compare_units(old: ast.AST, new: ast.AST, changed: set[int]) -> None:
    """``old`` and ``new`` are counterparts: mark ``new``'s header if it differs, then
    compare their blocks pairwise (a block that appeared or vanished is compared with an
    empty one)."""
    if _dump(old) == _dump(new):
        return
    if _header(old) != _header(new):
        changed.add(id(new))
    for f in _BLOCK_FIELDS:
        nb = getattr(new, f, None)
        if isinstance(nb, list):
            ob = getattr(old, f, None)
            _compare_block(ob if isinstance(ob, list) else [], nb, changed)


def _compare_block(old: list[ast.AST], new: list[ast.AST], changed: set[int]) -> None:
    old_defs: dict[str, list[ast.AST]] = defaultdict(list)
    for node in old:
        if isinstance(node, _DEFS):
            old_defs[node.name].append(node)
    seen: dict[str, int] = defaultdict(int)
    for node in new:
        if isinstance(node, _DEFS):
            k = seen[node.name]
            seen[node.name] += 1
            match = old_defs[node.name][k] if k < len(old_defs[node.name]) else None
            if match is None:
                _mark_all([node], changed)
            else:
                _compare_units(match, node, changed)
    old_rest = [n for n in old if not isinstance(n, _DEFS)]
    new_rest = [n for n in new if not isinstance(n, _DEFS)]
    sm = difflib.SequenceMatcher(None, [_dump(n) for n in old_rest],
                                 [_dump(n) for n in new_rest], autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        pool = old_rest[i1:i2]
        for node in new_rest[j1:j2]:
            head = _header(node) if _blocks(node) else None
            match = next((o for o in pool if head is not None and _blocks(o)
                          and _header(o) == head), None)
            if match is None:
                _mark_all([node], changed)
            else:
                pool.remove(match)
                _compare_units(match, node, changed)


def changed_functions(base_text: str, patched_text: str) -> set[str] | None:
    """The qualified names (``f``, ``Class.method``, as ``co_qualname`` has them) of the
    functions whose body differs between the two texts, when that is all that differs;
    None when anything outside function bodies differs (module- or class-level statements,
    a definition added, removed, moved, renamed, or its decorators, arguments, defaults or
    annotations changed) or a text does not parse. Functions defined inside a function's
    body belong to that function. Compared as :func:`changed_lines` compares statements
    (formatting, comments and docstring indentation are no change). Never raises."""
    try:
        old = _skeleton(_parse(base_text))
        new = _skeleton(_parse(patched_text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if old[0] != new[0]:
        return None
    return {name for name, bodies in new[1].items() if bodies != old[1].get(name)}


def _skeleton(tree: ast.Module) -> tuple[str, dict[str, list[str]]]:
    """(the module's dump with every function body outside a function emptied, qualified
    name -> the dumps of the bodies of the functions of that name, in order)."""
    bodies: dict[str, list[str]] = defaultdict(list)
    todo: deque[tuple[ast.AST, str]] = deque([(tree, "")])
    while todo:
        node, prefix = todo.popleft()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                bodies[name].append(ast.dump(ast.Module(body=child.body, type_ignores=[]),
                                             include_attributes=False))
                child.body = [ast.Pass()]
            elif isinstance(child, ast.ClassDef):
                todo.append((child, f"{prefix}{child.name}."))
            else:
                todo.append((child, prefix))
    return _dump(tree), dict(bodies)
