"""``proctor.score(overlap=...)``: the second sandbox made at once and its steps run
alongside the first's (the default), or one step after the other (batches with a worker per
core). Same record either way; every sandbox closed on every path out; without overlap, no
speculative sandbox for a patch that ends early."""

from __future__ import annotations

import pytest

from proctor import score
from proctor.harness.pipeline import suites_in_sandbox

BUGGY_FILE = "toolz/itertoolz.py"
pytestmark = pytest.mark.docker


@pytest.fixture
def opened(monkeypatch):
    """Sandboxes opened during the test (their objects, in order; a baseline's too)."""
    seen = []
    real = suites_in_sandbox.open_sandbox

    def spy(*args, **kwargs):
        sb = real(*args, **kwargs)
        sb.ops = []  # (operation, first argument) of each sandbox operation, in order
        for name in ("run", "put_archive", "get_file", "kill_user_processes"):
            def counted(*a, _real=getattr(sb, name), _name=name, **kw):
                sb.ops.append((_name, a[0] if a else None))
                return _real(*a, **kw)
            setattr(sb, name, counted)
        seen.append(sb)
        return sb

    monkeypatch.setattr(suites_in_sandbox, "open_sandbox", spy)
    return seen


def _same_measure(rec) -> dict:
    return {"reward": rec.reward, "components": rec.components, "tests": rec.tests,
            "penalties": rec.penalties, "weights": rec.weights, "flags": rec.flags,
            "strategy": rec.apply_strategy, "progress": rec.progress}


@pytest.mark.parametrize("name", ["reference", "partial"])
def test_overlap_or_not_gives_the_same_record(toolz_task, toolz_patches, name, opened,
                                             no_leaks):
    together = score(toolz_task, toolz_patches[name], overlap=True)
    apart = score(toolz_task, toolz_patches[name], overlap=False)
    assert together.status == apart.status == "scored"
    assert _same_measure(together) == _same_measure(apart)
    ours = [sb for sb in opened if sb.run_id in (together.rollout_id, apart.rollout_id)]
    assert len(ours) == 4 and all(sb.leftovers() == [] for sb in opened)
    # one step after the other, the first sandbox opened is the public one: four commands
    # (apply + tree report; compiled + static + restore; the tripwire's dir; the run)
    public = next(sb for sb in ours if sb.run_id == apart.rollout_id)
    assert [op for op, _ in public.ops] == ["run"] * 4, public.ops
    assert "tree-end" in public.ops[0][1][2] and "restore_public_tests" in public.ops[1][1][2]
    assert public.ops[2][1][4] == "/proctor"
    assert any(a.endswith("/run_pytest.py") for a in public.ops[3][1])
    # the hidden one: apply; the hidden tests and the tripwire's dir in one put; the run
    hidden = [sb for sb in ours if sb.run_id == apart.rollout_id][1]
    assert [op for op, _ in hidden.ops[:3]] == ["run"] * 3, hidden.ops
    assert hidden.ops[1][1][4] == "/proctor" and len(hidden.ops[1][1]) == 7  # h- and t- dirs
    assert any(a.endswith("/run_pytest.py") for a in hidden.ops[2][1])


def test_patch_that_does_not_apply_closes_the_speculative_sandbox(toolz_task, toolz_patches,
                                                                  opened, no_leaks):
    context = b"\n         elif index:\n"
    stale = toolz_patches["reference"].replace(context, b"\n         elif index is not None:\n")
    score(toolz_task, toolz_patches["reference"])  # the baseline's sandboxes, if not cached
    opened.clear()
    rec = score(toolz_task, stale, overlap=True)
    assert rec.reason == "did_not_apply"
    assert len(opened) == 2 and all(sb.leftovers() == [] for sb in opened)
    opened.clear()
    rec = score(toolz_task, stale, overlap=False)
    assert rec.reason == "did_not_apply" and len(opened) == 1  # no speculative sandbox


def test_post_apply_violation_closes_the_speculative_sandbox(toolz_task, make_toolz_patch,
                                                             opened, no_leaks):
    original = (toolz_task / "repo" / BUGGY_FILE).read_text()
    cheat = original + ("\n\nimport builtins  # noqa: E402\n\n"
                        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n")
    patch = make_toolz_patch({BUGGY_FILE: (original, cheat)})
    for overlap, n in ((True, 2), (False, 1)):
        opened.clear()
        rec = score(toolz_task, patch, overlap=overlap)
        assert rec.reward == -1.0 and rec.reason == "integrity_violation"
        assert any("builtins_write" in r for r in rec.integrity.reasons), rec.integrity.reasons
        assert "hidden_tests_s" not in rec.timing and "public_tests_s" not in rec.timing
        ours = [sb for sb in opened if sb.run_id == rec.rollout_id]  # not the baseline's
        assert len(ours) == n and all(sb.leftovers() == [] for sb in opened)
        # the tree report came with the apply command; judged on the host, the violation
        # stopped everything after it: no compiled / static analysis command ran at all
        assert all([op for op, _ in sb.ops] == ["run"] for sb in ours), [sb.ops for sb in ours]
        assert not {"compiled", "static_analysis"} & set(rec.evidence)
        assert rec.evidence["tamper"].command.startswith("tree_report.py (in the apply")


@pytest.mark.parametrize("where", ["first", "second"])
def test_harness_error_in_either_sandbox_is_an_error_record_and_leaves_nothing(
        toolz_task, toolz_patches, monkeypatch, opened, no_leaks, where):
    from proctor.errors import InfraError
    from proctor.harness.pipeline import measure

    def boom(*args, **kwargs):
        raise InfraError(f"boom in the {where} sandbox")

    target = "run_file_checks" if where == "first" else "run_hidden"
    monkeypatch.setattr(measure, target, boom)
    rec = score(toolz_task, toolz_patches["reference"])
    assert rec.status == "error" and rec.reward is None
    assert rec.error.message == f"boom in the {where} sandbox" and rec.error.retryable
    assert all(sb.leftovers() == [] for sb in opened)


def test_what_the_hidden_run_left_running_is_gone_before_mutation(
        toolz_task, toolz_patches, make_toolz_patch, opened, no_leaks):
    from proctor.patch import patched_texts

    original = (toolz_task / "repo" / BUGGY_FILE).read_text()
    fixed = patched_texts(toolz_patches["reference"].decode(), {BUGGY_FILE: original})
    daemon = ("\n\nimport subprocess as _sp\n_sp.Popen(['sleep', '120'], "
              "start_new_session=True, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)\n")
    score(toolz_task, toolz_patches["reference"])  # the baseline's sandboxes, if not cached
    for text in (fixed[BUGGY_FILE], fixed[BUGGY_FILE] + daemon):
        opened.clear()
        rec = score(toolz_task, make_toolz_patch({BUGGY_FILE: (original, text)}),
                    overlap=False)
        assert rec.status == "scored" and rec.components["mutation_score"] == 1.0
        hidden = [sb for sb in opened if sb.run_id == rec.rollout_id][1]
        ops = [op for op, _ in hidden.ops]
        # the runner's supervisor is the child subreaper of all the tests start (a daemon
        # in a session of its own too) and killed it before it reported: nothing is left
        # for the harness to kill before mutation
        assert "kill_user_processes" not in ops, ops
