"""Bad input gets a clear message, never a crash and never free points (design.md 2, 3, 6).

Honest failures of a patch are ``status="scored"`` with reward 0.0 and a ``reason``; a bad
task or a broken machine is ``status="error"`` with ``reward=None``, an ``error.kind`` and
``flags.exclude_from_advantage``. Most tests here need no container: a tiny synthetic task
is enough. After every test: no ``org.proctor`` container of ours and no ``proctor-*``
temp dir is left (``no_leaks``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proctor import TaskConfigError, load_task, score
from proctor.cli import app
from proctor.patch import MAX_PATCH_BYTES
from proctor.record import RewardRecord

pytestmark = pytest.mark.usefixtures("no_leaks")

MINI_TOML = """\
id = "mini"
sources = ["pkg"]

[tests]
public = ["tests/test_pub.py"]
hidden_dir = "hidden"

[timeouts]
per_test = 30
"""
MINI_PATCH = b"""\
diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""


def flat(text: str) -> str:
    """``text`` without whitespace: rich wraps long lines (paths) at any width."""
    return "".join(text.split())


@pytest.fixture
def mini_task(tmp_path) -> Path:
    """A minimal valid task (loads; never run in a container by these tests)."""
    root = tmp_path / "mini"
    files = {
        "task.toml": MINI_TOML,
        "repo/pkg/__init__.py": "",
        "repo/pkg/mod.py": "def f():\n    return 1\n",
        "repo/tests/test_pub.py": "from pkg.mod import f\n\n\ndef test_f():\n    assert f() == 2\n",
        "hidden/tests/test_hidden.py": "from pkg.mod import f\n\n\ndef test_h():\n    assert f()\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert load_task(root).id == "mini"
    return root


def assert_error(rec: RewardRecord, kind: str, retryable: bool) -> None:
    assert rec.status == "error"
    assert rec.reward is None
    assert rec.error is not None and rec.error.kind == kind
    assert rec.error.retryable is retryable
    assert rec.flags.exclude_from_advantage is True
    assert rec.verdict is None


def assert_honest_zero(rec: RewardRecord, reason: str) -> None:
    assert rec.status == "scored" and rec.error is None
    assert rec.reward == 0.0
    assert rec.reason == reason
    assert rec.integrity.violated is False
    assert rec.flags.exclude_from_advantage is False
    assert rec.component_notes["reason"]  # says why


# --------------------------------------------------------------------------- the task


def test_missing_task_dir_is_a_task_config_error(tmp_path):
    missing = tmp_path / "no-such-task"
    rec = score(missing, MINI_PATCH)
    assert_error(rec, "task_config", retryable=False)
    assert rec.error.message == f"task directory not found: {missing}"
    assert rec.task_id == "no-such-task"


def test_cli_missing_task_dir_exits_2_with_message(tmp_path):
    patch = tmp_path / "p.diff"
    patch.write_bytes(MINI_PATCH)
    missing = tmp_path / "no-such-task"
    result = CliRunner().invoke(app, ["score", str(missing), str(patch)])
    assert result.exit_code == 2
    assert flat(f"task directory not found: {missing}") in flat(result.output)


def test_cli_missing_patch_file_exits_2(mini_task, tmp_path):
    result = CliRunner().invoke(app, ["score", str(mini_task), str(tmp_path / "nope.diff")])
    assert result.exit_code == 2
    assert "patch file not found" in result.output


def test_cli_a_record_that_cannot_be_written_is_said_never_a_traceback(mini_task, tmp_path):
    """An --output in no directory: a usage error before the score. A full disk or a full
    standard output once scored: exit 3 and the message (the empty patch: no sandbox)."""
    import subprocess
    import sys

    empty = tmp_path / "empty.diff"
    empty.write_bytes(b"")
    nowhere = CliRunner().invoke(app, ["score", str(mini_task), str(empty), "-o",
                                       str(tmp_path / "no-dir" / "rec.json")])
    assert nowhere.exit_code == 2 and "--output: no directory" in nowhere.output
    full = CliRunner().invoke(app, ["score", str(mini_task), str(empty), "-o", "/dev/full"])
    assert full.exit_code == 3, full.output
    assert "cannot write the record to /dev/full: No space left on device" in full.output
    a_dir = CliRunner().invoke(app, ["score", str(mini_task), str(empty), "-o", str(tmp_path)])
    assert a_dir.exit_code == 2 and "--output is a directory" in a_dir.output
    env = {**os.environ, "PROCTOR_DAEMON": "0"}
    cmd = [sys.executable, "-m", "proctor", "score", str(mini_task), str(empty)]
    for args in ([], ["--json"]):
        with open("/dev/full", "w") as stdout:
            done = subprocess.run([*cmd, *args], stdout=stdout, stderr=subprocess.PIPE,
                                  text=True, env=env, timeout=120)
        assert done.returncode == 3, done.stderr
        assert done.stderr.strip() == ("cannot write the record to standard output: No space "
                                       "left on device")
        # the reader gone (``| head -1``): the same status and message, table or JSON
        proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        proc.stdout.close()
        gone = proc.stderr.read()
        assert proc.wait(timeout=120) == 3, gone
        assert gone.strip() == "cannot write the record to standard output: Broken pipe"
    # standard output closed and no --output: said before the score
    closed = subprocess.run(cmd, stdout=None, stderr=subprocess.PIPE, text=True, env=env,
                            timeout=120, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2
    assert "standard output is closed and no --output is given" in closed.stderr


def test_cli_one_input_at_most_is_read_from_stdin(mini_task, tmp_path):
    for extra in (["--message-file", "-"], ["--transcript", "-"]):
        res = CliRunner().invoke(app, ["score", str(mini_task), "-", *extra], input="")
        assert res.exit_code == 2
        assert "can be read from standard input" in res.output


def test_cli_a_directory_as_patch_file_exits_2_and_says_so(mini_task, tmp_path):
    result = CliRunner().invoke(app, ["score", str(mini_task), str(tmp_path)])
    assert result.exit_code == 2
    assert "patch file is a directory" in result.output
    (tmp_path / "p.diff").write_bytes(MINI_PATCH)
    said = CliRunner().invoke(app, ["score", str(mini_task), str(tmp_path / "p.diff"),
                                    "--message-file", str(tmp_path)])
    assert said.exit_code == 2 and "--message-file is a directory" in said.output


def test_input_files_that_are_not_regular_files_are_read(tmp_path):
    """``/dev/null``, a pipe (``<(cmd)`` gives ``/dev/fd/N``), an unreadable file, and
    ``-`` with standard input closed: the bytes or a message naming the file."""
    import os
    import sys

    from proctor.input_files import InputFileError, read_input

    assert read_input("/dev/null", "patch file") == b""
    with pytest.raises(InputFileError, match=r"patch file /dev/zero holds more than 256 MiB"):
        read_input("/dev/zero", "patch file")  # never read whole
    r, w = os.pipe()
    os.write(w, b"diff --git a/x b/x\n")
    os.close(w)
    try:
        assert read_input(f"/proc/self/fd/{r}", "patch file") == b"diff --git a/x b/x\n"
    finally:
        os.close(r)
    secret = tmp_path / "secret.diff"
    secret.write_bytes(b"x")
    secret.chmod(0)
    if os.geteuid() != 0:  # root reads it anyway
        with pytest.raises(InputFileError, match="cannot read patch file .*secret.diff"):
            read_input(secret, "patch file")
    saved = sys.stdin
    try:
        sys.stdin = None
        with pytest.raises(InputFileError, match="standard input is closed"):
            read_input("-", "patch file")
    finally:
        sys.stdin = saved


def _set(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


# (case id, task.toml transform, text that must appear in the message after the file name)
BAD_TOMLS = [
    ("bad_toml", lambda t: _set(t, 'sources = ["pkg"]', 'sources = ["pkg"'),
     "not valid TOML"),
    ("missing_tests_public", lambda t: _set(t, 'public = ["tests/test_pub.py"]\n', ""),
     "field 'tests.public': Field required"),
    ("wrong_type_per_test", lambda t: _set(t, "per_test = 30", 'per_test = "fast"'),
     "field 'timeouts.per_test': Input should be a valid number"),
    ("unknown_top_level_key", lambda t: 'colour = "red"\n' + t,
     "field 'colour': Extra inputs are not permitted"),
    ("unknown_nested_key", lambda t: _set(t, "per_test = 30", "per_tset = 30"),
     "field 'timeouts.per_tset': Extra inputs are not permitted"),
    ("public_path_missing", lambda t: _set(t, "tests/test_pub.py", "tests/test_nope.py"),
     "field 'tests.public': 'tests/test_nope.py' does not exist in repo/"),
    ("public_path_escapes_repo", lambda t: _set(t, "tests/test_pub.py", "../x.py"),
     "field 'tests.public': Value error, must be a relative path inside repo/, got '../x.py'"),
    ("hidden_dir_missing", lambda t: _set(t, 'hidden_dir = "hidden"', 'hidden_dir = "nope"'),
     "field 'tests.hidden_dir': directory"),
]


@pytest.mark.parametrize("transform,expected", [c[1:] for c in BAD_TOMLS],
                         ids=[c[0] for c in BAD_TOMLS])
def test_invalid_task_toml_names_file_and_field(mini_task, transform, expected):
    toml = mini_task / "task.toml"
    toml.write_text(transform(toml.read_text()))
    with pytest.raises(TaskConfigError) as info:
        load_task(mini_task)
    message = str(info.value)
    assert message.startswith(f"{toml}: "), message
    assert expected in message
    # The same task through score(): an error record with the same message, not a crash.
    rec = score(mini_task, MINI_PATCH)
    assert_error(rec, "task_config", retryable=False)
    assert rec.error.message == message


def test_bad_toml_message_points_at_the_line(mini_task):
    toml = mini_task / "task.toml"
    toml.write_text(_set(toml.read_text(), "per_test = 30", "per_test = "))
    with pytest.raises(TaskConfigError, match=r"task\.toml: not valid TOML: .*line 9"):
        load_task(mini_task)


def test_missing_task_toml_and_repo(mini_task):
    shutil.rmtree(mini_task / "repo")
    with pytest.raises(TaskConfigError, match=r"missing repo/ directory"):
        load_task(mini_task)
    (mini_task / "task.toml").unlink()
    with pytest.raises(TaskConfigError, match=r"task\.toml: missing"):
        load_task(mini_task)


def test_cli_invalid_task_exits_2(mini_task, tmp_path):
    toml = mini_task / "task.toml"
    toml.write_text(_set(toml.read_text(), "per_test = 30", 'per_test = "fast"'))
    patch = tmp_path / "p.diff"
    patch.write_bytes(MINI_PATCH)
    for args in (["score", str(mini_task), str(patch)], ["task", "check", str(mini_task)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, args
        assert "timeouts.per_test" in result.output


# --------------------------------------------------------------------------- the patch


@pytest.mark.parametrize("patch", [b"", b"\n", b"  \n\t\r\n"], ids=["zero_bytes", "newline",
                                                                  "whitespace"])
def test_empty_patch(mini_task, patch):
    assert_honest_zero(score(mini_task, patch), "empty_patch")


def test_patch_not_utf8(mini_task):
    latin1 = MINI_PATCH.replace(b"return 2", "return 'caf\u00e9'".encode("latin-1"))
    rec = score(mini_task, latin1)
    assert_honest_zero(rec, "patch_not_utf8")
    assert "not UTF-8" in rec.component_notes["reason"]


def test_patch_over_10_mib_is_too_large(mini_task):
    big = MINI_PATCH + b"+" + b"x" * MAX_PATCH_BYTES + b"\n"
    rec = score(mini_task, big)
    assert_honest_zero(rec, "patch_too_large")
    assert str(MAX_PATCH_BYTES) in rec.component_notes["reason"]


def test_patch_of_exactly_10_mib_is_not_too_large(mini_task):
    garbage = b"x" * MAX_PATCH_BYTES
    assert MAX_PATCH_BYTES == 10 * 1024 * 1024
    assert score(mini_task, garbage).reason == "patch_unparseable"


@pytest.mark.parametrize("patch", [
    b"I fixed the bug, trust me.\n",
    b"diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ nope @@\n",
    b"--- a/pkg/mod.py\n+++ b/pkg/mod.py\n",
], ids=["prose", "malformed_hunk_header", "headers_without_hunk"])
def test_garbage_patch_is_unparseable(mini_task, patch):
    assert_honest_zero(score(mini_task, patch), "patch_unparseable")


def test_patch_as_str_is_scored_like_bytes(mini_task):
    assert score(mini_task, "").reason == "empty_patch"
    assert score(mini_task, "not a diff\n").reason == "patch_unparseable"


# --------------------------------------------------------------------------- the machine


def test_engine_unreachable_is_a_retryable_error(mini_task, tmp_path, monkeypatch):
    # explicitly Docker: without a choice Proctor falls back to the local backend
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    rec = score(mini_task, MINI_PATCH, sandbox="docker")  # asked for: no local fallback
    assert_error(rec, "engine_unavailable", retryable=True)
    assert "Docker engine unreachable" in rec.error.message
    assert "start one with `bash scripts/provision-docker.sh`" in rec.error.message
    assert "DOCKER_HOST" in rec.error.message
    assert rec.integrity.violated is False  # integrity ran first and passed


def test_cli_engine_unreachable_exits_3(mini_task, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    patch = tmp_path / "p.diff"
    patch.write_bytes(MINI_PATCH)
    result = CliRunner().invoke(app, ["score", str(mini_task), str(patch), "--json",
                                      "--sandbox", "docker"])
    assert result.exit_code == 3
    rec = RewardRecord.model_validate_json(result.stdout)
    assert rec.status == "error" and rec.reward is None
    assert rec.error.kind == "engine_unavailable"


def test_violation_is_scored_without_an_engine(mini_task, tmp_path, monkeypatch):
    """Integrity runs before anything touches Docker: a violation is -1.0 even then."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    patch = MINI_PATCH.replace(b"pkg/mod.py", b"tests/test_hidden.py")
    rec = score(mini_task, patch)
    assert rec.status == "scored" and rec.reward == -1.0
    assert rec.reason == "integrity_violation"
    assert rec.integrity.paths == ["tests/test_hidden.py"]


@pytest.mark.docker
def test_sandbox_image_missing(mini_task, count_containers):
    with count_containers() as counter:
        rec = score(mini_task, MINI_PATCH, image="proctor-sandbox:doesnotexist")
    assert counter.created == []
    assert_error(rec, "image_missing", retryable=False)
    assert "proctor-sandbox:doesnotexist is not built" in rec.error.message
    assert "run `proctor image build`" in rec.error.message


# --------------------------------------------------------------------------- bad tasks (docker)


def _copy_task(src: Path, dest: Path, public: list[str] | None = None,
               add: dict[str, str] | None = None) -> Path:
    """Copy of the toolz task with one baseline run (faster), optionally new public tests
    and extra files (task-relative path -> text)."""
    shutil.copytree(src, dest)
    for rel, text in (add or {}).items():
        (dest / rel).write_text(text)
    toml = dest / "task.toml"
    text = _set(toml.read_text(), "runs = 3", "runs = 1")
    if public is not None:
        listed = "".join(f'    "{p}",\n' for p in public)
        text, n = re.subn(r"(?m)^public = \[\n(?:    .*\n)*\]\n", f"public = [\n{listed}]\n", text)
        assert n == 1
    toml.write_text(text)
    assert load_task(dest).config.baseline.runs == 1
    return dest


@pytest.mark.docker
def test_public_suite_with_zero_tests_is_a_task_config_error(toolz_task, toolz_patches,
                                                             tmp_path):
    empty = "toolz/tests/test_empty.py"
    task = _copy_task(toolz_task, tmp_path / "task", public=[empty], add={f"repo/{empty}": ""})
    assert load_task(task).config.tests.public == [empty]
    rec = score(task, toolz_patches["reference"])
    assert_error(rec, "task_config", retryable=False)
    assert "suite 'public' collected zero tests" in rec.error.message
    result = CliRunner().invoke(app, ["task", "check", str(task)])
    assert result.exit_code == 2
    assert "zero tests" in result.output


SKIPPED_ON_PY311 = "toolz/tests/test_functoolz.py::test_compose_annotations_formats"


def _fixed_task_without_reference(toolz_task: Path, mk, dest: Path,
                                  known_broken: list[str]) -> Path:
    task = _copy_task(toolz_task, dest)
    buggy = task / "repo" / mk.BUGGY_FILE
    buggy.write_text(_set(buggy.read_text(), mk.GETTER_BUGGY, mk.GETTER_ORIGINAL))
    (task / "reference.patch").unlink()
    toml = task / "task.toml"
    toml.write_text(_set(toml.read_text(), "known_broken = []",
                         f"known_broken = {known_broken!r}".replace("'", '"')))
    assert load_task(task).config.tests.known_broken == known_broken
    return task


@pytest.mark.docker
def test_task_without_fail_to_pass_is_a_task_config_error(toolz_task, toolz_patches,
                                                           toolz_make_task, tmp_path):
    task = _fixed_task_without_reference(toolz_task, toolz_make_task, tmp_path / "task",
                                         [SKIPPED_ON_PY311])
    rec = score(task, toolz_patches["comment_mentions_hidden"])
    assert_error(rec, "task_config", retryable=False)
    assert rec.error.message == "task has no FAIL_TO_PASS test: no test fails on the base repo"


@pytest.mark.docker
def test_task_without_fail_to_pass_skipped_test_is_not_a_target(toolz_task, toolz_patches,
                                                                 toolz_make_task, tmp_path):
    task = _fixed_task_without_reference(toolz_task, toolz_make_task, tmp_path / "task", [])
    rec = score(task, toolz_patches["comment_mentions_hidden"])
    assert_error(rec, "task_config", retryable=False)


@pytest.mark.docker
def test_file_that_crashes_the_checkers_is_the_patchs_failure(toolz_task, make_toolz_patch):
    """Regression: a 200 KB chained expression overflows ruff's stack and CPython's compiler
    recursion limit. That used to be an infra error (unscored: a patch could hide its own
    failure from the trainer); it is the patch's failure of those steps: 0.0 each."""
    deep = "x = " + "1+" * 100_000 + "1\n"
    rec = score(toolz_task, make_toolz_patch({"toolz/deep.py": (None, deep)}))
    assert rec.status == "scored" and rec.error is None
    assert rec.components["compiled"] == 0.0
    assert "RecursionError" in rec.evidence["compiled"].details["failures"]["toolz/deep.py"]
    assert rec.components["static_analysis"] == 0.0
    assert rec.evidence["static_analysis"].details["step_failed"] == (
        "ruff failed on the patched files")
    assert rec.reward == pytest.approx(-0.0005)  # fixes nothing, breaks nothing; 1 code line
