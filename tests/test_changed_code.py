"""Which added lines hold changed code (proctor.suites.changed_code), with honest controls:
reformatting, comments and moved code count for nothing; real changes count on the lines
the patch added for them."""

from __future__ import annotations

import difflib
import textwrap

from proctor.suites.changed_code import changed_lines


def added(base: str, patched: str) -> set[int]:
    """Line numbers (in ``patched``) a unified diff of the two texts adds."""
    out = set()
    sm = difflib.SequenceMatcher(None, base.splitlines(), patched.splitlines(), autojunk=False)
    for op, _i1, _i2, j1, j2 in sm.get_opcodes():
        if op in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


def judged(base: str, patched: str) -> set[int]:
    return changed_lines(base, patched, added(base, patched))


BASE = textwrap.dedent('''\
    """Module doc."""
    import os

    LIMIT = 10


    def clamp(x, lo=0, hi=LIMIT):
        """Clamp x."""
        if x < lo:
            return lo
        return min(x, hi)


    def describe(items, sep=', '):
        return sep.join(str(item) for item in items if item is not None)


    class Box:
        size = 3

        @staticmethod
        def make(n):
            return Box() if n else None
''')


def test_quote_style_change_counts_nothing():
    patched = BASE.replace("sep=', '", 'sep=", "').replace('"""Clamp x."""', "'''Clamp x.'''")
    assert added(BASE, patched) == {8, 14}
    assert judged(BASE, patched) == set()


def test_rewrapped_call_and_extra_parentheses_count_nothing():
    patched = BASE.replace(
        "    return sep.join(str(item) for item in items if item is not None)\n",
        "    return sep.join(\n"
        "        str(item)\n"
        "        for item in items\n"
        "        if (item is not None)\n"
        "    )\n")
    assert len(added(BASE, patched)) == 5
    assert judged(BASE, patched) == set()


def test_added_comments_and_blank_lines_count_nothing():
    patched = BASE.replace("    if x < lo:\n",
                           "    # the lower bound first\n\n    if x < lo:  # below\n")
    assert patched.count("    if x < lo:  # below\n") == 1
    assert added(BASE, patched) == {9, 10, 11}
    assert judged(BASE, patched) == set()


def test_moved_unchanged_function_counts_nothing():
    base = BASE
    start, end = base.index("def describe"), base.index("class Box")
    moved = base[:start] + base[end:] + "\n\n" + base[start:end].rstrip() + "\n"
    assert changed_lines(base, moved, added(base, moved)) == set()
    assert added(base, moved)  # the diff does add lines: the function's new place


def test_a_real_change_in_a_wrapped_statement_counts_its_added_lines_only():
    base = textwrap.dedent('''\
        def total(rows):
            count = 0
            value = sum(
                row.price
                * row.qty
                for row in rows
            )
            return value
    ''')
    patched = base.replace("        * row.qty\n", "        * row.qty\n        - row.discount\n")
    assert added(base, patched) == {6}
    assert changed_lines(base, patched, added(base, patched)) == {6}
    # the whole statement rewritten, but only the operator changed: every added line of it
    rewrapped = base.replace("    value = sum(\n        row.price\n        * row.qty\n",
                             "    value = sum(row.price\n                * row.qty\n"
                             "                + 0\n")
    assert added(base, rewrapped) == {3, 4, 5}
    assert changed_lines(base, rewrapped, added(base, rewrapped)) == {3, 4, 5}


def test_changed_constants_in_decorator_default_and_class_attribute_count():
    base = textwrap.dedent('''\
        import functools


        @functools.lru_cache(maxsize=32)
        def fib(n, start=0):
            return n if n < 2 else fib(n - 1) + fib(n - 2)


        class Conf:
            retries = 3
            name = "x"
    ''')
    patched = (base.replace("maxsize=32", "maxsize=64").replace("start=0", "start=1")
               .replace("retries = 3", "retries = 4"))
    assert changed_lines(base, patched, added(base, patched)) == {4, 5, 10}
    # the decorator change alone, every line of the def given: the header's lines (the
    # decorator and the `def` line: one unit) count, the untouched body does not
    only_decorator = base.replace("maxsize=32", "maxsize=64")
    assert changed_lines(base, only_decorator, {4, 5, 6}) == {4, 5}


def test_an_edit_deep_in_an_if_marks_that_statement_not_the_if():
    patched = BASE.replace("        return lo\n", "        return lo + 1\n")
    assert judged(BASE, patched) == {10}
    header = BASE.replace("    if x < lo:\n", "    if x <= lo:\n")
    assert judged(BASE, header) == {9}


def test_reordered_statements_count_the_moved_ones():
    base = "def f(a):\n    x = g(a)\n    y = h(a)\n    return x, y\n"
    patched = "def f(a):\n    y = h(a)\n    x = g(a)\n    return x, y\n"
    # order is meaning: the statement the alignment could not keep in place counts
    result = changed_lines(base, patched, added(base, patched))
    assert result in ({2}, {3}) and len(result) == 1


def test_a_new_file_keeps_its_added_code_lines():
    text = '"""Doc."""\n\n# helper\nX = 1\n\n\ndef f():\n    return X\n'
    assert changed_lines(None, text, set(range(1, 9))) == {1, 4, 7, 8}


def test_unparsable_texts_fall_back_to_the_added_code_lines():
    good = "def f():\n    return 1\n"
    broken = "def f(:\n    return 1\n# note\n\n"
    assert changed_lines(good, broken, {1, 2, 3, 4}) == {1, 2}
    assert changed_lines("def (:\n", good, {1, 2}) == {1, 2}
    assert changed_lines("x = 1\0\n", good, {1, 2}) == {1, 2}


def test_new_renamed_and_moved_into_class_definitions_count():
    base = "def f():\n    return 1\n\n\nclass C:\n    pass\n"
    renamed = base.replace("def f()", "def g()")
    assert changed_lines(base, renamed, {1}) == {1}
    into_class = "class C:\n    def f():\n        return 1\n"
    assert changed_lines(base, into_class, {2, 3}) == {2, 3}


def test_docstring_and_string_prefix():
    base = 'def f():\n    """Old."""\n    return u"x"\n'
    assert changed_lines(base, base.replace("Old", "New"), {2}) == {2}
    assert changed_lines(base, base.replace('u"x"', "'x'"), {3}) == set()


def test_try_handlers_and_match_cases_are_units():
    base = textwrap.dedent('''\
        def f(v):
            try:
                return int(v)
            except ValueError:
                return 0
            finally:
                pass


        def g(v):
            match v:
                case 1:
                    return "one"
                case _:
                    return "many"
    ''')
    handler = base.replace("except ValueError:", "except (ValueError, TypeError):")
    assert changed_lines(base, handler, {4}) == {4}
    case = base.replace('return "many"', 'return "other"')
    assert changed_lines(base, case, {15}) == {15}
    requoted = base.replace('"one"', "'one'")
    assert changed_lines(base, requoted, {13}) == set()


def test_docstrings_reindented_by_a_formatter_count_nothing():
    base = 'def f():\n    """Title.\n\n        Indented more.\n    """\n    return 1\n'
    patched = 'def f():\n    """Title.\n\n    Indented more.\n    """\n    return 1\n'
    assert changed_lines(base, patched, {4}) == set()
    assert changed_lines(base, patched.replace("more", "less"), {4}) == {4}
