"""The mutation stats pass's test selection: which functions a patch changed, which tests the
baseline saw entering them, and the recorder that saw it (real pytest on the host)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proctor.patch import PatchSummary, TouchedPath
from proctor.suites import ReachMap
from proctor.suites.changed_code import changed_functions
from proctor.suites.mutation import stats_skip
from proctor.suites.reach import function_key, unreaching_tests

INCONTAINER = Path(__file__).resolve().parents[1] / "proctor/suites/incontainer"

BASE = '''\
import os
X = 1


def f(a, b=2):
    """Doc."""
    return a + b


class C:
    y = 3

    def m(self):
        def inner():
            return 1
        return inner()

    @property
    def p(self):
        return 1

    @p.setter
    def p(self, v):
        pass


try:
    import json
except ImportError:
    def dumps(x):
        return str(x)
'''


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("return a + b", "return a - b", {"f"}),
    ("return 1\n        return inner()", "return 2\n        return inner()", {"C.m"}),
    ("def p(self, v):\n        pass", "def p(self, v):\n        self.v = v", {"C.p"}),
    ("return str(x)", "return repr(x)", {"dumps"}),
    # reformatting and docstring quotes change no body
    ('"""Doc."""', "'''Doc.'''", set()),
    ("return a + b", "return (a\n            + b)  # sum", set()),
    # anything outside a function body: no selection
    ("X = 1", "X = 2", None),
    ("b=2", "b=3", None),
    ("y = 3", "y = 4", None),
    ("    @property\n", "", None),
    ("import os\n", "import os\n\n\ndef g():\n    return 0\n", None),
], ids=["body", "nested-def-body", "setter", "def-in-try", "docstring-quotes", "rewrap",
        "module-constant", "default", "class-attribute", "decorator", "new-function"])
def test_changed_functions(old, new, expected):
    assert old in BASE
    assert changed_functions(BASE, BASE.replace(old, new, 1)) == expected


def test_a_moved_function_or_an_unparsable_text_is_no_selection():
    moved = BASE.replace("def f(a, b=2):\n    \"\"\"Doc.\"\"\"\n    return a + b\n", "") + \
        "\n\ndef f(a, b=2):\n    \"\"\"Doc.\"\"\"\n    return a + b\n"
    assert changed_functions(BASE, moved) is None
    assert changed_functions(BASE, "def (:\n") is None


MAPS = {
    "public": ReachMap(tests=["t.py::a", "t.py::b", "t.py::c", "t.py::d"],
                       reach={"m.py::f": [0], "m.py::g": [1, 2]}, lost=["t.py::d"]),
    "hidden": ReachMap(tests=["h.py::x", "h.py::y", "h.py::y"],
                       reach={"m.py::g": [0]}),
}


def test_unreaching_tests_keeps_what_reaches_is_lost_or_ran_twice():
    assert unreaching_tests(MAPS, {"m.py::f"}) == ["h.py::x", "t.py::b", "t.py::c"]
    assert unreaching_tests(MAPS, {"m.py::g"}) == ["t.py::a"]
    assert unreaching_tests(MAPS, None) == [] and unreaching_tests({}, {"m.py::f"}) == []


def test_merged_maps_shift_the_later_session():
    a = ReachMap(tests=["x"], reach={"k": [0]})
    b = ReachMap(tests=["y", "z"], reach={"k": [1], "j": [0]}, lost=["y"])
    assert a.merged(b) == ReachMap(tests=["x", "y", "z"], reach={"k": [0, 2], "j": [1]},
                                   lost=["y"])


def _summary(*touched: tuple[str, str]) -> PatchSummary:
    return PatchSummary(touched=tuple(TouchedPath(p, k) for p, k in touched))


SRC = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
SRC_F = SRC.replace("return 1", "return 10")
SEL = {"public": ReachMap(tests=["tests/test_m.py::a", "tests/test_m.py::b"],
                          reach={function_key("pkg/m.py", "f"): [0],
                                 function_key("pkg/m.py", "g"): [1]})}


def test_stats_skip_leaves_out_tests_that_never_entered_the_changed_functions():
    texts = {"pkg/m.py": (SRC, SRC_F)}
    assert stats_skip(_summary(("pkg/m.py", "modified")), texts, ["tests/test_m.py"], SEL) \
        == (["tests/test_m.py::b"], None)
    # restored public tests and test modules the patch adds change nothing the trusted
    # tests run
    touched = _summary(("pkg/m.py", "modified"), ("tests/test_m.py", "modified"),
                       ("tests/test_new.py", "added"))
    assert stats_skip(touched, texts, ["tests/test_m.py"], SEL)[0] == ["tests/test_m.py::b"]


@pytest.mark.parametrize(("touched", "texts", "why"), [
    ((("pkg/m.py", "modified"),), {"pkg/m.py": (SRC, "X = 1\n" + SRC_F)},
     "code outside function bodies"),
    ((("pkg/m.py", "modified"), ("pkg/new.py", "added")), {"pkg/m.py": (SRC, SRC_F)},
     "pkg/new.py: added"),
    ((("pkg/m.py", "modified"), ("pkg/data.json", "modified")), {"pkg/m.py": (SRC, SRC_F)},
     "pkg/data.json: modified"),
    ((("pkg/m.py", "modified"), ("tests/conftest.py", "added")), {"pkg/m.py": (SRC, SRC_F)},
     "tests/conftest.py: added"),
    ((("pkg/m.py", "modified"), ("tests/helpers_test.py", "modified")),
     {"pkg/m.py": (SRC, SRC_F)}, "tests/helpers_test.py: modified"),
    ((("pkg/m.py", "modified"),), {"pkg/m.py": (SRC, None)}, "code outside function bodies"),
    ((("pkg/m.py", "modified"),), {"pkg/m.py": (SRC, SRC.replace("return 2", "return 3")
                                                 .replace("def g", "def h"))},
     "code outside function bodies"),
], ids=["module-level", "new-module", "data-file", "conftest", "unrestored-test-module",
        "patched-text-unknown", "renamed"])
def test_stats_skip_keeps_every_test_when_the_change_is_not_only_function_bodies(
        touched, texts, why):
    skip, reason = stats_skip(_summary(*touched), texts, ["tests/test_m.py"], SEL)
    assert skip == [] and why in reason


def test_stats_skip_keeps_every_test_for_a_function_no_test_entered():
    # no test entered it on the pristine repository: a map that cannot see the module
    # (it was imported from elsewhere, say) must not leave every test out
    maps = {"public": ReachMap(tests=["tests/test_m.py::a"],
                               reach={function_key("pkg/m.py", "g"): [0]})}
    skip, why = stats_skip(_summary(("pkg/m.py", "modified")), {"pkg/m.py": (SRC, SRC_F)},
                           [], maps)
    assert skip == [] and "no test entered pkg/m.py::f" in why
    assert stats_skip(_summary(("pkg/m.py", "modified")), {"pkg/m.py": (SRC, SRC_F)}, [],
                      None) == ([], "no reach map in the baseline")


def test_stats_skip_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("PROCTOR_REACH_SELECTION", "0")
    skip, why = stats_skip(_summary(("pkg/m.py", "modified")), {"pkg/m.py": (SRC, SRC_F)},
                           [], SEL)
    assert skip == [] and "PROCTOR_REACH_SELECTION=0" in why


def test_the_recorder_in_a_real_pytest_session(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg/__init__.py").write_text("")
    (repo / "pkg/m.py").write_text(textwrap.dedent("""\
        import threading


        def f():
            return g() + 1


        def g():
            return 1


        class C:
            def m(self):
                return [h(i) for i in range(2)]


        def h(i):
            return i


        def in_thread():
            out = []
            t = threading.Thread(target=lambda: out.append(h(5)))
            t.start()
            t.join()
            return out
    """))
    (repo / "tests").mkdir()
    (repo / "tests/helpers.py").write_text("def helper():\n    return 1\n")
    (repo / "tests/test_m.py").write_text(textwrap.dedent("""\
        import sys

        import pytest

        from pkg.m import C, f, g, in_thread


        @pytest.fixture
        def value():
            return g()


        def test_f():
            assert f() == 2


        def test_fixture(value):
            assert value == 1


        def test_method():
            assert C().m() == [0, 1]


        def test_thread():
            assert in_thread() == [5]


        def test_nothing():
            assert 1


        def test_replaces_the_trace():
            sys.settrace(None)
            assert g() == 1
    """))
    out = tmp_path / "reach.json"
    driver = tmp_path / "drive.py"
    driver.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(INCONTAINER)!r})
        sys.path.insert(0, {str(repo)!r})
        import pytest, reach_recorder
        rec = reach_recorder.ReachRecorder({str(repo)!r}, {str(out)!r})
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_m.py"],
                             plugins=[rec]))
    """))
    done = subprocess.run([sys.executable, str(driver)], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    got = ReachMap.model_validate(json.loads(out.read_text()))
    ids = {t.rpartition("::")[2]: i for i, t in enumerate(got.tests)}
    assert set(ids) == {"test_f", "test_fixture", "test_method", "test_thread", "test_nothing",
                        "test_replaces_the_trace"}
    by_test = {name: {k for k, v in got.reach.items() if i in v} for name, i in ids.items()}
    assert by_test["test_f"] == {"pkg/m.py::f", "pkg/m.py::g"}
    assert by_test["test_fixture"] == {"pkg/m.py::g"}  # fixture setup counts
    assert by_test["test_method"] == {"pkg/m.py::C.m", "pkg/m.py::C.m.<locals>.<listcomp>",
                                      "pkg/m.py::h"}
    assert "pkg/m.py::h" in by_test["test_thread"]  # a thread the test started
    assert by_test["test_nothing"] == set()
    assert got.lost == ["tests/test_m.py::test_replaces_the_trace"]
    assert not any(k.startswith("tests/") for k in got.reach)  # test modules are no source
