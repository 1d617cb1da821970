"""embed_tripwire (pure): a must-fail test hidden in one of the hidden test modules. Run with
real pytest on the host: it always fails, and it changes no other test's outcome or id."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.suites import EmbeddedTripwire, embed_tripwire

HIDDEN = {
    "tests/test_alpha.py": b'''import pytest

from mylib import double


@pytest.fixture
def base():
    return 21


def test_double_base(base):
    """doc"""
    value = double(base)
    assert value == 42


@pytest.mark.parametrize("n", [1, 2])
def test_double_param(n):
    assert double(n) == 2 * n


def test_double_early_exit():
    if double(1) == 2:
        return
    assert False


class TestGroup:
    def test_inside(self):
        assert double(0) == 0
''',
    "tests/test_beta.py": b'''import unittest

from mylib import double


class T(unittest.TestCase):
    def test_negative_values(self):
        self.assertEqual(double(-1), -2)


def test_broken_on_purpose():
    assert double(2) == 5
''',
    "tests/helpers.py": b"def helper():\n    return 1\n",
    "tests/data.txt": b"not python\n",
}
LIB = "def double(x):\n    return 2 * x\n"


def _outcomes(root: Path, files: dict[str, bytes]) -> dict[str, str]:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "mylib.py").write_text(LIB)
    plugin = root / "collect_outcomes.py"
    plugin.write_text(
        "import json\nOUT = {}\n\ndef pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' or report.outcome != 'passed':\n"
        "        OUT[report.nodeid] = OUT.get(report.nodeid) if OUT.get(report.nodeid) "
        "not in (None, 'passed') else report.outcome\n\n"
        "def pytest_sessionfinish(session):\n"
        "    open('outcomes.json', 'w').write(json.dumps(OUT))\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "collect_outcomes",
                    "-p", "no:cacheprovider", "--import-mode=prepend", f"--rootdir={root}",
                    "tests"], cwd=root, capture_output=True, timeout=120,
                   env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    return json.loads((root / "outcomes.json").read_text())


def test_the_embedded_tripwire_fails_and_changes_nothing_else(tmp_path):
    honest = _outcomes(tmp_path / "before", HIDDEN)
    assert honest["tests/test_beta.py::test_broken_on_purpose"] == "failed"
    seen = set()
    for i in range(12):  # random module, donor, name and claim each time
        files, trip = embed_tripwire(HIDDEN)
        assert trip is not None and trip.module in ("tests/test_alpha.py", "tests/test_beta.py")
        assert _without(files[trip.module], trip.name) == _without(HIDDEN[trip.module], None)
        assert {k: v for k, v in files.items() if k != trip.module} == \
            {k: v for k, v in HIDDEN.items() if k != trip.module}
        words = trip.name[5:].split("_")
        assert all(w in {"double", "base", "param", "early", "exit", "inside", "negative",
                         "values", "broken", "on", "purpose"} for w in words), trip.name
        got = _outcomes(tmp_path / f"run{i}", files)
        trip_id = f"{trip.module}::{trip.name}"
        assert got.pop(trip_id) == "failed", files[trip.module].decode()
        assert got == honest
        seen.add(trip.module)
    assert len(seen) == 2


def _without(data: bytes, name: str | None) -> str:
    """The module's AST (no positions) without the function ``name``: what the module was."""
    tree = ast.parse(data)
    tree.body = [n for n in tree.body if name is None or getattr(n, "name", None) != name]
    return ast.dump(tree)


def _tripwire_source(files: dict[str, bytes], trip) -> str:
    text = files[trip.module].decode()
    fn = next(n for n in ast.parse(text).body if getattr(n, "name", None) == trip.name)
    return ast.get_source_segment(text, fn)


def test_a_donor_that_may_return_early_is_not_copied():
    files, trip = embed_tripwire({"test_x.py": b"def test_a():\n    if True:\n        return\n"})
    added = _tripwire_source(files, trip)
    assert "return" not in added
    assert sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(added))) == 1


SHARED_STATE = b"""\
import random

_SEEN = []
_CACHE: dict = {}
LIMIT = 3
WIDTH = 3
try:
    import numpy
except ImportError:
    numpy = None
for _k in range(2):
    _CACHE[_k] = _k


def test_first_call_only():
    _SEEN.append(1)
    assert len(_SEEN) == 1


def test_cache_untouched():
    assert _CACHE.pop(0, None) == 0


def test_counts_up():
    global LIMIT
    LIMIT += 1
    assert LIMIT == 4


def test_pure():
    assert sorted(random.sample(range(WIDTH), WIDTH)) == [0, 1, 2] and numpy in (None, numpy)
"""


def test_the_copy_never_changes_a_real_test_s_verdict_wherever_it_lands(tmp_path):
    # a donor body that touches the module's shared state would make the real test it
    # runs before fail (quarantined in the baseline, an honest patch's loss when scored)
    for seed in range(40):
        files, trip = embed_tripwire({"test_m.py": SHARED_STATE}, random.Random(seed))
        (tmp_path / "test_m.py").write_bytes(files["test_m.py"])
        namespace: dict = {"__file__": str(tmp_path / "test_m.py")}
        exec(compile(files["test_m.py"], "test_m.py", "exec"), namespace)
        tests = [n.name for n in ast.parse(files["test_m.py"]).body
                 if isinstance(n, ast.FunctionDef)]
        verdicts = {}
        for name in tests:
            try:
                namespace[name]()
                verdicts[name] = "passed"
            except AssertionError:
                verdicts[name] = "failed"
        assert verdicts.pop(trip.name) == "failed"
        assert set(verdicts.values()) == {"passed"}, (seed, verdicts)
        # only the stateless test can lend its body
        assert "_SEEN" not in _tripwire_source(files, trip)


def test_the_embedded_tripwire_is_not_always_its_modules_last_test():
    # code that spares "each hidden module's last test" must not find it
    places = set()
    for _ in range(40):
        files, trip = embed_tripwire({"test_m.py": HIDDEN["tests/test_alpha.py"]})
        names = [n.name for n in ast.parse(files["test_m.py"]).body
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        places.add(names.index(trip.name) == len(names) - 1)
    assert places == {True, False}


def test_nothing_to_hide_among():
    files = {"helpers.py": b"x = 1\n", "test_bad.py": b"def test_(:\n"}
    assert embed_tripwire(files) == (files, None)


@pytest.mark.parametrize("nodeid,hit", [("tests/test_a.py::test_x_y", True),
                                        ("tests/test_a.py::test_x_y[1]", False),
                                        ("other/tests/test_a.py::test_x_y", False)])
def test_matches_only_its_own_node_id(nodeid, hit):
    assert EmbeddedTripwire("tests/test_a.py", "test_x_y").matches(nodeid) is hit


def test_every_embedding_leaves_a_module_that_parses():
    """The new function alone is parsed (a 200 KB module is not parsed again on every
    score): over this repository's own test modules and many draws, the module with the
    tripwire parses whole, the tripwire is one of its top-level tests, and the rest of it
    is the module as it was."""
    import random

    corpus = sorted(Path(__file__).parent.glob("test_*.py"))
    assert len(corpus) > 40
    for i, path in enumerate(corpus):
        data = path.read_bytes()
        for seed in range(5):
            files, trip = embed_tripwire({path.name: data}, random.Random(i * 10 + seed))
            assert trip is not None
            tree = ast.parse(files[path.name])  # raises if the insertion broke the module
            assert trip.name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert _without(files[path.name], trip.name) == _without(data, None)


def test_odd_line_breaks_are_checked_on_the_whole_module():
    # a form feed counts as a line break for str.splitlines, not for the tokenizer: the
    # donor's lines would be misnumbered, so the whole module is parsed before it is used
    data = b"import os\n\x0c\ndef test_one():\n    x = 1\n    assert x\n\n\ndef test_two():\n" \
           b"    assert os\n"
    for seed in range(20):
        import random

        files, trip = embed_tripwire({"test_ff.py": data}, random.Random(seed))
        assert trip is not None
        ast.parse(files["test_ff.py"])


class _EqualToAll:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class _AnyInt(int):
    def __eq__(self, other):
        return isinstance(other, int)

    __hash__ = int.__hash__


def _rewire(monkeypatch, how: str | None) -> None:
    """What code under test could rewire so that tests decide wrongly: unittest's
    assertions, json loading of reference data, reading a test's own file."""
    import pathlib
    import unittest

    loads = json.loads
    rewire = {
        "assertEqual": (unittest.TestCase, "assertEqual", lambda self, a, b, msg=None: None),
        "assertTrue": (unittest.TestCase, "assertTrue", lambda self, x, msg=None: None),
        "json_equal_to_all": (json, "loads", lambda *a, **k: _EqualToAll()),
        "json_parse_int": (json, "loads", lambda s, **k: loads(s, parse_int=_AnyInt, **k)),
        "read_bytes": (pathlib.Path, "read_bytes", lambda self: b""),
        "read_text": (pathlib.Path, "read_text", lambda self, *a, **k: _EqualToAll()),
    }
    if how is not None:
        monkeypatch.setattr(*rewire[how])


@pytest.mark.parametrize("how", [None, "assertEqual", "assertTrue", "json_equal_to_all",
                                 "json_parse_int", "read_bytes", "read_text"])
def test_a_must_fail_tripwire_passes_once_unittest_json_or_file_reads_are_rewired(
        tmp_path, monkeypatch, how):
    from proctor.suites.pytest_runner import Tripwire

    module = b"import os\n\n\ndef test_a():\n    x = 1\n    assert x\n"
    trip = Tripwire.new()
    cases = [(trip.source(), trip.must_fail)]
    for seed in range(12):  # each false claim, module name and place
        files, embedded = embed_tripwire({"test_m.py": module}, random.Random(seed))
        cases.append((files["test_m.py"], embedded.name))
    for i, (source, name) in enumerate(cases):
        path = tmp_path / f"test_{i}.py"
        path.write_bytes(source)
        namespace = {"__file__": str(path), "__name__": f"test_{i}"}
        exec(compile(source, str(path), "exec"), namespace)
        with monkeypatch.context() as m:
            _rewire(m, how)
            try:
                namespace[name]()
                verdict = "passed"
            except AssertionError:
                verdict = "failed"
        # honest: every must-fail tripwire fails; rewired: it passes (the evidence)
        assert verdict == ("failed" if how is None else "passed"), source.decode()

