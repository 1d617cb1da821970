"""End to end, Docker and local backends: ``score()`` returns within ``per_patch`` + 10 s
whatever the patch does, and what the deadline keeps from running is the patch's honest
failure, scored with its exact reward, never an error.

The task: the red-team mini task (:mod:`tests.redteam.mini_task`) with ``per_test = 3``,
``per_suite = 30``, ``per_patch = 40``; its baseline is computed first (task preparation,
not counted against the deadline). Before the deadline, code that hangs at import took
71 s (one sandbox after the other) or 83 s (side by side) on this task: its mutation step
waited ``120 + 30 + 30`` s more for a runner that hung at import.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor import score
from proctor.harness.pipeline import NOT_RUN_NOTE
from proctor.patch import code_lines_changed
from proctor.rewards import diff_cost
from proctor.suites import NO_PROGRESS_NOTE
from tests.redteam import mini_task
from tests.test_redteam_corpus import make_patch

PER_PATCH = 40
BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]

#: The fix, with a module-level loop that never ends: each suite's one test module hangs at
#: collection until the runner's supervisor kills the import (its per-item limit) and goes
#: on without that module.
HANG_AT_IMPORT = {"calc/core.py": mini_task.CORE_BUGGY.replace(
    '"""Arithmetic helpers."""\n',
    '"""Arithmetic helpers."""\nimport time\n\nwhile True:\n    time.sleep(1)\n').replace(
    *mini_task.FIX)}
#: A fix for the inputs the public tests use only: every hidden test (negative numbers,
#: floats, strings, a single-element mean; and the tripwire hidden among them) hangs until
#: its 3 s per-test timeout. It hangs asleep (``signal.pause``: the timeout's SIGALRM ends
#: it), so the test waits rather than spending the CPU (the ``waits`` marker); the busy
#: loop's shape is the abuse cases' ``infinite_loop_in_one_test``.
HIDDEN_ALL_HANG = {"calc/core.py": mini_task.CORE_BUGGY.replace(
    "    return a - b\n",
    "    if type(a) is not int or a < 0:\n        import signal\n        while True:\n"
    "            signal.pause()\n"
    "    return a + b\n").replace(
    "    return sum(xs) / len(xs)\n",
    "    if len(xs) < 2:\n        import signal\n        while True:\n"
    "            signal.pause()\n"
    "    return sum(xs) / len(xs)\n")}


@pytest.fixture(scope="module")
def deadline_task(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("deadline-task")
    scratch = tmp_path_factory.mktemp("deadline-scratch")
    mini_task.build(dest, lambda repo, edits: make_patch(repo, edits, scratch))
    toml = dest / "task.toml"
    toml.write_text(toml.read_text().replace("per_test = 10", "per_test = 3")
                    .replace("per_suite = 60", "per_suite = 30")
                    .replace("per_patch = 300", f"per_patch = {PER_PATCH}"))
    return dest


@pytest.fixture(scope="module")
def prepared(deadline_task):
    """``prepared(backend)``: the task's baseline computed (once per backend) by scoring
    the reference patch."""
    done = set()

    def get(backend: str) -> Path:
        if backend not in done:
            rec = score(deadline_task, (deadline_task / "reference.patch").read_bytes(),
                        sandbox=backend)
            assert rec.status == "scored" and rec.reward > 0.9, rec.error
            done.add(backend)
        return deadline_task

    return get


def _patch(task: Path, edits: dict, tmp_path: Path) -> bytes:
    return make_patch(task / "repo", edits, tmp_path)


def _our_processes() -> set[int]:
    """Descendants of this process, but the host mutant generator (warm by design)."""
    children: dict[int, list[int]] = {}
    cmdline: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] == "Z":
            continue  # exited, not yet reaped by its parent: holds nothing but a pid
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if b"import mutmut_adapter" in cmdline.get(pid, b""):  # its -c boot script
            continue
        out.add(pid)
        todo += children.get(pid, [])
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "(gone)"


def _assert_within_deadline(rec) -> None:
    assert rec.status == "scored" and rec.error is None, rec.error
    assert rec.timing["total_s"] <= PER_PATCH + 10, rec.timing
    # the patch's code used the time, not the harness's operations
    assert rec.timing["patch_code_s"] > rec.timing["harness_ops_s"], rec.timing


@pytest.mark.waits
@pytest.mark.parametrize("backend", BACKENDS)
def test_code_that_hangs_at_import_is_scored_within_the_deadline(backend, prepared,
                                                                 tmp_path):
    # One sandbox after the other: in each suite the import of the test module hangs until
    # the supervisor kills it (3 * 1.2 + 2 s), the module is left out and a second session
    # runs the rest; nothing passes, so mutation is not measured and, progress being 0,
    # its weight is kept: -.25 * 1 - .35 * 1 - diff cost.
    task = prepared(backend)
    patch = _patch(task, HANG_AT_IMPORT, tmp_path)
    before = _our_processes()
    rec = score(task, patch, sandbox=backend, overlap=False)
    _assert_within_deadline(rec)
    assert rec.tests["public"].f2p_passed == rec.tests["hidden"].f2p_passed == 0
    assert rec.tests["public"].p2p_failed == rec.tests["public"].p2p_total == 2
    assert rec.tests["hidden"].p2p_failed == rec.tests["hidden"].p2p_total == 1
    assert rec.components == {"compiled": 1.0, "public_tests": -1.0, "hidden_tests": -1.0,
                              "mutation_score": None, "static_analysis": 1.0,
                              "performance": None}
    assert rec.measurements.notes["mutation_score"] == NO_PROGRESS_NOTE
    assert "mutation" not in rec.evidence
    for suite in ("public_tests", "hidden_tests"):
        assert rec.evidence[suite].details["ended_early"] == ["collection_error"]
    assert not rec.flags.tests_tampered and not rec.flags.exclude_from_advantage
    assert rec.weights["mutation_score"] == 0.2
    cost = diff_cost(code_lines_changed(patch.decode()))
    assert cost == 0.0025
    assert rec.reward == pytest.approx(-0.25 - 0.35 - cost, abs=1e-12)
    left = _our_processes() - before
    assert not left, {pid: _cmdline(pid) for pid in left}


@pytest.mark.waits
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fix_whose_hidden_tests_all_hang_is_scored_within_the_deadline(backend, prepared,
                                                                        tmp_path):
    # The two sandboxes side by side (the default): public passes at once; every hidden
    # test hangs 3 s (15 s with the tripwire); mutation then runs in what is left of the
    # deadline (about 20 s, not its own 120 s plus 60 s for the killers) and finishes:
    # 10 mutants, 5 killed (4 of them by their timeout: the code hangs), 5 survive.
    # Progress p = .25 / .6; public c = 1, hidden c = 0 - 1 (its PASS_TO_PASS test hangs);
    # visible only .10 * (1 - 0).
    task = prepared(backend)
    patch = _patch(task, HIDDEN_ALL_HANG, tmp_path)
    before = _our_processes()
    rec = score(task, patch, sandbox=backend)
    _assert_within_deadline(rec)
    assert rec.tests["public"].f2p_passed == 4 and rec.tests["public"].p2p_failed == 0
    assert set(rec.tests["hidden"].fail_to_pass.values()) == {"timeout"}
    assert rec.tests["hidden"].pass_to_pass == {"tests/test_hidden.py::test_mean_single":
                                                "timeout"}
    assert rec.components == {"compiled": 1.0, "public_tests": 1.0, "hidden_tests": -1.0,
                              "mutation_score": 0.5, "static_analysis": 1.0,
                              "performance": None}
    assert rec.evidence["mutation"].details["verdicts"] == {"killed": 1, "timeout": 4,
                                                            "survived": 5}
    assert not any(n.startswith(NOT_RUN_NOTE) for n in rec.component_notes.values())
    assert rec.progress == pytest.approx(5 / 12)
    assert rec.penalties == {"visible_only": pytest.approx(0.1)}
    cost = diff_cost(code_lines_changed(patch.decode()))
    assert cost == 0.005
    assert rec.reward == pytest.approx(0.25 - 0.35 + 5 / 12 * (0.1 + 0.2 * 0.5 + 0.1)
                                       - cost - 0.1, abs=1e-12)
    assert rec.reward == pytest.approx(-0.080, abs=1e-12)
    left = _our_processes() - before
    assert not left, {pid: _cmdline(pid) for pid in left}
