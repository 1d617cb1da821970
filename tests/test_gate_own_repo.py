"""``proctor gate``: a change of your own repository judged before the PR, on a checkout of
parse's real history (``tests/data/parse.bundle``): a real fix with its test passes (its
PR text checked), the same test with a change that does not fix it fails, an untested
change is WARN, the README's hook runs as written, and bad input exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from tests.test_swebench_import import DATA

#: A real fix of parse with its test (tests/test_swebench_e2e.py keeps it as a task).
FIX = "35b9ffb"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=cwd, capture_output=True, check=True, text=True).stdout


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A clone of parse with three branches on the fix's parent: ``fix`` (the real fix
    and its test), ``wrong`` (the test, and a change that does not fix), ``untested`` (a
    source change without a test)."""
    work = tmp_path_factory.mktemp("gate") / "parse"
    git(work.parent, "clone", "-q", str(DATA / "parse.bundle"), str(work))
    git(work, "checkout", "-q", "-b", "fix", FIX)
    tests = git(work, "diff", "--name-only", f"{FIX}^", FIX, "--", "tests").split()
    git(work, "checkout", "-q", "-b", "wrong", f"{FIX}^")
    git(work, "checkout", FIX, "--", *tests)
    (work / "parse.py").write_text((work / "parse.py").read_text() + "\n# tidied\n")
    git(work, "commit", "-qam", "the test, and a change that fixes nothing")
    git(work, "checkout", "-q", "-b", "untested", f"{FIX}^")
    (work / "parse.py").write_text((work / "parse.py").read_text() + "\n# tidied\n")
    git(work, "commit", "-qam", "no test")
    return work


def gate(checkout: Path, head: str, *more: str):
    result = CliRunner().invoke(app, ["gate", "--repo", str(checkout), "--base", f"{FIX}^",
                                      "--head", head, "--baseline-runs", "1", "--json",
                                      *more])
    return result, (json.loads(result.stdout) if result.stdout.startswith("{") else None)


@pytest.mark.docker
def test_a_real_fix_with_its_test_passes(checkout, docker_ready, tmp_path):
    (tmp_path / "PR.md").write_text("Fix parsing in parse.py; the new test in tests/ "
                                    "passes.\n")
    result, got = gate(checkout, "fix", "--sandbox", "docker",
                       "--message-file", str(tmp_path / "PR.md"))
    assert result.exit_code == 0, result.output
    # the PR text names the test the change adds: true, though the scored patch is the
    # change without its tests (they are the hidden suite)
    assert got["gate"] == "PASS" and got["score"] >= 80, got["rule"]
    assert got["record"]["flags"]["false_claim"] is False
    assert got["record"]["tests"]["hidden"]["f2p_passed"] >= 1
    assert got["record"]["evidence"]["message"]["details"]["applied"] is True


@pytest.mark.docker
def test_a_change_whose_own_test_still_fails_fails(checkout, docker_ready):
    result, got = gate(checkout, "wrong", "--sandbox", "docker")
    assert result.exit_code == 1, result.output
    assert got["gate"] == "FAIL" and got["score"] is None
    # the change is its own reference: its test fails before and after it, which the
    # baseline names (no reward exists without a FAIL_TO_PASS test)
    assert got["rule"].startswith("the change's own tests fail with it (task has no "
                                  "FAIL_TO_PASS test")
    assert got["rule"].endswith("1 test fails with the reference patch too: hidden: "
                                "tests/test_parse.py::test_numbers)")


def test_an_untested_change_is_warn_and_fails_only_when_asked(checkout):
    result, got = gate(checkout, "untested")
    assert result.exit_code == 0, result.output
    assert got["gate"] == "WARN" and got["rule"].startswith("untested: the change adds or "
                                                            "edits no test")
    assert got["record"] is None
    strict, _ = gate(checkout, "untested", "--fail-on", "warn")
    assert strict.exit_code == 1


@pytest.mark.parametrize("args,why", [
    (["--base", "no-such-branch"], "no-such-branch is not a commit"),
    (["--base", "HEAD", "--head", "HEAD"], "changes nothing"),
    (["--base", "HEAD", "--fail-on", "never"], "--fail-on must be fail or warn"),
])
def test_bad_input_exits_2_naming_it(checkout, args, why):
    result = CliRunner().invoke(app, ["gate", "--repo", str(checkout), *args])
    assert result.exit_code == 2 and why in result.output, result.output


def test_a_directory_that_is_not_a_repository_exits_2(tmp_path):
    result = CliRunner().invoke(app, ["gate", "--repo", str(tmp_path), "--base", "main"])
    assert result.exit_code == 2 and "error" in result.output


def test_the_readme_pre_push_hook_runs_the_gate(checkout, tmp_path):
    """The README's hook, as written there, on the untested branch: WARN, push allowed.
    (``proctor`` on its PATH is this checkout's, whatever else is installed.)"""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    hook = readme.split("`pre-push` hook", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    git(checkout, "update-ref", "refs/remotes/origin/main", f"{FIX}^")
    git(checkout, "checkout", "-q", "untested")
    path = checkout / ".git" / "hooks" / "pre-push"
    path.write_text(hook)
    path.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "proctor").write_text(f'#!/bin/sh\nexec {sys.executable} -m proctor "$@"\n')
    (bin_dir / "proctor").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run([str(path)], cwd=checkout, capture_output=True, text=True,
                          timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("WARN") and "untested" in done.stdout
