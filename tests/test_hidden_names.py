"""Hidden helper modules under random names (proctor.harness.pipeline.hidden_names, issue 4): which
files are helpers, where they go, and the exact rewrite of every import form."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from proctor.harness.pipeline.hidden_names import helper_units, rename_hidden_tree, rewrite_imports
from proctor.harness.pipeline.workspace import plan_hidden_tests
from proctor.task import load_task
from tests.redteam import mini_task

NAMES = {"helpers": "helpers_pX", "support": "support_pX"}


@pytest.mark.parametrize(("before", "after"), [
    ("import helpers\n", "import helpers_pX as helpers\n"),
    ("import helpers as h\n", "import helpers_pX as h\n"),
    ("import helpers.sub as h\n", "import helpers_pX.sub as h\n"),
    # ``import a.b`` binds ``a``: the new package is bound under the old name too.
    ("import helpers.sub\n", "import helpers_pX.sub, helpers_pX as helpers\n"),
    ("import helpers . sub  as  s\n", "import helpers_pX . sub  as  s\n"),
    ("import os, helpers, json\n", "import os, helpers_pX as helpers, json\n"),
    ("from helpers import x\n", "from helpers_pX import x\n"),
    ("from helpers.sub import (y,\n    z)\n", "from helpers_pX.sub import (y,\n    z)\n"),
    ("from \\\n    helpers import x\n", "from \\\n    helpers_pX import x\n"),
    ("from support.deep.er import y as w\n", "from support_pX.deep.er import y as w\n"),
    ("def f():\n    import support\n", "def f():\n    import support_pX as support\n"),
])
def test_every_import_form_is_rewritten_to_the_new_name(before, after):
    assert rewrite_imports(before.encode(), NAMES) == after.encode()
    assert len(after.splitlines()) == len(before.splitlines())


@pytest.mark.parametrize("source", [
    # relative imports reach helpers through their package, not by plain name
    "from . import helpers\nfrom .helpers import x\nfrom ..helpers.sub import y\n",
    # strings, comments, attribute names, other modules with a common prefix
    's = "import helpers"  # import helpers\nhelpers = 1\nprint(helpers, obj.helpers)\n',
    "import helpers2\nimport my_helpers\nfrom helpersx import y\nimport os.helpers\n",
    # ``yield from`` and ``raise from`` are not imports
    "def g():\n    yield from helpers.gen()\n    raise E from helpers.err\n",
])
def test_what_is_not_an_absolute_import_of_a_helper_is_unchanged(source):
    assert rewrite_imports(source.encode(), NAMES) == source.encode()


def test_only_the_name_tokens_change_in_a_realistic_file():
    src = (b'"""Uses helpers: import helpers."""\r\n'
           b"import pytest\r\n"
           b"from helpers import assert_sum  # helpers!\r\n"
           b"\r\n"
           b"\r\n"
           b"def test_x():\r\n"
           b'    assert_sum("helpers", 1)\r\n')
    assert rewrite_imports(src, NAMES) == src.replace(
        b"from helpers import", b"from helpers_pX import")


def test_non_ascii_text_before_the_import_keeps_offsets_right():
    src = 'x = "ünïcödé"; import helpers\n'.encode()
    assert rewrite_imports(src, NAMES) == 'x = "ünïcödé"; import helpers_pX as helpers\n'.encode()


def test_a_declared_source_encoding_is_kept():
    src = "# -*- coding: latin-1 -*-\nx = 'é'\nfrom helpers import y\n".encode("latin-1")
    assert rewrite_imports(src, NAMES) == (
        "# -*- coding: latin-1 -*-\nx = 'é'\nfrom helpers_pX import y\n".encode("latin-1"))
    bom = b"\xef\xbb\xbfimport helpers\n"
    assert rewrite_imports(bom, NAMES) == b"\xef\xbb\xbfimport helpers_pX as helpers\n"


@pytest.mark.parametrize("broken", [
    b"import helpers\ndef f(:\n",            # syntax error
    b"import helpers\nx = '\0'\n",           # null byte
    b"import helpers\nx = '\xff'\n",         # not UTF-8, no declaration
    b"# coding: no-such-codec\nimport helpers\n",
])
def test_a_file_that_does_not_parse_is_kept_verbatim(broken):
    assert rewrite_imports(broken, NAMES) == broken


def test_rewritten_files_still_parse_to_the_same_bindings():
    src = b"import helpers, helpers.sub\nfrom helpers.sub import y\n"
    tree = ast.parse(rewrite_imports(src, NAMES))
    bound = [a.asname or a.name for n in tree.body for a in n.names]
    assert bound == ["helpers", "helpers_pX.sub", "helpers", "y"]


TREE = {
    "conftest.py": b"import helpers\n",
    "tests/helpers.py": b"from support.m import s\n",
    "tests/test_a.py": b"from helpers import x\nfrom support import s\n",
    "tests/a_test.py": b"",
    "tests/conftest.py": b"",
    "tests/support/__init__.py": b"from support.m import s\nfrom . import m\n",
    "tests/support/m.py": b"s = 1\n",
    "tests/support/data/case.json": b"{}",
    "tests/pkg/__init__.py": b"",
    "tests/pkg/test_b.py": b"from tests.pkg.util import u\n",
    "tests/pkg/util.py": b"u = 1\n",           # a submodule of a package with tests
    "tests/pkg/sub/plain.py": b"",             # sub/: no __init__, holds a test: a root
    "tests/pkg/sub/test_c.py": b"import plain\n",
    "tests/ns/util.py": b"from ns import other\n",  # a namespace package of helpers
    "tests/ns/other.py": b"",
    "tests/data.json": b"{}",
    "tests/my-tool.py": b"",                   # not importable by name
    "tests/pkg/deep/mod.py": b"",              # in a package, holds no test: no root
}


def test_helpers_are_plain_modules_and_test_free_packages_of_import_roots():
    assert helper_units(TREE) == {
        "helpers": {"tests/helpers.py"},
        "ns": {"tests/ns/util.py", "tests/ns/other.py"},
        "plain": {"tests/pkg/sub/plain.py"},
        "support": {"tests/support/__init__.py", "tests/support/m.py",
                    "tests/support/data/case.json"},
    }


def test_renaming_a_tree_moves_helpers_and_rewrites_every_file():
    tree = rename_hidden_tree(TREE, "_p1a2b")
    assert tree.names == {"helpers": "helpers_p1a2b", "ns": "ns_p1a2b", "plain": "plain_p1a2b",
                          "support": "support_p1a2b"}
    moved = {old: new for old, new in tree.paths.items() if old != new}
    assert moved == {
        "tests/helpers.py": "tests/helpers_p1a2b.py",
        "tests/pkg/sub/plain.py": "tests/pkg/sub/plain_p1a2b.py",
        "tests/ns/util.py": "tests/ns_p1a2b/util.py",
        "tests/ns/other.py": "tests/ns_p1a2b/other.py",
        "tests/support/__init__.py": "tests/support_p1a2b/__init__.py",
        "tests/support/m.py": "tests/support_p1a2b/m.py",
        "tests/support/data/case.json": "tests/support_p1a2b/data/case.json",
    }
    assert tree.files == {
        **{p: d for p, d in TREE.items() if p not in moved},
        "conftest.py": b"import helpers_p1a2b as helpers\n",
        "tests/test_a.py": b"from helpers_p1a2b import x\nfrom support_p1a2b import s\n",
        "tests/helpers_p1a2b.py": b"from support_p1a2b.m import s\n",
        "tests/pkg/sub/plain_p1a2b.py": b"",
        "tests/pkg/sub/test_c.py": b"import plain_p1a2b as plain\n",
        "tests/ns_p1a2b/util.py": b"from ns_p1a2b import other\n",
        "tests/ns_p1a2b/other.py": b"",
        "tests/support_p1a2b/__init__.py": b"from support_p1a2b.m import s\nfrom . import m\n",
        "tests/support_p1a2b/m.py": b"s = 1\n",
        "tests/support_p1a2b/data/case.json": b"{}",
    }
    assert tree.helper_paths == set(moved)


def test_helpers_outside_every_import_root_keep_their_names():
    # tests/helpers/ holds no test: not on sys.path, so util.py is reached as helpers.util
    files = {"tests/test_a.py": b"from helpers.util import x\n",
             "tests/helpers/util.py": b"x = 1\n", "lib/only.py": b""}
    tree = rename_hidden_tree(files, "_p1")
    assert tree.names == {"helpers": "helpers_p1"}
    assert tree.files == {"tests/test_a.py": b"from helpers_p1.util import x\n",
                          "tests/helpers_p1/util.py": b"x = 1\n", "lib/only.py": b""}


def test_a_tree_without_helpers_is_unchanged():
    files = {"tests/test_a.py": b"import helpers\n", "tests/conftest.py": b""}
    tree = rename_hidden_tree(files, "_p1")
    assert (tree.files, tree.names, tree.helper_paths) == (files, {}, frozenset())


def test_a_suffix_that_breaks_identifiers_or_collides_is_refused():
    with pytest.raises(ValueError, match="identifiers"):
        rename_hidden_tree(TREE, "-x")
    with pytest.raises(ValueError, match="collides"):
        rename_hidden_tree({"test_a.py": b"", "h.py": b"", "h_p1.py": b""}, "_p1")


def test_plan_hidden_tests_renames_helpers_and_targets_only_the_rest(tmp_path):
    task_dir = mini_task.build(tmp_path / "t", lambda repo, edits: b"",
                               hidden=mini_task.HIDDEN_WITH_HELPER)
    task = load_task(task_dir)
    placed, files = plan_hidden_tests(task)
    assert placed.root.startswith("/proctor/h-")
    [new] = placed.renamed.values()
    assert placed.renamed == {"helpers": new} and new.startswith("helpers_p") and len(new) == 21
    assert placed.targets == ["conftest.py", "tests/test_hidden.py"]
    assert set(files) == {"conftest.py", f"tests/{new}.py", "tests/test_hidden.py"}
    hidden = Path(task.hidden)
    assert files["tests/test_hidden.py"] == (hidden / "tests/test_hidden.py").read_bytes(
        ).replace(b"from helpers import", f"from {new} import".encode())
    assert files[f"tests/{new}.py"] == (hidden / "tests/helpers.py").read_bytes()
    # a fresh name and a fresh directory every time
    again, _ = plan_hidden_tests(task)
    assert again.renamed != placed.renamed and again.root != placed.root
