"""Mutation score: the pure core (changed lines, choice, score), the task table, and the
mutmut hook, checked inside the sandbox image against the pinned mutmut.

The hook tests fail loudly when a mutmut upgrade moves what the adapter relies on
(``create_mutations(..., covered_lines=...)``, ``combine_mutations_to_source``, the
trampoline's process-local mutant slot, the stats hits, mutant naming).
"""

from __future__ import annotations

import ast
import json
import textwrap
import time

import pytest

from proctor.errors import TaskConfigError
from proctor.patch import PatchSummary, TouchedPath
from proctor.sandbox import SANDBOX_TOOLS, SandboxSpec
from proctor.suites import cannot_change_reward, select_mutants
from proctor.suites.mutation import (
    agent_test_files,
    changed_code_lines,
    changed_source_lines,
    contention,
    parse_runner_output,
    score_verdicts,
)
from proctor.task import MutationConfig, load_task

# --------------------------------------------------------------------------- pure core


def summary(lines: dict[str, list[int]], touched: list[tuple[str, str]] = ()) -> PatchSummary:
    return PatchSummary(touched=tuple(TouchedPath(p, k) for p, k in touched),
                        added_line_numbers=lines)


def test_changed_lines_only_in_sources_and_never_in_tests():
    s = summary({"pkg/a.py": [3, 1], "pkg/tests/test_a.py": [5], "pkg/b_test.py": [1],
                 "pkg/conftest.py": [1], "other/c.py": [2], "pkg/data.txt": [1],
                 "pkg/hidden_like.py": [4], "pkg/x.py": []})
    assert changed_source_lines(s, ["pkg"], ["pkg/hidden_like.py"]) == {"pkg/a.py": [1, 3]}


def test_changed_lines_source_prefix_is_a_directory_not_a_string_prefix():
    s = summary({"pkgx/a.py": [1], "pkg.py": [2]})
    assert changed_source_lines(s, ["pkg"], []) == {}
    assert changed_source_lines(s, ["pkg.py"], []) == {"pkg.py": [2]}


def test_deletion_only_patch_has_no_changed_lines():
    assert changed_source_lines(summary({}), ["pkg"], []) == {}


def test_changed_code_lines_drop_reformatted_lines_and_keep_what_cannot_be_read():
    base = "def f(a, b):\n    return a + b\n\n\ndef g(x):\n    return x\n"
    patched = "def f(a,\n      b):\n    return (a + b)\n\n\ndef g(x):\n    return x * 2\n"
    added = {"pkg/a.py": [1, 2, 3, 7], "pkg/new.py": [1, 2], "pkg/b.py": [4, 5],
             "pkg/c.py": [1]}
    texts = {"pkg/a.py": (base, patched), "pkg/new.py": (None, "# hi\nX = 1\n"),
             "pkg/b.py": (base, None), "pkg/c.py": (base, "# only a comment\n" + base)}
    assert changed_code_lines(added, texts) == {
        "pkg/a.py": [7], "pkg/new.py": [2], "pkg/b.py": [4, 5]}


def test_agent_test_files_are_new_or_edited_tests_outside_trusted_paths():
    s = summary({}, [("pkg/tests/test_new.py", "added"), ("pkg/tests/test_old.py", "modified"),
                     ("pkg/tests/test_pub.py", "modified"), ("pkg/tests/test_gone.py", "deleted"),
                     ("pkg/tests/conftest.py", "added"), ("pkg/core.py", "modified")])
    assert agent_test_files(s, ["pkg/tests/test_pub.py"]) == ["pkg/tests/test_new.py",
                                                             "pkg/tests/test_old.py"]


def test_select_mutants_is_seeded_and_keeps_generation_order():
    mutants = [{"name": f"m.x_f__mutmut_{i}"} for i in range(1, 101)]
    a = select_mutants(mutants, 30, seed=7)
    assert len(a) == 30 and a == select_mutants(list(reversed(mutants)), 30, seed=7)[::-1]
    assert [m["name"] for m in a] == [m["name"] for m in mutants if m in a]
    assert a != select_mutants(mutants, 30, seed=8)
    assert select_mutants(mutants[:5], 30, seed=7) == mutants[:5]


def test_score_timeouts_kill_untested_survive_crashes_dropped():
    score, counts = score_verdicts({"a": "killed", "b": "timeout", "c": "survived",
                                    "d": "no_tests", "e": "crashed", "f": "not_run"})
    assert score == 0.5
    assert counts == {"killed": 1, "timeout": 1, "survived": 1, "no_tests": 1, "crashed": 1,
                      "not_run": 1}
    assert score_verdicts({"a": "killed", "g": "unjudged"})[0] == 0.5  # the runner died
    assert score_verdicts({"e": "crashed"})[0] is None
    assert score_verdicts({})[0] is None


def test_contention_scales_timeouts_when_workers_outnumber_cpus():
    assert contention(1, 1.0) == 1.0
    assert contention(2, 2.0) == 1.0
    assert contention(4, 2.0) == 2.0
    assert contention(1, 4.0) == 1.0


def test_runner_output_parsing_ignores_half_lines():
    text = "\n".join([
        '{"started": {"pid": 1}}', '{"stats": {"tests": 3}}',
        '{"control": "m.x_f__mutmut_cab", "verdict": "survived"}',
        '{"mutant": "m.x_f__mutmut_1", "verdict": "killed"}', '{"done": {"duration_s": 0.1}}',
        '{"output": "no tests ran"}', '{"mutant": "m.x_f__mu'])
    stats, verdicts, control, started, done, output, forged = parse_runner_output(text)
    assert stats == {"tests": 3} and started and done == {"duration_s": 0.1}
    assert output == "no tests ran" and forged == 0
    assert list(verdicts) == ["m.x_f__mutmut_1"] and control["verdict"] == "survived"


def test_runner_lines_without_the_run_s_nonce_are_forged_not_believed():
    n = "abc123"
    text = "\n".join([
        '{"started": {"pid": 1}}', f'{{"stats": {{"tests": 3}}, "n": "{n}"}}',
        f'{{"mutant": "m.x_f__mutmut_1", "verdict": "survived", "n": "{n}"}}',
        '{"mutant": "m.x_f__mutmut_1", "verdict": "killed"}',  # no nonce
        '{"mutant": "m.x_f__mutmut_1", "verdict": "killed", "n": "guess"}',
        f'{{"done": {{"duration_s": 0.1}}, "n": "{n}"}}', "[1, 2]", "noise"])
    stats, verdicts, control, started, done, output, forged = parse_runner_output(text, n)
    assert forged == 2 and verdicts["m.x_f__mutmut_1"]["verdict"] == "survived"
    assert started and done == {"duration_s": 0.1} and stats == {"tests": 3}


def test_a_crashed_control_is_the_patch_s_failure_scored_zero_never_null():
    # every mutant and the control came back crashed (code under test that closed the
    # runner's descriptors): a null would re-share the weight, scoring like a full kill
    from types import SimpleNamespace

    from proctor.record import Evidence
    from proctor.suites.mutation import _judge

    n = "abc123"
    text = "\n".join([
        '{"started": {"pid": 1}}', f'{{"stats": {{"tests": 3}}, "n": "{n}"}}',
        f'{{"mutant": "m.x_f__mutmut_1", "verdict": "crashed", "n": "{n}"}}',
        f'{{"control": "m.x_f__mutmut_c1", "verdict": "crashed", "n": "{n}"}}',
        f'{{"done": {{"duration_s": 0.1}}, "n": "{n}"}}'])
    res = SimpleNamespace(command="runner", exit_code=0, duration_s=1.0, output=text,
                          timed_out=False, truncated=False)
    ev = Evidence(details={"timing": {}})
    got = _judge(text, res, [{"name": "m.x_f__mutmut_1"}], ev, 1.0, nonce=n)
    assert got.score == 0.0 and got.note.startswith("the control mutant (the original code) "
                                                    "crashed")
    assert not got.degraded and not got.tampered


def test_changed_lines_no_mutant_can_be_made_for_count_as_survivors():
    # each of the adapter's ``unmutated`` lines is one survived mutant, next to the
    # runner's verdicts, whatever sample of mutants was judged
    from types import SimpleNamespace

    from proctor.record import Evidence
    from proctor.suites.mutation import _judge

    n = "abc123"
    text = "\n".join([
        '{"started": {"pid": 1}}', f'{{"stats": {{"tests": 3}}, "n": "{n}"}}',
        f'{{"mutant": "m.x_f__mutmut_1", "verdict": "killed", "n": "{n}"}}',
        f'{{"mutant": "m.x_f__mutmut_2", "verdict": "killed", "n": "{n}"}}',
        f'{{"control": "m.x_f__mutmut_c1", "verdict": "survived", "n": "{n}"}}',
        f'{{"done": {{"duration_s": 0.1}}, "n": "{n}"}}'])
    res = SimpleNamespace(command="runner", exit_code=0, duration_s=1.0, output=text,
                          timed_out=False, truncated=False)
    chosen = [{"name": f"m.x_f__mutmut_{i}", "path": "m.py", "line": 3, "diff": "d"}
              for i in (1, 2)]
    unmutated = [{"path": "m.py", "line": 9, "function": "m.C.__new__",
                  "why": "mutmut never mutates __new__"}]
    got = _judge(text, res, chosen, Evidence(details={"timing": {}}), 1.0, nonce=n,
                 unmutated=unmutated)
    assert got.score == pytest.approx(2 / 3) and got.note is None
    assert got.counts == {"killed": 2, "unmutated": 1}
    [survivor] = got.evidence.details["survivors"]
    assert survivor["verdict"] == "unmutated" and survivor["line"] == 9
    assert survivor["why"] == "mutmut never mutates __new__"
    assert score_verdicts({"a": "unmutated"})[0] == 0.0


# --------------------------------------------------------------------------- task table


def test_mutation_table_defaults_and_validation():
    cfg = MutationConfig()
    assert (cfg.max_mutants, cfg.killers, cfg.timeout_s, cfg.seed) == (30, ["trusted"], 120.0, 0)
    with pytest.raises(ValueError):
        MutationConfig(killers=["agent"])
    with pytest.raises(ValueError):
        MutationConfig(max_mutants=0)
    with pytest.raises(ValueError):
        MutationConfig.model_validate({"max_mutant": 3})


def test_task_toml_mutation_typo_names_the_field(toolz_task, tmp_path):
    import shutil

    task = tmp_path / "task"
    shutil.copytree(toolz_task, task)
    with open(task / "task.toml", "a") as fh:
        fh.write("\n[mutation]\nmax_mutants = 5\nkillers = [\"trusted\", \"agent\"]\n")
    assert load_task(task).config.mutation.max_mutants == 5
    with open(task / "task.toml", "a") as fh:
        fh.write("budget = 3\n")
    with pytest.raises(TaskConfigError, match="mutation.budget"):
        load_task(task)


# --------------------------------------------------------------------------- the hook


HOOK_CHECK = r'''
import inspect, json, os, sys
sys.path.insert(0, "/proctor/harness")
import mutmut
import mutmut_adapter as a
from mutmut.mutation import file_mutation, trampoline
from mutmut.state import state
out = {"version": mutmut.__version__}
out["create_mutations"] = list(inspect.signature(file_mutation.create_mutations).parameters)
out["combine"] = list(inspect.signature(file_mutation.combine_mutations_to_source).parameters)
out["slot"] = hasattr(trampoline, "_mutant_under_test") and hasattr(state(), "_stats")
a.use_neutral_config()
code = open(sys.argv[1]).read()
lines = set(json.loads(sys.argv[2]))
new, infos = a.generate("pkg/calc.py", code, lines)
out["mutants"] = [(m["name"], m["line"]) for m in infos]
sys.path.insert(0, os.path.dirname(os.path.dirname(sys.argv[1])))
os.makedirs("/tmp/hook/pkg", exist_ok=True)
open("/tmp/hook/pkg/__init__.py", "w").close()
open("/tmp/hook/pkg/calc.py", "w").write(new)
sys.path.insert(0, "/tmp/hook")
import pkg.calc as calc
results = {}
for m in [None, "stats"] + [n for n, _ in out["mutants"]]:
    a.activate(m)
    try:
        results[str(m)] = repr(calc.clamp(5, 0, 3))
    except Exception as exc:
        results[str(m)] = type(exc).__name__
a.activate(None)
out["results"] = results
out["hits"] = sorted(a.take_hits())
out["env"] = os.environ.get("MUTANT_UNDER_TEST")
print(json.dumps(out))
'''

CALC = textwrap.dedent('''\
    LIMIT = 10 + 1


    def clamp(x, lo, hi):
        if x < lo:
            return lo
        if x > hi:  # pragma: no mutate
            return hi * 1
        return x


    def untouched(a, b):
        return a + b
''')


@pytest.mark.docker
def test_mutmut_hook_makes_mutants_only_on_the_given_lines(docker_ready):
    from proctor.sandbox import PYTHON, DockerSandbox
    from proctor.suites import install_harness

    with DockerSandbox(docker_ready) as sb:
        install_harness(sb)
        sb.put_files("/tmp/src/pkg", {"calc.py": CALC.encode(), "check.py": HOOK_CHECK.encode()})
        # lines 1 (module level), 7 (pragma added by the patch) and 8 of calc.py
        res = sb.run([PYTHON, "-I", "-B", "/tmp/src/pkg/check.py", "/tmp/src/pkg/calc.py",
                      "[1, 7, 8]"], timeout=60)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["version"] == SANDBOX_TOOLS["mutmut"]
    assert out["create_mutations"][:3] == ["filename", "code", "covered_lines"]
    assert out["combine"][:2] == ["module", "mutations"]
    assert out["slot"] is True
    names = [n for n, _ in out["mutants"]]
    assert {line for _, line in out["mutants"]} == {7, 8}, out["mutants"]  # never 1, 4, 5, 9
    assert names == [f"pkg.calc.x_clamp__mutmut_{i}" for i in range(1, len(names) + 1)]
    assert len(names) >= 2  # `>` -> `>=`, `hi * 1` -> `hi / 1`, ...
    # The original through the trampoline; each mutant switched on without the environment.
    assert out["results"]["None"] == out["results"]["stats"] == "3"
    assert any(out["results"][n] != "3" for n in names)
    assert out["hits"] == ["pkg.calc.x_clamp"] and out["env"] is None


# --------------------------------------------------------------------------- the step


TINY_TOML = """\
id = "tiny"
sources = ["pkg"]

[tests]
public = ["tests/test_core.py"]

[baseline]
runs = 1
"""
CORE_BASE = "import os\n\n\ndef spin(n):\n    return n\n\n\ndef leave(flag):\n    return 1\n"
CORE_PATCHED = textwrap.dedent("""\
    import os


    def spin(n):
        i = 0
        while i < n:
            i += 1
        return i


    def leave(flag):
        if flag > 0:
            os._exit(3)
        return 1
""")


def make_tiny_task(root, make_patch, base: str, patched: str, public: str, hidden: str):
    """A task ``pkg`` (``pkg/core.py`` = ``base``, one public and one hidden test file) in
    ``root`` and the patch turning ``base`` into ``patched``."""
    (root / "repo/pkg").mkdir(parents=True)
    (root / "repo/tests").mkdir()
    (root / "hidden/tests").mkdir(parents=True)
    (root / "task.toml").write_text(TINY_TOML)
    (root / "repo/pkg/__init__.py").write_text("")
    (root / "repo/pkg/core.py").write_text(base)
    (root / "repo/tests/test_core.py").write_text(public)
    (root / "hidden/tests/test_hidden.py").write_text(hidden)
    return load_task(root), make_patch(root / "repo", {"pkg/core.py": (base, patched)})


def run_step(image: str, task, patch: bytes, timeout: float, killers_after_s: float = 0.0):
    """Apply ``patch``, run both suites, then the mutation step with the tests that passed
    as killers (given ``killers_after_s`` seconds after the step asks for them, as a public
    run still going would). Returns (killers, MutationResult)."""
    from proctor.harness.integrity import ForbiddenRules, check_integrity
    from proctor.harness.pipeline import (
        SuiteRequest,
        open_patched_sandbox,
        run_hidden,
        run_public,
    )
    from proctor.harness.pipeline.workspace import kill_user_processes
    from proctor.suites import mutation

    summary, _ = check_integrity(patch.decode(), ForbiddenRules.for_task([]))
    sb, applied = open_patched_sandbox(task, SandboxSpec(image), patch)
    with sb:
        assert applied.applied
        runs = [run_public(sb, task, SuiteRequest(60)), run_hidden(sb, task, SuiteRequest(60))]
        killers = sorted(t for r in runs for t, o in r.outcomes.items() if o == "passed")
        kill_user_processes(sb)

        def later():
            time.sleep(killers_after_s)
            return killers

        return killers, mutation.run_mutation(sb, task, patch, "git_apply", summary, later,
                                              timeout=timeout, killers_wait_s=killers_after_s)


@pytest.mark.docker
def test_a_second_mutation_step_in_one_sandbox_is_an_infra_error_not_a_null(docker_ready,
                                                                          tiny_task):
    """The step's copy is made once per sandbox, at a fixed path: a second step there is
    the harness's fault (an unscored record), never a null blamed on mutmut, which would
    re-share the weight and raise the reward."""
    from proctor.errors import InfraError
    from proctor.harness.integrity import ForbiddenRules, check_integrity
    from proctor.harness.pipeline import open_patched_sandbox
    from proctor.suites import mutation

    task, patch = tiny_task
    summary, _ = check_integrity(patch.decode(), ForbiddenRules.for_task([]))
    killers = ["tests/test_core.py::test_spin", "tests/test_core.py::test_leave"]
    sb, applied = open_patched_sandbox(task, SandboxSpec(docker_ready), patch)
    with sb:
        assert applied.applied
        first = mutation.run_mutation(sb, task, patch, "git_apply", summary, killers,
                                      timeout=60)
        assert first.score is not None and not first.degraded, first.note
        with pytest.raises(InfraError, match="runs once per sandbox"):
            mutation.run_mutation(sb, task, patch, "git_apply", summary, killers, timeout=60)


@pytest.fixture
def tiny_task(tmp_path, toolz_make_task):
    return make_tiny_task(
        tmp_path / "tiny", toolz_make_task.make_patch, CORE_BASE, CORE_PATCHED,
        "from pkg.core import leave, spin\n\n\ndef test_spin():\n    assert spin(3) == 3\n\n\n"
        "def test_leave():\n    assert leave(False) == 1\n",
        "from pkg.core import spin\n\n\ndef test_spin_zero():\n    assert spin(0) == 0\n")


@pytest.mark.docker
def test_step_timeouts_kill_crashes_are_dropped_and_survivors_have_diffs(docker_ready, tiny_task):
    killers, res = run_step(docker_ready, *tiny_task, timeout=60)
    assert len(killers) == 3
    d = res.evidence.details
    assert res.degraded is False and res.note is None, (res.note, res.evidence.output)
    assert d["changed_lines"] == {"pkg/core.py": [5, 6, 7, 8, 12, 13]}
    assert d["control"]["verdict"] == "survived"
    assert res.counts["timeout"] >= 1  # `i += 1` -> `i -= 1` loops forever: counts as killed
    assert list(d["dropped"].values()) == ["crashed"]  # `flag >= 0`: os._exit in the child
    assert res.counts["survived"] >= 1  # `os._exit(3)` -> `os._exit(4)`: never reached
    killed = res.counts.get("killed", 0) + res.counts["timeout"]
    assert res.score == pytest.approx(killed / (killed + res.counts["survived"]))
    assert all(s["diff"].startswith("--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ ")
               for s in d["survivors"])


#: Code in package ``__init__`` files: the package itself (a function, a method, an untested
#: function), a nested package re-exported with ``from .sub import scale``, and a sibling that
#: imports from its package with ``from . import add`` and is imported at the end of
#: ``pkg/__init__.py`` (``from . import api``).
INIT_BASE = textwrap.dedent('''\
    """Code in a package __init__."""
    from __future__ import annotations

    from .sub import scale

    __all__ = ["Acc", "add", "scale", "untested"]


    def add(a, b):
        return a - b


    def untested(x):
        return x


    class Acc:
        def __init__(self):
            self.total = 0

        def push(self, x):
            self.total = self.total - x
            return self


    from . import api  # noqa: E402
''')
INIT_PATCHED = (INIT_BASE.replace("return a - b", "return a + b")
                .replace("    return x\n", "    return x + 1\n")
                .replace("self.total - x", "self.total + x"))
INIT_FILES = {
    "pkg/sub/__init__.py": ("def scale(x, k):\n    return x / k\n",
                            "def scale(x, k):\n    return x * k\n"),
    "pkg/api.py": ("from . import add\n\n\ndef run(a, b):\n    return add(a, b)\n", None),
    "pkg/__init__.py": (INIT_BASE, INIT_PATCHED),
}


@pytest.mark.docker
def test_mutants_in_package_inits_are_judged_like_any_module(docker_ready, tmp_path,
                                                              toolz_make_task):
    """Mutants in ``pkg/__init__.py`` and ``pkg/sub/__init__.py`` (imported by the session
    before any mutant is active, reached through re-exports) are killed by the tests that
    reach them; only the untested function's two mutants survive (no test reaches it)."""
    root = tmp_path / "inits"
    (root / "repo/tests").mkdir(parents=True)
    (root / "hidden/tests").mkdir(parents=True)
    (root / "task.toml").write_text(TINY_TOML)
    for rel, (base, _patched) in INIT_FILES.items():
        (root / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "repo" / rel).write_text(base)
    (root / "repo/tests/test_core.py").write_text(
        "from pkg import Acc, scale\nfrom pkg.api import run\n\n\n"
        "def test_run():\n    assert run(2, 3) == 5\n\n\n"
        "def test_acc():\n    assert Acc().push(2).push(3).total == 5\n\n\n"
        "def test_scale():\n    assert scale(2, 3) == 6\n")
    (root / "hidden/tests/test_hidden.py").write_text(
        "import pkg\n\n\ndef test_add():\n    assert pkg.add(1, 1) == 2\n")
    patch = toolz_make_task.make_patch(root / "repo", {
        rel: (base, patched) for rel, (base, patched) in INIT_FILES.items() if patched})
    killers, res = run_step(docker_ready, load_task(root), patch, timeout=60)
    assert len(killers) == 4
    d = res.evidence.details
    assert res.note is None and res.degraded is False, (res.note, res.evidence.output)
    assert d["changed_lines"] == {"pkg/__init__.py": [10, 14, 22], "pkg/sub/__init__.py": [2]}
    assert d["control"]["verdict"] == "survived"
    # add: 1, push: 2 (`+` -> `-`, the assignment -> None), scale: 1; untested: 2
    assert res.counts == {"killed": 4, "no_tests": 2}
    assert sorted((s["line"], s["verdict"]) for s in d["survivors"]) == [(14, "no_tests")] * 2
    assert res.score == pytest.approx(4 / 6)


#: State the tests leave behind must not reach the mutants: an upstream test that deletes a
#: module attribute (humanize's i18n test deletes ``i18n.__file__``), and a cache the tests
#: fill that would hide a mutant of the computation behind it.
LEAK_BASE = "CONFIG = {'sep': '-'}\n\n\ndef join(a, b):\n    return a + b\n"
LEAK_PATCHED = "CONFIG = {'sep': '-'}\n\n\ndef join(a, b):\n    return a + CONFIG['sep'] + b\n"
CACHE_BASE = "_CACHE = {}\n\n\ndef offset(hours):\n    return hours * 60\n"
CACHE_PATCHED = ("_CACHE = {}\n\n\ndef offset(hours):\n    if hours not in _CACHE:\n"
                 "        _CACHE[hours] = hours * 60 + 1\n    return _CACHE[hours]\n")


@pytest.mark.docker
def test_what_the_stats_pass_leaves_behind_never_reaches_the_mutants(
        docker_ready, tmp_path, toolz_make_task):
    task, patch = make_tiny_task(
        tmp_path / "leak", toolz_make_task.make_patch, LEAK_BASE, LEAK_PATCHED,
        "import pkg.core\nfrom pkg.core import join\n\n\ndef test_join():\n"
        "    assert join('a', 'b') == 'a-b'\n\n\ndef test_forget_config():\n"
        "    del pkg.core.CONFIG\n",
        "from pkg.core import join\n\n\ndef test_join_empty():\n"
        "    assert join('', '') == '-'\n")
    _, res = run_step(docker_ready, task, patch, timeout=90)
    d = res.evidence.details
    # the control (the original code) survives: the deletion stayed in the stats child
    assert d["control"]["verdict"] == "survived", d["control"]
    assert res.note is None and res.score is not None and res.score > 0.5


@pytest.mark.docker
def test_a_cache_filled_by_the_stats_pass_hides_no_mutant(docker_ready, tmp_path,
                                                         toolz_make_task):
    task, patch = make_tiny_task(
        tmp_path / "cache", toolz_make_task.make_patch, CACHE_BASE, CACHE_PATCHED,
        "from pkg.core import offset\n\n\ndef test_one():\n    assert offset(1) == 61\n",
        "from pkg.core import offset\n\n\ndef test_two():\n    assert offset(2) == 121\n")
    _, res = run_step(docker_ready, task, patch, timeout=90)
    d = res.evidence.details
    assert d["control"]["verdict"] == "survived"
    # every mutant of the computation behind the cache is killed by the tests that call it
    survivors = [s["diff"].splitlines()[-1] for s in d["survivors"]]
    assert not any("hours * 60 + 1" not in line and "_CACHE[hours] =" in line
                   for line in survivors), survivors
    assert res.counts.get("killed", 0) >= 3, res.counts


ADD_BASE = "def add(a, b):\n    return a - b\n"
ADD_PATCHED = "def add(a, b):\n    return a + b\n"


@pytest.mark.docker
def test_a_kill_by_a_test_that_may_not_kill_is_judged_again_with_the_killers(
        docker_ready, tmp_path, toolz_make_task):
    """The runner judges mutants before the suites' verdicts arrive, with every test that
    passes in its own sandbox. ``test_env`` fails in the public run (no hidden directory
    yet) but passes there (the hidden tests were placed since): its kills are speculative
    and never stand; each mutant ends killed by a trusted test or judged again."""
    task, patch = make_tiny_task(
        tmp_path / "spec", toolz_make_task.make_patch, ADD_BASE, ADD_PATCHED,
        "import glob\n\nfrom pkg.core import add\n\n\ndef test_env():\n"
        "    assert glob.glob('/proctor/h-*')\n    assert add(2, 3) == 5\n\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n",
        "from pkg.core import add\n\n\ndef test_add_zero():\n    assert add(0, 4) == 4\n")
    killers, res = run_step(docker_ready, task, patch, timeout=90, killers_after_s=4.0)
    assert "tests/test_core.py::test_env" not in killers
    d = res.evidence.details
    assert d["stats"]["speculative"] is True
    assert res.score is not None and res.note is None, res.note
    assert res.counts.get("killed", 0) >= 1
    # the kills that stood are the killers' (a forged one would void the step)
    assert not res.tampered


@pytest.mark.docker
def test_a_test_reading_stdin_in_the_mutation_session_reads_an_empty_input(
        docker_ready, tmp_path, toolz_make_task):
    """The killers come on the runner's stdin after its session started: a test that reads
    stdin (in the suites' runs pytest's capture refuses the read; the mutation session runs
    with ``-s``) must find it empty, never take them."""
    task, patch = make_tiny_task(
        tmp_path / "stdin", toolz_make_task.make_patch, ADD_BASE, ADD_PATCHED,
        "import pytest\n\nfrom pkg.core import add\n\n\ndef test_add():\n"
        "    with pytest.raises((OSError, EOFError)):\n        input()\n"
        "    assert add(1, 2) == 3\n",
        "from pkg.core import add\n\n\ndef test_add_zero():\n    assert add(0, 4) == 4\n")
    killers, res = run_step(docker_ready, task, patch, timeout=90)
    assert "tests/test_core.py::test_add" in killers
    assert res.score == 1.0 and res.note is None
    assert res.evidence.details["control"]["verdict"] == "survived"


#: ``add`` sleeps past the control's timeout in the first mutant child of the runner only
#: (a load spike's stand-in), or in every mutant child (code that hangs under mutation
#: testing; not in the stats pass, where the trampolines record hits).
HANG_BASE = "import os\nimport time\n\n\ndef add(a, b):\n    return a - b\n"
HANG_PATCHED = textwrap.dedent("""\
    import os
    import time


    def _mutating():
        try:
            import mutmut_adapter
        except ImportError:
            return False
        return mutmut_adapter.trampoline._mutant_under_test not in (None, "stats")


    def add(a, b):
        if _mutating() and {when}:
            open("/tmp/hang-marker", "a").close()
            time.sleep(6)
        return a + b
""")


@pytest.mark.waits
@pytest.mark.docker
@pytest.mark.parametrize("when,control,score", [
    ('not os.path.exists("/tmp/hang-marker")', "survived", None),  # a spike: retried
    ("True", "timeout", 0.0),  # hangs whenever mutated: the retry times out too
])
def test_control_timing_out_once_is_retried_but_hanging_twice_voids_the_step(
        docker_ready, tmp_path, toolz_make_task, monkeypatch, when, control, score):
    from proctor.suites import mutation

    task, patch = make_tiny_task(
        tmp_path / "hang", toolz_make_task.make_patch, HANG_BASE, HANG_PATCHED.format(when=when),
        "from pkg.core import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "from pkg.core import add\n\n\ndef test_add_zero():\n    assert add(0, 4) == 4\n")
    monkeypatch.setattr(mutation, "control_position", lambda n, rng: 0)  # first fork
    killers, res = run_step(docker_ready, task, patch, timeout=90)
    assert len(killers) == 2
    d = res.evidence.details
    assert d["control"]["verdict"] == control and d["control"]["retried"] is True
    # the retry's timeout is 4x the first one: 4 x (10 x the tests' seconds + 1 s) x the
    # machine's contention, at least 4 s; a loaded machine only adds to it
    assert 4.0 <= d["control"]["timeout_s"] <= 8.0, d["control"]
    if score == 0.0:
        assert res.score == 0.0 and "control mutant" in res.note
    else:  # judged on its mutants like any other step
        assert res.score is not None and res.score > 0 and res.note is None


def test_control_choices_are_seeded_from_the_patch_and_the_task():
    """Same patch and task: same control function and position (same record); another
    patch or another task (its hidden tests changed): another draw."""
    from proctor.suites.mutation import control_position, control_rng

    def draw(sha, fingerprint):
        rng = control_rng(sha, fingerprint)
        return rng.choice("abcdefghij"), control_position(30, rng)

    same = {draw("a" * 64, "f" * 64) for _ in range(5)}
    assert len(same) == 1
    draws = {draw(f"{i:064x}", "f" * 64) for i in range(40)}
    assert len(draws) > 20
    assert {draw("a" * 64, f"{i:064x}") for i in range(40)} != same
    assert all(0 <= control_position(3, control_rng(f"{i}", "t")) <= 3 for i in range(200))
    assert {control_position(3, control_rng(f"{i}", "t")) for i in range(200)} == {0, 1, 2, 3}


def test_runner_resolves_a_module_name_guessed_with_the_wrong_layout():
    runner = _runner_module()
    covering = {"pkg.mod.x_f": [1], "other.x_f": [2], "pkg.mod.x_g": [3]}
    assert runner.resolve("pkg.mod.x_f", covering) == "pkg.mod.x_f"
    assert runner.resolve("lib.pkg.mod.x_f", covering) == "pkg.mod.x_f"
    assert runner.resolve("mod.x_g", covering) == "pkg.mod.x_g"
    assert runner.resolve("nowhere.x_h", covering) == "nowhere.x_h"


def _runner_module():
    import importlib.util

    from proctor.suites import INCONTAINER

    spec = importlib.util.spec_from_file_location("mutation_runner_t",
                                                  INCONTAINER / "mutation_runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner


@pytest.mark.parametrize(("control_says", "settle", "judged"), [
    ("K tests/test_a.py::test_x", True, ["m.x_f__mutmut_control"]),  # killed: decided
    ("", True, ["m.x_f__mutmut_control"]),  # crashed (no verdict): decided
    ("S", True, ["m.x_f__mutmut_control", "m.x_f__mutmut_1", "m.x_f__mutmut_2"]),
    # a speculative pass: its verdicts may be redone with the killers, so none decides
    ("K tests/test_a.py::test_x", False,
     ["m.x_f__mutmut_control", "m.x_f__mutmut_1", "m.x_f__mutmut_2"]),
])
def test_a_control_whose_verdict_decides_the_step_ends_the_run(control_says, settle, judged):
    """The control killed or crashed scores the step 0.0 whatever else is judged: the
    runner writes no verdict after it (real forked children, one at a time)."""
    import os

    runner = _runner_module()
    says = {"m.x_f__mutmut_control": control_says, "m.x_f__mutmut_1": "K t::a",
            "m.x_f__mutmut_2": "S"}

    class Session(runner.MutationSession):
        def fork(self, name, tests):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child answers as a mutant's child would, then ends
                os.write(w, says[name].encode())
                os._exit(0)
            os.close(w)
            return r, pid

    out = []
    session = Session({"workers": 1, "timeout_factor": 10, "timeout_constant": 5,
                       "contention": 1}, adapter=None, out=out.append)
    queue = [{"name": "m.x_f__mutmut_control", "function": "m.x_f", "control": True},
             {"name": "m.x_f__mutmut_1", "function": "m.x_f"},
             {"name": "m.x_f__mutmut_2", "function": "m.x_f"}]
    session.run_mutants(queue, {"m.x_f": [[0.1, 0, None]]}, 60.0, settle=settle)
    assert [line.get("control") or line.get("mutant") for line in out[:-1]] == judged
    assert "done" in out[-1]
    assert runner.settles(queue[0], "timeout") is False  # a first timeout is retried
    assert runner.settles(dict(queue[0], retry=True), "timeout") is True
    assert runner.settles(queue[1], "killed") is False  # only the control decides


# ----------------------------------------------------------- skipped when it cannot matter


def _suite(f2p_total: int, f2p_passed: int, p2p_total: int, p2p_failed: int):
    from proctor.record import SuiteTests

    return SuiteTests(f2p_total=f2p_total, f2p_passed=f2p_passed, p2p_total=p2p_total,
                      p2p_failed=p2p_failed)


_NO_PROGRESS_CASES = [  # (public, hidden): no FAIL_TO_PASS passes
    (_suite(2, 0, 5, 0), _suite(3, 0, 4, 0)),
    (_suite(0, 0, 5, 0), _suite(3, 0, 4, 0)),  # public a pure regression guard, intact
    (_suite(0, 0, 5, 2), _suite(3, 0, 4, 0)),  # the guard broken: its penalty is nominal
    (_suite(2, 0, 0, 0), _suite(0, 0, 0, 0)),
    (_suite(2, 0, 5, 0), _suite(3, 0, 4, 1)),  # a credit suite broke a PASS_TO_PASS test
    (_suite(2, 0, 5, 5), _suite(3, 0, 4, 4)),  # every PASS_TO_PASS test broke (hang)
    (_suite(2, 0, 5, 3), None),  # the hidden suite absent: its weight re-shared
]


@pytest.mark.parametrize("public,hidden", _NO_PROGRESS_CASES)
@pytest.mark.parametrize("mutation", [0.0, 0.37, 1.0])
@pytest.mark.parametrize("others", [dict(compiled=1.0, static_analysis=0.5),
                                    dict(compiled=None, static_analysis=None),
                                    dict(compiled=0.0, static_analysis=None)])
@pytest.mark.parametrize("diff_lines,indicators", [(0, {}), (40, {"tests_weakened": 1.0}),
                                                    (7, {"suspicious_code": 0.5})])
def test_skipping_mutation_without_progress_leaves_the_total_bit_identical(
        public, hidden, mutation, others, diff_lines, indicators):
    from proctor.record import Measurements
    from proctor.rewards import Weights, compute_reward

    suites = {k: v for k, v in (("public", public), ("hidden", hidden)) if v is not None}
    assert cannot_change_reward(suites)
    common = dict(suites=suites, diff_lines=diff_lines, penalty_indicators=indicators,
                  **others)
    measured = compute_reward(Measurements(mutation_score=mutation, **common), Weights())
    skipped = compute_reward(Measurements(mutation_score=None, **common), Weights())
    assert skipped.total == measured.total  # bit-identical, not approximately
    assert skipped.progress == measured.progress == 0.0
    assert skipped.weights == measured.weights  # nothing re-shared for the null


@pytest.mark.parametrize("suites", [
    {"public": _suite(2, 1, 5, 0), "hidden": _suite(3, 0, 4, 0)},  # progress on public
    {"public": _suite(2, 0, 5, 0), "hidden": _suite(3, 1, 4, 1)},  # progress on hidden
    {"public": _suite(0, 0, 5, 0), "hidden": _suite(0, 0, 4, 0)},  # no credit suite at all
])
def test_mutation_is_measured_when_it_could_change_the_reward(suites):
    assert not cannot_change_reward(suites)


def test_with_progress_a_null_mutation_still_reshares_its_weight():
    """With progress the quality terms count, and a null (no mutant on the changed lines)
    re-shares its weight: the total differs from any measured value's."""
    from proctor.record import Measurements
    from proctor.rewards import Weights, compute_reward

    suites = {"public": _suite(2, 1, 5, 0), "hidden": _suite(3, 0, 4, 1)}
    null = compute_reward(Measurements(suites=suites, mutation_score=None), Weights())
    assert null.weights["mutation_score"] == 0.0
    totals = {compute_reward(Measurements(suites=suites, mutation_score=v), Weights()).total
              for v in (0.0, 0.5, 1.0)}
    assert len(totals) == 3 and null.total not in totals


#: ``unittest.TestCase`` tests record failures on the item instead of raising, and
#: subtests (``self.subTest``, pytest's ``subtests`` fixture) fail without the test
#: function raising: mutants of ``add``/``mul``/``sq`` are killed by them; ``neg`` is
#: reached only by a test that asserts nothing, so its mutants survive.
UT_BASE = ("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\n"
           "def sq(x):\n    return x + x\n\n\ndef neg(x):\n    return x\n")
UT_PATCHED = (UT_BASE.replace("a - b", "a + b").replace("return a + b\n\n\ndef sq",
                                                          "return a * b\n\n\ndef sq")
              .replace("x + x", "x * x").replace("    return x\n", "    return -x\n"))
UT_PUBLIC = textwrap.dedent("""\
    import unittest

    from pkg.core import add, mul, neg, sq


    class TestAdd(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)


    class TestMul(unittest.TestCase):
        def test_mul(self):
            for a, b, want in [(1, 1, 1), (2, 3, 6)]:
                with self.subTest(a=a, b=b):
                    self.assertEqual(mul(a, b), want)


    class TestNeg(unittest.TestCase):
        def test_neg_runs(self):
            neg(3)

        @unittest.expectedFailure
        def test_neg_is_identity(self):
            self.assertEqual(neg(2), 2)

        def test_skipped(self):
            self.skipTest("not here")


    def test_sq(subtests):
        for x, want in [(2, 4), (3, 9)]:
            with subtests.test(x=x):
                assert sq(x) == want
""")


@pytest.mark.docker
def test_unittest_failures_and_subtest_failures_kill_mutants(docker_ready, tmp_path,
                                                              toolz_make_task):
    task, patch = make_tiny_task(tmp_path / "ut", toolz_make_task.make_patch, UT_BASE,
                                 UT_PATCHED, UT_PUBLIC,
                                 "from pkg.core import add\n\n\ndef test_h():\n"
                                 "    assert add(1, 1) == 2\n")
    killers, res = run_step(docker_ready, task, patch, timeout=60)
    assert killers == sorted([
        "tests/test_core.py::TestAdd::test_add", "tests/test_core.py::TestMul::test_mul",
        "tests/test_core.py::TestNeg::test_neg_runs", "tests/test_core.py::test_sq",
        "tests/test_hidden.py::test_h"]), killers
    d = res.evidence.details
    assert res.note is None and res.degraded is False, (res.note, res.evidence.output)
    assert d["control"]["verdict"] == "survived"
    lines = {m["line"]: m["verdict"] for m in d["survivors"]}
    assert set(lines) == {14} and set(lines.values()) == {"survived"}, d["survivors"]
    # add, mul (through its subTest), sq (through the subtests fixture): killed; neg: not
    assert res.counts == {"killed": 3, "survived": 1}
    assert res.score == pytest.approx(0.75)


#: A class that goes through mutmut one touched method at a time (decorated, a header over
#: three lines, a docstring, an attribute, a nested class, an async method) and one that
#: cannot be split (its body starts on its header line): the mutants and their diffs are
#: those of the whole class, and the rendered module runs every mutant.
BIG_CLASS = textwrap.dedent('''\
    import functools


    def tag(cls):
        return cls


    @tag
    class Engine(
        object,
    ):
        """Doc."""

        limit = 3

        class Inner:
            def f(self):
                return 1

        def join(self, words, sep=", "):
            if len(words) > self.limit:
                return sep.join(words[:self.limit])
            return sep.join(words)

        @functools.cache
        def cached(self, x):
            return x * 2

        async def later(self, x):
            return x - 1

        def plural(self, n):
            return "s" if n != 1 else ""


    class One: x = 1; y = 2  # noqa: E701,E702


    def top(a):
        return a + 1
''')
SPLIT_CHECK = r'''
import asyncio, json, sys
sys.path.insert(0, "/proctor/harness")
import mutmut_adapter as a
a.use_neutral_config()
code = open(sys.argv[1]).read()
lines = set(json.loads(sys.argv[2]))
new, infos, errors, unmutated = a.generate_all({"pkg/big.py": (code, lines)})
a._method_parts = lambda *args: None  # every class whole
whole, whole_infos, _, whole_unmutated = a.generate_all({"pkg/big.py": (code, lines)})
sys.path.insert(0, "/tmp/split")
import os
os.makedirs("/tmp/split/pkg", exist_ok=True)
open("/tmp/split/pkg/__init__.py", "w").close()
open("/tmp/split/pkg/big.py", "w").write(new["pkg/big.py"])
import pkg.big as big
results = {}
for m in [None] + [i["name"] for i in infos]:
    a.activate(m)
    e = big.Engine()
    try:
        results[str(m)] = [e.join(["a", "b", "c", "d"]), e.plural(1), e.plural(2),
                           asyncio.run(e.later(5)), e.cached(2), big.top(1), big.One.y]
    except Exception as exc:
        results[str(m)] = type(exc).__name__
a.activate(None)
print(json.dumps({"infos": infos, "whole": whole_infos, "errors": errors,
                  "unmutated": [unmutated, whole_unmutated],
                  "same_text": new == whole, "results": results}))
'''


@pytest.mark.docker
def test_methods_of_a_class_are_mutated_alone_with_the_whole_class_s_mutants(docker_ready):
    from proctor.sandbox import PYTHON, DockerSandbox
    from proctor.suites import install_harness

    src = BIG_CLASS.splitlines()
    body = [i for i, line in enumerate(src, 1) if "return" in line or "if len" in line]
    with DockerSandbox(docker_ready) as sb:
        install_harness(sb)
        sb.put_files("/tmp/src", {"big.py": BIG_CLASS.encode(), "check.py": SPLIT_CHECK.encode()})
        res = sb.run([PYTHON, "-I", "-B", "/tmp/src/check.py", "/tmp/src/big.py",
                      json.dumps(body)], timeout=120)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["errors"] == []
    key = [(i["name"], i["line"], i["diff"]) for i in out["infos"]]
    assert key == [(i["name"], i["line"], i["diff"]) for i in out["whole"]]
    # the nested class's method: no trampoline (mutmut's scope ends at the methods of
    # top-level classes), so its changed line counts as not killed
    nested = {"path": "pkg/big.py", "line": 18, "function": "pkg.big.Engine.Inner.f",
              "why": "a method of a nested class: mutmut has no trampoline for it"}
    assert out["unmutated"] == [[nested], [nested]]
    funcs = sorted({i["function"] for i in out["infos"]})
    # the decorated method gets a trampoline under its decorator (mutmut alone skips it)
    assert funcs == ["pkg.big.x_top", "pkg.big.xǁEngineǁcached", "pkg.big.xǁEngineǁjoin",
                     "pkg.big.xǁEngineǁlater", "pkg.big.xǁEngineǁplural"]
    assert [(i["name"], i["line"]) for i in out["infos"]
            if "cached" in i["name"]] == [("pkg.big.xǁEngineǁcached__mutmut_1", 27),
                                          ("pkg.big.xǁEngineǁcached__mutmut_2", 27)]
    assert out["results"]["None"] == ["a, b, c", "", "s", 4, 4, 2, 2]
    changed = [n for n, r in out["results"].items() if n != "None"
               and r != out["results"]["None"]]
    # 16 mutants; all but two of join's change a result of these calls (cached's: `x / 2`
    # and `x * 3` through functools.cache)
    assert len(out["infos"]) == 16 and len(changed) == 14
    assert out["results"]["pkg.big.xǁEngineǁcached__mutmut_1"][4] == 1.0


#: Decorated functions of every common shape (mutmut alone skips them all): a cache, a
#: registry decorator with arguments over several lines, one that records the function and
#: returns None, one that calls it at import, ``singledispatch`` and two ``register``-ed
#: ``_``, a decorator applied to another, a property's getter and setter, ``@classmethod`` and
#: ``@staticmethod`` over a cache, a name-mangled method; a compiler decorator (``jit``) and
#: ``__new__``, which get no mutant.
DECORATED = textwrap.dedent('''\
    import functools

    ROUTES = {}
    SEEN = []


    def route(path, *, methods=("GET",)):
        def register(fn):
            ROUTES[path] = (tuple(methods), fn)
            return fn
        return register


    def remember(fn):
        SEEN.append(fn)


    def call_now(fn):
        return fn()


    def jit(fn):
        return fn


    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) + 1000
        return wrapper


    @functools.cache
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)


    @route(
        "/total",
        methods=["GET", "POST"],
    )
    def total(items: list[int], start: int = 0) -> int:
        """Sum of items from start."""
        return sum(items) + start


    @remember
    def shout(word):
        return word.upper() + "!"


    @call_now
    def LIMIT():
        return 60 * 60


    @functools.singledispatch
    def describe(x):
        return "thing"


    @describe.register
    def _(x: int):
        return f"int {x + 1}"


    @describe.register
    def _(x: list):
        return f"list of {len(x) * 1}"


    @jit
    def fast(x):
        return x * 2


    @logged
    def base(x):
        return x - 1


    class Temperature:
        def __new__(cls, *args):
            return super().__new__(cls)

        def __init__(self, celsius=0.0):
            self._c = celsius

        @property
        def fahrenheit(self):
            """Degrees Fahrenheit."""
            return self._c * 9 / 5 + 32

        @fahrenheit.setter
        def fahrenheit(self, value):
            self._c = (value - 32) * 5 / 9

        @classmethod
        @functools.cache
        def boiling(cls, unit):
            return 100 if unit == "C" else 212

        @staticmethod
        @functools.lru_cache(maxsize=None)
        def scale(x):
            return x * 10

        def __round(self, x):
            return round(x, 1)

        def shown(self):
            return self.__round(self._c + 0.04)
\
''')
#: The functions of DECORATED whose body lines the patch changed.
DECORATED_CHANGED = {"fib", "total", "shout", "LIMIT", "describe", "_", "fast", "base",
                     "logged", "__new__", "__init__", "fahrenheit", "boiling", "scale",
                     "__round", "shown"}
DECORATED_CHECK = r'''
import importlib.util, inspect, json, os, sys
sys.path.insert(0, "/proctor/harness")
import mutmut_adapter as a
a.use_neutral_config()
code = open(sys.argv[1]).read()
lines = set(json.loads(sys.argv[2]))
new, infos, errors, unmutated = a.generate_all({"pkg/deco.py": (code, lines)})
a._method_parts = lambda *args: None  # every class whole
_, whole, _, _ = a.generate_all({"pkg/deco.py": (code, lines)})
root = "/tmp/deco_check"
os.makedirs(f"{root}/pkg", exist_ok=True)
open(f"{root}/pkg/__init__.py", "w").close()
open(f"{root}/pkg/deco.py", "w").write(new["pkg/deco.py"])
spec = importlib.util.spec_from_file_location("deco_original", sys.argv[1])
orig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(orig)
sys.path.insert(0, root)
import pkg.deco as mutated


def calls(m):
    hot, cold = m.Temperature(100.0), m.Temperature()
    cold.fahrenheit = 212
    return [m.fib(12), m.ROUTES["/total"][1]([1, 2], start=3), m.ROUTES["/total"][0],
            m.total([4]), m.SEEN[0]("hi"), m.shout, m.LIMIT, m.describe(1),
            m.describe([1, 2]), m.describe("s"), m.fast(2), m.base(5), m.logged(abs)(-2),
            hot.fahrenheit, round(cold._c, 6), m.Temperature.boiling("F"),
            m.Temperature.scale(3), hot.shown()]


def looks(m):
    t = m.Temperature
    return [m.total.__name__, m.total.__qualname__, m.total.__doc__,
            repr(m.total.__annotations__), str(inspect.signature(m.total)),
            t.fahrenheit.__doc__, t.fahrenheit.fget.__qualname__,
            t.fahrenheit.fset.__qualname__, t.boiling.__qualname__, t.scale.__name__,
            sorted(k.__name__ for k in m.describe.registry), m.fib.cache_info().maxsize,
            m.base.__name__, m.base.__wrapped__.__name__]


def run(name):
    """calls() of the mutated module with ``name`` active, in a fork (as the runner
    judges each mutant): a cache filled by one never reaches another."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        a.activate(name)
        try:
            out = json.dumps(calls(mutated), default=repr)
        except Exception as exc:
            out = json.dumps(type(exc).__name__)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    return json.loads(os.read(r, 1 << 20).decode())


print(json.dumps({
    "errors": errors, "unmutated": unmutated,
    "same_as_whole": [(i["name"], i["line"], i["diff"]) for i in infos]
    == [(i["name"], i["line"], i["diff"]) for i in whole],
    "original": json.loads(json.dumps(calls(orig), default=repr)),
    "looks": [looks(orig), looks(mutated)],
    "results": {str(n): run(n) for n in [None, "stats"] + [i["name"] for i in infos]},
    "infos": infos,
}))
'''


def _body_lines(code: str, names: set[str]) -> list[int]:
    """Body lines of the top-level functions and methods named in ``names``."""
    out = []
    for node in ast.parse(code).body:
        funcs = node.body if isinstance(node, ast.ClassDef) else [node]
        for f in funcs:
            if isinstance(f, ast.FunctionDef) and f.name in names:
                out.extend(range(f.body[0].lineno, f.end_lineno + 1))
    return out


@pytest.mark.docker
def test_decorated_functions_get_trampolines_that_behave_like_the_original(docker_ready):
    """Each decorated function's decorators wrap its trampoline: the module imports, the
    original through the trampolines gives the same results and the same metadata
    (``__doc__``, ``__annotations__``, the signature, what ``singledispatch`` registered),
    the registry holds the trampoline, and a mutant of each function changes a result, in a
    fork each as the runner judges them, but the one computed at import. The compiler-
    decorated function and ``__new__`` get none: their lines are ``unmutated``."""
    from proctor.sandbox import PYTHON, DockerSandbox
    from proctor.suites import install_harness

    lines = _body_lines(DECORATED, DECORATED_CHANGED)
    with DockerSandbox(docker_ready) as sb:
        install_harness(sb)
        sb.put_files("/tmp/src", {"deco.py": DECORATED.encode(),
                                  "check.py": DECORATED_CHECK.encode()})
        res = sb.run([PYTHON, "-I", "-B", "/tmp/src/check.py", "/tmp/src/deco.py",
                      json.dumps(lines)], timeout=120)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["errors"] == [] and out["same_as_whole"] is True
    src = DECORATED.splitlines()
    assert [(u["line"], u["function"], u["why"].split(",")[0]) for u in out["unmutated"]] == [
        (src.index("    return x * 2") + 1, "pkg.deco.fast", "decorated with @jit"),
        (src.index("        return super().__new__(cls)") + 1, "pkg.deco.Temperature.__new__",
         "mutmut never mutates __new__")]
    base = out["original"]
    assert base == [144, 6, ["GET", "POST"], 4, "HI!", None, 3600, "int 2", "list of 2",
                    "thing", 4, 1004, 1002, 212.0, 100.0, 212, 30, 100.0]
    assert out["results"]["None"] == out["results"]["stats"] == base
    assert out["looks"][1] == out["looks"][0]
    counts: dict[str, int] = {}
    changes: dict[str, set[int]] = {}
    for info in out["infos"]:
        f = info["function"].removeprefix("pkg.deco.")
        counts[f] = counts.get(f, 0) + 1
        got = out["results"][info["name"]]
        changes.setdefault(f, set()).update(
            range(len(base)) if not isinstance(got, list) else
            (i for i, (x, y) in enumerate(zip(got, base, strict=True)) if x != y))
    assert counts == {
        "x_logged": 4, "x_fib": 11, "x_total": 2, "x_shout": 3, "x_LIMIT": 3,
        "x_describe": 2, "x__": 2, "x__ǀ2": 2, "x_base": 2, "xǁTemperatureǁ__init__": 1,
        "xǁTemperatureǁfahrenheit": 6, "xǁTemperatureǁfahrenheitǀ2": 7,
        "xǁTemperatureǁboiling": 7, "xǁTemperatureǁscale": 2, "xǁTemperatureǁ__round": 5,
        "xǁTemperatureǁshown": 3}
    assert changes.pop("x_LIMIT") == set()  # computed once at import, by the original
    assert all(changes.values()), changes
    # each reached through what its decorators made of it
    assert 0 in changes["x_fib"]  # functools.cache
    assert 1 in changes["x_total"]  # the route registry's entry
    assert 4 in changes["x_shout"]  # the list it was recorded in (the name is None)
    assert {7, 8} <= changes["x__"] | changes["x__ǀ2"]  # singledispatch's registry
    assert 11 in changes["x_base"] and 12 in changes["x_logged"]
    assert 13 in changes["xǁTemperatureǁfahrenheit"]  # property getter
    assert 14 in changes["xǁTemperatureǁfahrenheitǀ2"]  # its setter
    assert 15 in changes["xǁTemperatureǁboiling"] and 16 in changes["xǁTemperatureǁscale"]
    assert 17 in changes["xǁTemperatureǁ__round"]


#: A patch whose every change is inside decorated functions (a cached function, a
#: property's getter and setter), and the same patch with a no-op decorator added to each
#: (``@passthrough``, a ``functools.wraps`` wrapper): mutmut alone made no mutant for either
#: and the step was a null whose weight the other components shared.
DECO_BASE = textwrap.dedent('''\
    import functools


    def passthrough(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper


    @functools.cache
    def shipping(weight):
        return 5


    class Box:
        def __init__(self, grams=0):
            self.grams = grams

        @property
        def kilos(self):
            return self.grams / 1000

        @kilos.setter
        def kilos(self, value):
            self.grams = value * 1000
''')
DECO_PATCHED = (DECO_BASE
                .replace("    return 5\n", "    if weight > 10:\n"
                         "        return 5 + weight // 10\n    return 5\n")
                .replace("return self.grams / 1000", "return round(self.grams / 1000, 1)")
                .replace("self.grams = value * 1000", "self.grams = int(value * 1000)"))
DECO_NOOP = (DECO_PATCHED.replace("@functools.cache\ndef shipping",
                                  "@functools.cache\n@passthrough\ndef shipping")
             .replace("    @property\n", "    @property\n    @passthrough\n")
             .replace("    @kilos.setter\n", "    @kilos.setter\n    @passthrough\n"))
DECO_PUBLIC = textwrap.dedent("""\
    from pkg.core import Box, shipping


    def test_shipping():
        assert shipping(1) == 5
        assert shipping(30) == 8


    def test_kilos():
        box = Box(1234)
        assert box.kilos == 1.2
        box.kilos = 2.5
        assert box.grams == 2500
""")
DECO_HIDDEN = ("from pkg.core import shipping\n\n\ndef test_shipping_edges():\n"
               "    assert shipping(10) == 5\n    assert shipping(11) == 6\n")


@pytest.mark.docker
@pytest.mark.parametrize("patched", [DECO_PATCHED, DECO_NOOP], ids=["decorated", "noop_added"])
def test_changes_inside_decorated_functions_are_measured_and_a_noop_decorator_hides_none(
        docker_ready, tmp_path, toolz_make_task, patched):
    task, patch = make_tiny_task(tmp_path / "deco", toolz_make_task.make_patch, DECO_BASE,
                                 patched, DECO_PUBLIC, DECO_HIDDEN)
    killers, res = run_step(docker_ready, task, patch, timeout=90)
    assert len(killers) == 3
    d = res.evidence.details
    assert res.note is None and res.degraded is False, (res.note, res.evidence.output)
    assert d["control"]["verdict"] == "survived"
    assert "unmutated" not in d
    bodies = ("    if weight > 10:", "        return 5 + weight // 10",
              "        return round(self.grams / 1000, 1)",
              "        self.grams = int(value * 1000)")
    changed = [n for n, t in enumerate(patched.splitlines(), 1) if t in bodies]
    added = [n for n, t in enumerate(patched.splitlines(), 1) if t.strip() == "@passthrough"]
    # the decorator lines added are changed code too, with no mutant of their own
    assert d["changed_lines"] == {"pkg/core.py": sorted(changed + added)}
    assert len(changed) == 4 and len(added) == (3 if patched is DECO_NOOP else 0)
    # shipping: 6 mutants, the getter: 7, the setter: 4, all killed through the cache, the
    # property and its setter, with or without @passthrough, but `/ 1000` -> `/ 1001`,
    # which round(..., 1) hides
    assert res.counts == {"killed": 16, "survived": 1}
    assert res.score == pytest.approx(16 / 17)
    [survivor] = d["survivors"]
    assert survivor["line"] == changed[2]
    assert survivor["diff"].endswith("+    return round(self.grams / 1001, 1)")



#: The patch's only change is in code no mutant can be made for: ``__new__`` (mutmut never
#: mutates it), a function under a compiler decorator (a stand-in ``jit``) and one defined
#: under a module-level ``if`` (mutmut trampolines only what is at the top of the module).
UNMUTABLE_BASE = textwrap.dedent('''\
    def jit(fn):
        return fn


    @jit
    def area(w, h):
        return w + h


    class Point:
        def __new__(cls, x=0):
            self = super().__new__(cls)
            self.x = x
            return self


    if True:
        def perimeter(w, h):
            return w + h + w
''')
UNMUTABLE_PATCHED = (UNMUTABLE_BASE.replace("return w + h\n", "return w * h\n")
                     .replace("self.x = x", "self.x = abs(x)")
                     .replace("return w + h + w", "return 2 * (w + h)"))


@pytest.mark.docker
def test_changes_no_mutant_can_be_made_for_score_zero_never_null(docker_ready, tmp_path,
                                                                 toolz_make_task):
    task, patch = make_tiny_task(
        tmp_path / "unmutable", toolz_make_task.make_patch, UNMUTABLE_BASE,
        UNMUTABLE_PATCHED, "from pkg.core import area\n\n\ndef test_area():\n"
        "    assert area(2, 3) == 6\n",
        "from pkg.core import Point, perimeter\n\n\ndef test_point():\n"
        "    assert Point(-2).x == 2\n    assert perimeter(1, 2) == 6\n")
    _, res = run_step(docker_ready, task, patch, timeout=60)
    d = res.evidence.details
    assert res.score == 0.0 and res.degraded is False
    assert res.note.startswith("no mutants on the changed lines: 3 changed line(s) no mutant "
                               "can be made for count as survived")
    assert res.counts == {"unmutated": 3}
    assert [(u["line"], u["function"]) for u in d["unmutated"]] == [
        (7, "pkg.core.area"), (13, "pkg.core.Point.__new__"), (19, "pkg.core.perimeter")]
    assert [s["verdict"] for s in d["survivors"]] == ["unmutated"] * 3
