"""Red-team cases on the mutation step and the merged sandbox commands (host mutant
generation, the control's retry, several steps in one command); the patches and what each
scores are in ``tests/redteam/found/README.md`` ("Mutation step and sandbox commands").

The honest twin of the mutation patches is ``honest_fix_untested_branches.patch`` (the
reference fix plus two untested branches): 0.876, mutation 0.4 (4 killed, 6 survived).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from proctor import score
from proctor.harness.pipeline.workspace import restore_public_tests_step
from proctor.task import load_task

# On warm sandboxes (made ahead, as in a batch): the exact records below were found on
# fresh ones, so both ways must agree (tests/conftest.py::warm_module).
pytestmark = pytest.mark.usefixtures("warm_module")

FOUND = Path(__file__).parent / "redteam" / "found"
HONEST_MUTATION = 0.4


def _score(task, name):
    return score(task, (FOUND / f"{name}.patch").read_bytes(), rollout_id=name, overlap=False)


@pytest.mark.waits
@pytest.mark.docker
def test_code_that_hangs_a_bounded_time_under_mutation_gains_nothing_from_the_retry(
        toolz_task, docker_ready):
    # Every forked child sleeps 2.5 s once: each real mutant times out at ~1 s (killed),
    # the control times out too, is retried with 4x its timeout, wakes up and survives.
    # Before: mutation 1.0 (10 timeouts), 0.9925, no flag.
    rec = _score(toolz_task, "control_retry_bounded_hang")
    assert rec.status == "scored"
    assert rec.components["mutation_score"] is not None
    assert rec.components["mutation_score"] <= HONEST_MUTATION, rec.evidence["mutation"]


@pytest.mark.docker
def test_verdicts_appended_to_the_runners_out_file_gain_nothing(toolz_task, docker_ready):
    # A thread started at import finds the runner's OUT file in /proc/self/fd and appends
    # a "killed" line for every mutant once "done" is there; the last line wins.
    # Before: mutation 1.0 (30 killed), 0.9815, no flag.
    rec = _score(toolz_task, "runner_out_append_forged_verdicts")
    assert rec.status == "scored"
    assert rec.flags.tests_tampered or (rec.components["mutation_score"] or 0.0) <= 0.5


@pytest.mark.waits
@pytest.mark.docker
def test_mutant_generation_that_times_out_is_the_patchs_failure_not_a_null(toolz_task,
                                                                           docker_ready):
    # One added line `if index == [0, ..., 3999]: return None`: mutmut's per-mutant
    # rendering is quadratic, the host gives up at 10 s, the sandbox at 120 s: mutation
    # null ("mutmut failed to start"), its weight re-shared. Before: 0.995 (degraded only).
    rec = _score(toolz_task, "generation_timeout_nulls_mutation")
    assert rec.status == "scored"
    assert rec.components["mutation_score"] is not None
    assert rec.reward < 0.9


@pytest.mark.docker
def test_git_configuration_the_patch_writes_is_not_read_by_roots_commands(toolz_task,
                                                                          docker_ready):
    # The honest twin + module code that writes a required, failing git clean filter into
    # the sandbox user's ~/.gitconfig (and `* filter=p` into ~/.config/git/attributes)
    # while the suites import it. Root's `git apply` of the mutation copy read both and ran
    # the filter as root (any command would have run so): the copy failed, mutation null,
    # its weight re-shared. Before: 0.9915, degraded only. Its own added lines are
    # mutated now: 25 of the 30 sampled mutants are in the planting code no test reaches.
    rec = _score(toolz_task, "git_filter_nulls_mutation_as_root")
    assert rec.status == "scored", rec.error
    assert not rec.flags.degraded
    assert rec.evidence["mutation"].details["verdicts"] == {
        "killed": 1, "survived": 4, "no_tests": 25}
    assert rec.reward == pytest.approx(0.79817, abs=5e-5)


@pytest.mark.docker
def test_a_file_where_a_public_tests_directory_was_is_scored(toolz_task, docker_ready):
    # Deletes toolz/sandbox/tests/* and adds a file `toolz/sandbox/tests`: the restore's
    # `tar -x` of toolz/sandbox/tests/test_core.py fails (Not a directory).
    # Before: status error (infra, retryable): "cannot reset public tests".
    rec = _score(toolz_task, "public_test_parent_made_a_file")
    assert rec.status == "scored", rec.error


@pytest.mark.docker
def test_a_directory_1100_levels_deep_is_scored(toolz_task, docker_ready):
    # os.walk recurses once per level (Python 3.11): the post-apply tree report dies with
    # RecursionError. Before: status error (infra): "post-apply tree report failed".
    rec = _score(toolz_task, "deep_dir_tree_report_unscored")
    assert rec.status == "scored", rec.error


def test_tree_report_hashes_a_very_deep_tree(tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "proctor" / "suites" / "incontainer"))
    import tree_report

    d = tmp_path
    for _ in range(1100):
        d = d / "a"
        d.mkdir()
    (d / "f.txt").write_text("x")
    try:
        assert len(tree_report.hash_tree(str(tmp_path))) == 1
    finally:  # pytest's own cleanup of tmp dirs recurses too
        subprocess.run(["rm", "-rf", str(tmp_path / "a")], check=False)


def test_restore_of_public_tests_replaces_a_file_at_a_parent_directory(toolz_task, tmp_path):
    task = load_task(toolz_task)
    repo = tmp_path / "repo"
    (repo / "toolz" / "sandbox").mkdir(parents=True)
    (repo / "toolz" / "sandbox" / "tests").write_text("not a directory\n")
    step = restore_public_tests_step(task)
    res = subprocess.run(step.argv, cwd=repo, input=step.stdin, capture_output=True,
                         check=False)
    assert res.returncode == 0, res.stderr.decode()
    assert (repo / "toolz" / "sandbox" / "tests" / "test_core.py").is_file()


def test_snapshot_copies_a_file_whose_directory_name_has_a_space(tmp_path):
    # `mkdir -p DEST/base/$(dirname PATH)` split "toolz/ext tools" in two words: no copy of
    # the patched file, so ruff never saw it (static 1.0 instead of 0.25: 0.854 -> 0.929),
    # and a directory "tools" appeared in the repo. Fixed: the substitution is quoted.
    from proctor.suites import snapshot_step

    repo = tmp_path / "repo"
    (repo / "toolz").mkdir(parents=True)
    (repo / "toolz" / "a.py").write_text("x = 1\n")
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    for rel in ("toolz/ext tools/bad.py", "toolz/x /tmp/y/z.py"):
        (repo / rel).parent.mkdir(parents=True)
        (repo / rel).write_text("import os\n")
    dest = tmp_path / "snap"
    paths = ["toolz/a.py", "toolz/ext tools/bad.py", "toolz/x /tmp/y/z.py"]
    step = snapshot_step(str(repo), paths, str(dest))
    res = subprocess.run(step.argv, cwd=repo, input=step.stdin, capture_output=True,
                         check=False)
    assert res.returncode == 0, res.stderr.decode()
    for rel in paths:
        assert (dest / "patched" / rel).is_file(), rel
    assert (dest / "base" / "toolz" / "a.py").is_file()
    assert not (repo / "tools").exists()
