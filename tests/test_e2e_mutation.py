"""End to end on the toolz example: the mutation score of real patches in real containers.

The reference fix changes two lines of ``getter``; mutmut makes one mutant on each, and the
trusted tests kill both (1.0). The same fix plus an untested ``elif index is None`` branch
adds two more mutants: ``is None`` -> ``is not None`` is killed, ``lambda x: x`` ->
``lambda x: None`` survives (0.75).
"""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess
import sys

import pytest

from proctor import score
from proctor.record import RewardRecord

BUGGY_FILE = "toolz/itertoolz.py"
AGENT_TEST = "toolz/tests/test_getter_extra.py"
SENSING_TEST = (
    "import os\n\nfrom toolz.itertoolz import getter\n\n\n"
    "def test_env():\n    assert not os.environ.get('MUTANT_UNDER_TEST')\n"
    "    assert getter(None)(5) == 5\n\n\n"
    "def test_slot():\n    from mutmut.mutation import trampoline\n\n"
    "    assert not trampoline._mutant_under_test\n")
#: Senses the tool through a computed name the suspicious-code scan cannot read: it gets past
#: the integrity phase, so only the opt-in screen (no environment reads) keeps it out.
SCREENED_TEST = (
    "import os\n\nfrom toolz.itertoolz import getter\n\n"
    "KEY = 'TSET_REDNU_TNATUM'[::-1]\n\n\n"
    "def test_env():\n    assert not os.environ.get(KEY)\n"
    "    assert getter(None)(5) == 5\n")
HONEST_TEST = ("from toolz.itertoolz import getter\n\n\n"
               "def test_getter_none():\n    assert getter(None)(5) == 5\n")
#: Module-level code that closes the process's stdout and stderr when it is imported.
CLOSE_STD_FDS = ("\n\nimport os as _os  # noqa: E402\n\n"
                 "for _fd in (1, 2):\n    try:\n        _os.close(_fd)\n"
                 "    except OSError:\n        pass\n")


MODULE_LEVEL_FIX = (
    "\n\ngetter = (lambda index: ((lambda x: (x[index[0]],)) if len(index) == 1\n"
    "                           else operator.itemgetter(*index) if index\n"
    "                           else (lambda x: ())) if isinstance(index, list)\n"
    "          else operator.itemgetter(index))\n")

#: A decorator line that changes nothing (PEP 614 expression: no new function to mutate).
NOOP_DECORATOR = "@(lambda fn: fn)\n"


def with_extra_branch(getter_src: str, comment: str = "") -> str:
    return getter_src.replace(
        "    else:\n        return operator.itemgetter(index)\n",
        f"    elif index is None:\n        return lambda x: x{comment}\n"
        "    else:\n        return operator.itemgetter(index)\n")


@pytest.fixture(scope="module")
def patches(toolz_make_task, make_toolz_patch):
    mk = toolz_make_task
    extra = {BUGGY_FILE: (mk.GETTER_BUGGY, with_extra_branch(mk.GETTER_ORIGINAL))}
    return {
        "extra": make_toolz_patch(extra),
        "extra_sensing_test": make_toolz_patch({**extra, AGENT_TEST: (None, SENSING_TEST)}),
        "extra_honest_test": make_toolz_patch({**extra, AGENT_TEST: (None, HONEST_TEST)}),
        "extra_screened_test": make_toolz_patch({**extra, AGENT_TEST: (None, SCREENED_TEST)}),
        "extra_pragma": make_toolz_patch({BUGGY_FILE: (mk.GETTER_BUGGY, with_extra_branch(
            mk.GETTER_ORIGINAL, "  # pragma: no mutate"))}),
        "extra_closes_std_fds": make_toolz_patch({BUGGY_FILE: (
            mk.GETTER_BUGGY, with_extra_branch(mk.GETTER_ORIGINAL) + CLOSE_STD_FDS)}),
        # Progress (the fix) on module-level lines only: mutmut has no trampoline there, so
        # no mutant. (A change with no progress at all would skip the step: see
        # test_e2e_toolz's test_patch_without_progress_skips_mutation_with_the_same_reward.)
        "module_level_fix": make_toolz_patch({BUGGY_FILE: (
            mk.GETTER_BUGGY, mk.GETTER_BUGGY + MODULE_LEVEL_FIX)}),
        # "extra" with a decorator that does nothing: mutmut alone skips decorated functions
        "extra_noop_decorator": make_toolz_patch({BUGGY_FILE: (
            mk.GETTER_BUGGY, NOOP_DECORATOR + with_extra_branch(mk.GETTER_ORIGINAL))}),
    }


@pytest.fixture(scope="module")
def scored(toolz_task, toolz_patches, patches):
    cache: dict[str, RewardRecord] = {}

    def get(name: str) -> RewardRecord:
        if name not in cache:
            patch = toolz_patches.get(name) or patches[name]
            cache[name] = score(toolz_task, patch, rollout_id=name)
            assert cache[name].status == "scored", cache[name].error
        return cache[name]

    return get


def _one_baseline_run(task) -> None:
    toml = (task / "task.toml").read_text()
    assert "\nruns = 3\n" in toml
    (task / "task.toml").write_text(toml.replace("\nruns = 3\n", "\nruns = 1\n"))


@pytest.fixture(scope="module")
def agent_task(toolz_task, tmp_path_factory):
    """The example task with ``[mutation] killers = ["trusted", "agent"]`` (and one baseline
    run of each state: flaky tests are not this task's subject)."""
    task = tmp_path_factory.mktemp("agent-killers") / "task"
    shutil.copytree(toolz_task, task)
    _one_baseline_run(task)
    with open(task / "task.toml", "a") as fh:
        fh.write('\n[mutation]\nkillers = ["trusted", "agent"]\n')
    return task


@pytest.mark.docker
def test_minimal_fix_outscores_fix_with_untested_branch(scored):
    ref, extra = scored("reference"), scored("extra")
    assert ref.components["mutation_score"] == 1.0
    assert extra.components["mutation_score"] == 0.75
    assert extra.evidence["mutation"].details["verdicts"] == {"killed": 3, "survived": 1}
    [survivor] = extra.evidence["mutation"].details["survivors"]
    assert (survivor["path"], survivor["line"]) == (BUGGY_FILE, 814)
    assert "-        return lambda x: x\n+        return lambda x: None" in survivor["diff"]
    assert extra.components["public_tests"] == extra.components["hidden_tests"] == 1.0
    assert ref.reward > extra.reward
    # only the mutation term and the diff cost differ: .20 * (1 - .75) + 2 lines * .0005
    assert ref.reward - extra.reward == pytest.approx(0.2 * 0.25 + 0.001, abs=1e-12)
    assert extra.flags.degraded is False
    RewardRecord.model_validate_json(extra.to_json())


@pytest.mark.docker
def test_a_noop_decorator_on_the_changed_function_does_not_switch_mutation_off(scored):
    # the decorated trampoline is what the module binds: the same mutants, the same
    # verdicts, the same score as "extra", its weight kept (a null would re-share it)
    rec = scored("extra_noop_decorator")
    d = rec.evidence["mutation"].details
    assert rec.components["mutation_score"] == 0.75
    assert d["verdicts"] == {"killed": 3, "survived": 1}
    assert d["control"]["verdict"] == "survived" and "unmutated" not in d
    [survivor] = d["survivors"]
    assert (survivor["path"], survivor["line"]) == (BUGGY_FILE, 815)  # one line lower
    assert "-        return lambda x: x\n+        return lambda x: None" in survivor["diff"]
    assert rec.weights["mutation_score"] == pytest.approx(0.2)
    assert rec.flags.degraded is False


@pytest.mark.docker
def test_agent_test_sensing_mutant_under_test_does_not_raise_score(scored):
    # With trusted killers only, a test of the agent's never kills a mutant, sensing or not.
    # Its read of MUTANT_UNDER_TEST is a suspicion of the code scan; the variable is never
    # set (the active mutant lives in the runner's process-local slot), so no verdict
    # depends on it: the differential run clears it at no cost.
    sensing, extra = scored("extra_sensing_test"), scored("extra")
    assert sensing.reason is None and not sensing.integrity.violated
    assert sensing.evidence["differential"].details["verdict"] == "cleared"
    assert sensing.components["mutation_score"] == extra.components["mutation_score"] == 0.75
    assert sensing.reward < extra.reward  # the same, less the diff cost of the test


@pytest.mark.docker
def test_pragma_no_mutate_added_by_the_patch_is_ignored(scored):
    rec = scored("extra_pragma")
    assert rec.components["mutation_score"] == 0.75
    assert [s["line"] for s in rec.evidence["mutation"].details["survivors"]] == [814]


@pytest.mark.docker
def test_code_that_closes_stdout_and_stderr_at_import_cannot_switch_mutation_off(scored):
    # The runner imports the code under test during collection; once fds 1 and 2 were free,
    # each mutant child's verdict pipe took them and its dup2 of /dev/null replaced it:
    # every mutant and the control came back crashed, mutation was null and its weight
    # re-shared. The mutants are judged as without the closing code.
    rec = scored("extra_closes_std_fds")
    assert rec.evidence["mutation"].details["verdicts"] == {"killed": 3, "survived": 1}
    assert rec.evidence["mutation"].details["control"]["verdict"] == "survived"
    assert rec.components["mutation_score"] == 0.75
    assert rec.weights["mutation_score"] == pytest.approx(0.2)


@pytest.mark.docker
def test_no_mutants_on_changed_lines_is_null_with_reason_and_reshared(scored):
    rec = scored("module_level_fix")
    assert rec.progress > 0 and rec.components["hidden_tests"] > 0
    assert rec.components["mutation_score"] is None
    assert rec.measurements.notes["mutation_score"].startswith("no mutants on the changed lines")
    assert rec.weights["mutation_score"] == 0.0
    assert rec.flags.degraded is False


@pytest.mark.docker
@pytest.mark.parametrize("host_mutants,what_failed", [
    ("0", "mutmut failed to start"),  # generation in the sandbox: the generator fails
    ("1", "the mutation runner failed to start"),  # made on the host: the runner fails
])
def test_mutmut_failing_to_start_is_null_and_degraded_never_zero(
        toolz_task, toolz_patches, monkeypatch, host_mutants, what_failed):
    import proctor.suites.mutant_generator as mutant_generator
    import proctor.suites.mutation as mutation

    monkeypatch.setenv("PROCTOR_HOST_MUTANTS", host_mutants)
    # a loaded machine can take the host generator past its start and answer times, and
    # the sandbox then generates (the other case's path): give it the step's whole half,
    # and a pool of its own, whatever earlier tests left in the process-wide one
    monkeypatch.setattr(mutant_generator, "REQUEST_TIMEOUT_S", 600.0)
    monkeypatch.setattr(mutant_generator, "START_TIMEOUT_S", 600.0)
    monkeypatch.setattr(mutant_generator, "_pools", {})
    monkeypatch.setattr(mutation, "PYTHON", "/nonexistent/python3")
    rec = score(toolz_task, toolz_patches["reference"])
    assert rec.status == "scored" and rec.flags.degraded is True
    assert rec.components["mutation_score"] is None
    note = rec.measurements.notes["mutation_score"]
    assert note.startswith(what_failed) and "nonexistent" in note
    assert rec.weights["mutation_score"] == 0.0
    assert rec.reward == pytest.approx(0.998)  # the other components are untouched


@pytest.mark.docker
def test_opt_in_agent_tests_kill_but_sensing_ones_are_screened_out(agent_task, patches):
    honest = score(agent_task, patches["extra_honest_test"])
    sensing = score(agent_task, patches["extra_screened_test"])
    assert sensing.status == "scored" and sensing.integrity.violated is False
    assert honest.evidence["mutation"].details["agent_tests"] == [AGENT_TEST]
    assert honest.components["mutation_score"] == 1.0  # the agent's test pins the new branch
    details = sensing.evidence["mutation"].details
    assert details["agent_tests"] == [] and AGENT_TEST in details["agent_tests_screened_out"]
    assert sensing.components["mutation_score"] == 0.75


@pytest.mark.docker
def test_generation_running_out_of_time_is_the_patch_s_failure_not_a_null(
        toolz_task, toolz_patches, tmp_path_factory, monkeypatch):
    # red4: a null (weight re-shared) raised the reward of code that made mutmut explode;
    # here the sandbox's generation is made slow on purpose (a 3 s step)
    import proctor.suites.mutation as mutation

    task = tmp_path_factory.mktemp("slow-generation") / "task"
    shutil.copytree(toolz_task, task)
    _one_baseline_run(task)
    with open(task / "task.toml", "a") as fh:
        fh.write("\n[mutation]\ntimeout_s = 3\n")
    monkeypatch.setenv("PROCTOR_HOST_MUTANTS", "0")
    monkeypatch.setattr(mutation, "PYTHON", f"sleep 60; {mutation.PYTHON}")
    rec = score(task, toolz_patches["reference"])
    assert rec.status == "scored" and rec.components["mutation_score"] == 0.0
    assert rec.measurements.notes["mutation_score"].startswith("mutant generation ran out")
    assert rec.flags.degraded is False


# ------------------------------------------------- code in a package __init__ (inflection)


@pytest.fixture(scope="module")
def inflection_task(tmp_path_factory):
    """The inflection 0.5.1 task (``tests/inflection_task.py``): code in a package's
    ``__init__.py``, tests in a root-level test module."""
    from tests import inflection_task as it

    try:
        return it.build(tmp_path_factory.mktemp("inflection"))
    except it.DownloadError as exc:
        pytest.skip(f"PyPI unreachable and no cached sdist in {it.DEFAULT_CACHE}: {exc}")


@pytest.fixture(scope="module")
def inflection_reference(inflection_task) -> RewardRecord:
    rec = score(inflection_task, (inflection_task / "reference.patch").read_bytes(),
                rollout_id="inflection-reference")
    assert rec.status == "scored", rec.error
    return rec


@pytest.mark.docker
def test_mutants_in_a_package_init_are_killed_by_the_tests_that_call_it(inflection_reference):
    # `if number % 100 in (11, 12, 13):` in inflection/__init__.py: `%` -> `/`, `100` ->
    # `101`, each of the three numbers + 1, `in` -> `not in`; test_ordinal and the hidden
    # test_ordinalize kill all six
    rec = inflection_reference
    d = rec.evidence["mutation"].details
    assert d["changed_lines"] == {"inflection/__init__.py": [226]}
    assert d["verdicts"] == {"killed": 6} and d["survivors"] == []
    assert d["control"]["verdict"] == "survived"
    assert rec.components["mutation_score"] == 1.0


def ruff_format(text: str) -> str:
    """``text`` as ``ruff format`` writes it (line length 72, no configuration read)."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated",
                           "--line-length", "72", "-"], input=text, capture_output=True,
                          text=True, check=True)
    return proc.stdout


def normalised_ast(text: str) -> str:
    """The module's dump with docstrings as ``inspect.cleandoc`` leaves them."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body[0].value.value = inspect.cleandoc(body[0].value.value)
    return ast.dump(tree)


@pytest.mark.docker
def test_a_fix_plus_reformatting_elsewhere_scores_mutation_like_the_fix_alone(
        inflection_task, inflection_reference):
    from tests import inflection_task as it

    buggy = (inflection_task / "repo" / it.SOURCE).read_text(encoding="utf-8")
    fixed = it.original_source(inflection_task)
    formatted = ruff_format(fixed)  # quotes, wrapping, blank lines, docstring indentation
    assert normalised_ast(formatted) == normalised_ast(fixed) != normalised_ast(buggy)
    assert it.ORIGINAL_LINE in formatted
    patch = it.make_patch(inflection_task, {it.SOURCE: (buggy, formatted)})
    both = score(inflection_task, patch, rollout_id="inflection-fix-and-format")
    assert both.status == "scored", both.error
    alone = inflection_reference
    da, db = alone.evidence["mutation"].details, both.evidence["mutation"].details
    assert len(db["added_lines"][it.SOURCE]) >= 41  # the fix and 40+ reformatted lines
    assert len(db["changed_lines"][it.SOURCE]) == 1  # the fix's line, wherever it now is
    assert db["mutants_generated"] == da["mutants_generated"] == 6
    assert db["verdicts"] == da["verdicts"] == {"killed": 6}
    assert both.components["mutation_score"] == alone.components["mutation_score"] == 1.0
    assert both.components["public_tests"] == both.components["hidden_tests"] == 1.0
