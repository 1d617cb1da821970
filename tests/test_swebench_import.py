"""SWE-bench rows become tasks: real fix commits of ``parse`` (its whole history is
``tests/data/parse.bundle``, MIT, see ``tests/data/README.md``) mined into rows, imported,
the user's checkout only read, and every bad row an error naming the instance and the
cause while the others are imported. No sandbox here: the checked import and scoring of
the mined tasks are in ``tests/test_swebench_e2e.py``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from proctor.cli import app
from proctor.datasets import ImportOptions, RepoCache, RowError, import_row, read_rows
from proctor.datasets.agreement import compare
from proctor.datasets.import_run import REPORT_FILE, import_dataset
from proctor.datasets.mine import candidate_commits, row_from_commit
from proctor.suites import Baseline
from proctor.suites.baseline import SuiteBaseline
from proctor.task import load_task

DATA = Path(__file__).parent / "data"
PARSE = "r1chardj0n3s/parse"
#: Real fix commits of parse with their tests: the first four after the test suite was
#: split into tests/, the last three from when it was one root-level test_parse.py.
FIXES = ["35b9ffb", "9c9ec7f", "b1d2121", "20ab3de", "421c199", "1269006", "19689cf"]


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True,
                          text=True).stdout


@pytest.fixture(scope="module")
def parse_repo():
    with RepoCache(DATA) as cache:
        yield cache.get(PARSE)


@pytest.fixture(scope="module")
def rows(parse_repo):
    return [row_from_commit(parse_repo, PARSE, c) for c in FIXES]


def test_real_fix_commits_are_mined_with_the_tests_split_from_the_fix(parse_repo, rows):
    found = candidate_commits(parse_repo)
    assert all(any(c.startswith(f) for c in found) for f in FIXES)
    row = rows[1]  # 9c9ec7f "allow hyphen in field name"
    fix = parse_repo.commit("9c9ec7f")
    assert row.base_commit == parse_repo.commit("9c9ec7f^")
    assert row.instance_id == f"r1chardj0n3s__parse-{fix[:12]}"
    assert "+++ b/parse.py" in row.patch and "tests/" not in row.patch
    assert "+++ b/tests/test_parse.py" in row.test_patch
    assert "+++ b/parse.py" not in row.test_patch
    assert row.extra["fix_commit"] == fix


def test_rows_become_tasks(parse_repo, rows, tmp_path):
    for row in rows:
        done = import_row(row, parse_repo, tmp_path)
        assert done.status == "imported"
        task = load_task(done.task)
        fix = row.extra["fix_commit"]
        test_file = "tests/test_parse.py" if row is not rows[-1] and rows.index(row) < 4 \
            else "test_parse.py"
        assert not (done.task / "repo" / ".git").exists()
        assert (done.task / "repo" / "parse.py").read_text() == \
            git("--git-dir", str(parse_repo.git_dir), "show", f"{row.base_commit}:parse.py")
        assert (done.task / "hidden" / test_file).read_text() == \
            git("--git-dir", str(parse_repo.git_dir), "show", f"{fix}:{test_file}")
        assert (done.task / "reference.patch").read_text() == row.patch
        assert task.config.sources == ["parse.py"] and task.config.hidden_at_upstream_path
        if test_file.startswith("tests/"):  # the other test modules are public
            assert test_file not in task.config.tests.public
            assert "tests/test_bugs.py" in task.config.tests.public
        else:  # the only test module: its version before the test patch is public
            assert task.config.tests.public == ["test_parse.py"]
        subprocess.run(["git", "apply", "--check", str(done.task / "reference.patch")],
                       cwd=done.task / "repo", check=True)
    assert not list(tmp_path.glob(".*.partial"))


def test_a_second_import_resumes_and_a_changed_row_is_imported_again(parse_repo, rows,
                                                                    tmp_path):
    first = import_row(rows[0], parse_repo, tmp_path)
    (first.task / "marker").write_text("kept")
    assert import_row(rows[0], parse_repo, tmp_path).status == "kept"
    assert (first.task / "marker").exists()
    changed = rows[0].model_copy(update={"FAIL_TO_PASS": ["tests/test_parse.py::test_x"]})
    again = import_row(changed, parse_repo, tmp_path)
    assert again.status == "imported" and not (again.task / "marker").exists()
    assert json.loads((again.task / "swebench.json").read_text())["FAIL_TO_PASS"] == \
        ["tests/test_parse.py::test_x"]


def test_a_users_checkout_is_only_read(rows, tmp_path):
    checkout = tmp_path / "repos" / "r1chardj0n3s__parse"
    git("clone", "-q", str(DATA / "parse.bundle"), str(checkout))
    git("checkout", "-q", "-b", "work", cwd=checkout)
    (checkout / "parse.py").write_text("# local edit\n")  # uncommitted work of the user
    before = (git("status", "--porcelain", cwd=checkout), git("show-ref", cwd=checkout),
              (checkout / ".git" / "index").read_bytes())
    with RepoCache(tmp_path / "repos") as cache:
        done = import_row(rows[2], cache.get(PARSE), tmp_path / "tasks")
    assert done.status == "imported"
    assert (git("status", "--porcelain", cwd=checkout), git("show-ref", cwd=checkout),
            (checkout / ".git" / "index").read_bytes()) == before
    assert (checkout / "parse.py").read_text() == "# local edit\n"


def _bad_rows(rows) -> list:
    good = rows[0].model_dump(mode="json")
    other = rows[1].model_dump(mode="json")
    lines = other["test_patch"].splitlines(keepends=True)
    context = next(i for i, line in enumerate(lines) if line.startswith(" "))
    lines[context] = " # a context line the file does not have\n"
    return [
        good,
        {**other, "base_commit": "deadbeefdeadbeef", "instance_id": "no-such-commit"},
        {**other, "test_patch": "".join(lines),
         "instance_id": "test-patch-does-not-apply"},
        {**other, "patch": other["patch"].replace("\n ", "\n #", 1),
         "instance_id": "patch-does-not-apply"},
        "{not json",
        {k: v for k, v in other.items() if k != "patch"} | {"instance_id": "no-patch"},
        {**other, "repo": "someone/elsewhere", "instance_id": "unknown-repo"},
        # The variants' names: repo_name, commit_hash; FAIL_TO_PASS as a JSON string.
        {"instance_id": "aliases", "repo_name": PARSE, "commit_hash": other["base_commit"],
         "patch": other["patch"], "test_patch": other["test_patch"],
         "FAIL_TO_PASS": json.dumps(["tests/test_parse.py::test_hyphen"]),
         "PASS_TO_PASS": "[]", "created_at": "2024-06-10"},
        [1, 2],
    ]


def _write_jsonl(path: Path, items: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n"
                            for x in items), encoding="utf-8")
    return path


def test_each_bad_row_is_an_error_naming_it_and_the_others_are_imported(rows, tmp_path):
    rows_file = _write_jsonl(tmp_path / "rows.jsonl", _bad_rows(rows))
    outcomes = import_dataset(rows_file, DATA, tmp_path / "tasks", check=False)
    by_id = {o.instance: o for o in outcomes}
    assert [o.status for o in outcomes] == ["imported", "error", "error", "error", "error",
                                            "error", "error", "imported", "error"]
    assert "base_commit deadbeefdeadbeef is not in the repository" in \
        by_id["no-such-commit"].cause
    assert by_id["test-patch-does-not-apply"].cause.startswith(
        "test_patch does not apply to base_commit")
    assert by_id["patch-does-not-apply"].cause.startswith("patch does not apply")
    assert by_id["line 5"].cause.startswith("not JSON")
    assert by_id["no-patch"].cause == "field patch: Field required"
    assert "no repository for someone/elsewhere" in by_id["unknown-repo"].cause
    assert by_id["line 9"].cause == "not a JSON object (list)"
    stated = json.loads((tmp_path / "tasks" / "aliases" / "swebench.json").read_text())
    assert stated["FAIL_TO_PASS"] == ["tests/test_parse.py::test_hyphen"]
    assert stated["extra"] == {"created_at": "2024-06-10"}
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == \
        sorted([REPORT_FILE, "aliases", rows[0].instance_id])
    report = [json.loads(x) for x in (tmp_path / "tasks" / REPORT_FILE).read_text().splitlines()]
    assert [r["status"] for r in report] == [o.status for o in outcomes]


def test_the_command_prints_one_error_line_per_bad_row_and_exits_1(rows, tmp_path):
    rows_file = tmp_path / "rows.json"  # a .json list is read too
    rows_file.write_text(json.dumps(_bad_rows(rows)[:3]), encoding="utf-8")
    result = CliRunner().invoke(app, ["task", "import", "swebench", str(rows_file), "--repos",
                                      str(DATA), "-o", str(tmp_path / "tasks"), "--no-check"])
    assert result.exit_code == 1, result.output
    assert "no-such-commit: base_commit deadbeefdeadbeef" in result.output
    assert "test-patch-does-not-apply: test_patch does not apply" in result.output
    assert (tmp_path / "tasks" / rows[0].instance_id / "task.toml").is_file()


@pytest.mark.parametrize("args, message", [
    (["missing.jsonl"], "No such file"),
    (["rows.json"], "must be one list of rows"),
    (["rows.jsonl"], "no rows in rows.jsonl"),
    (["rows.jsonl", "--public", "some"], "--public must be one of others, all"),
    (["rows.jsonl", "--install", "maybe"], "--install must be one of auto, yes, no"),
    (["rows.jsonl", "--baseline-runs", "0"], "--baseline-runs must be 1 to 20"),
])
def test_bad_usage_exits_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.json").write_text('{"instance_id": "x"}')
    (tmp_path / "rows.jsonl").write_text("")
    result = CliRunner().invoke(app, ["task", "import", "swebench", *args, "--repos",
                                      str(DATA), "-o", "out", "--no-check"])
    assert result.exit_code == 2 and message in result.output, result.output


def _baseline(hidden: SuiteBaseline) -> Baseline:
    empty = SuiteBaseline(fail_to_pass=[], pass_to_pass=["t::p"], quarantined={},
                          base_runs=[{"t::p": "passed"}], reference_runs=[{"t::p": "passed"}])
    return Baseline(key="k", task_id="t", proctor_version="v", image_id="i", runs=2,
                    has_reference=True, suites={"public": empty, "hidden": hidden})


def test_agreement_sets_the_row_against_the_measured_lists(rows):
    runs = [{"a": "failed", "b": "passed", "c": "passed", "f": "failed"},
            {"a": "failed", "b": "passed", "c": "passed", "f": "passed"}]
    ref = [{"a": "passed", "b": "passed", "c": "passed", "f": "passed"}] * 2
    hidden = SuiteBaseline(fail_to_pass=["a"], pass_to_pass=["b", "c"],
                           quarantined={"f": "flaky on the base repo"},
                           base_runs=runs, reference_runs=ref)
    row = rows[0].model_copy(update={"FAIL_TO_PASS": ["a"], "PASS_TO_PASS": ["b", "c"]})
    assert compare(row, _baseline(hidden)).verdict == "agree"
    row = rows[0].model_copy(update={"FAIL_TO_PASS": ["a", "f", "ghost"],
                                     "PASS_TO_PASS": ["b"]})
    got = compare(row, _baseline(hidden))
    assert got.verdict == "differ"
    assert (got.fail_to_pass.equal, got.fail_to_pass.row_only) == (["a"], ["f", "ghost"])
    assert got.pass_to_pass.proctor_only == ["c"] and got.flaky == ["f"]
    assert got.missing == ["ghost"]
    assert got.as_json()["FAIL_TO_PASS"]["row_only"] == ["f", "ghost"]


def test_read_rows_never_raises_for_a_row(tmp_path):
    path = _write_jsonl(tmp_path / "r.jsonl", [
        {"instance_id": "a", "repo": "o/n", "base_commit": "abcd", "patch": "x",
         "FAIL_TO_PASS": "not a list"},
        {"instance_id": "b", "repo": "no-owner", "base_commit": "abcd", "patch": "x"},
        {"instance_id": "c", "repo": "o/n", "base_commit": "xyz!", "patch": "x"},
        {"instance_id": "d", "repo": "o/n", "base_commit": "abcd", "patch": "x",
         "install_config": {"pip_packages": ["six==1.16.0"]}}])
    got = list(read_rows(path))
    assert [r.error.instance if r.error else r.row.instance_id for r in got] == \
        ["a", "b", "c", "d"]
    assert "FAIL_TO_PASS" in got[0].error.cause and "repo" in got[1].error.cause
    assert "base_commit" in got[2].error.cause
    assert got[3].row.requirements == ["six==1.16.0"]


def test_row_error_names_instance_and_cause():
    exc = RowError("x-1", "base_commit abc is not in the repository")
    assert str(exc) == "x-1: base_commit abc is not in the repository"


def test_no_scratch_clone_is_left_behind(tmp_path):
    with RepoCache(DATA) as cache:
        repo = cache.get(PARSE)
        scratch = repo.git_dir.parent
        assert scratch.exists()
    assert not scratch.exists()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_row_proctor_wrote_reads_back_as_the_same_row(rows, tmp_path):
    from proctor.datasets.swebench_rows import parse_row

    again = parse_row(json.loads(rows[0].model_dump_json()), 1).row
    assert again == rows[0] and again.extra == {"fix_commit": rows[0].extra["fix_commit"]}


@pytest.mark.parametrize("install, extra, expected", [
    ("auto", {}, False),
    ("auto", {"install_config": {"install": "pip install -e ."}}, True),
    ("yes", {}, True),
    ("no", {"install_config": {"install": "pip install -e ."}}, False),
])
def test_install_follows_the_row_or_the_option(parse_repo, rows, tmp_path, install, extra,
                                               expected):
    row = rows[0].model_copy(update={"extra": {**rows[0].extra, **extra}})
    done = import_row(row, parse_repo, tmp_path, ImportOptions(install=install))
    assert load_task(done.task).config.install is expected


def test_files_no_measurement_reads_leave_the_fingerprint_and_the_baseline_key(
        parse_repo, rows, tmp_path):
    """Writing an import's bookkeeping (swebench.json, agreement.json, notes) into a task
    keeps its cached baseline; a change to what the runs read does not."""
    done = import_row(rows[0], parse_repo, tmp_path)
    before = load_task(done.task).fingerprint
    (done.task / "agreement.json").write_text("{}")
    (done.task / "swebench.json").write_text("{}")
    (done.task / "NOTES.md").write_text("looked at it")
    assert load_task(done.task).fingerprint == before
    hidden = next((done.task / "hidden").rglob("*.py"))
    hidden.write_text(hidden.read_text() + "\n# changed\n")
    assert load_task(done.task).fingerprint != before
    (done.task / "reference.patch").unlink()
    assert load_task(done.task).fingerprint not in (before,)


def test_a_multi_line_cause_is_one_error_line():
    from proctor.datasets.import_run import one_line

    text = ("resolve failed:\nWARNING: Location 'file:///x' is ignored\n"
            "ERROR: No matching distribution found for nope==1\n")
    assert one_line(text) == ("resolve failed: | ERROR: No matching distribution found "
                              "for nope==1")
    assert len(one_line("x" * 1000)) == 400


def test_other_options_import_again_and_a_duplicate_instance_is_an_error(parse_repo, rows,
                                                                         tmp_path):
    assert import_row(rows[0], parse_repo, tmp_path).status == "imported"
    again = import_row(rows[0], parse_repo, tmp_path, ImportOptions(baseline_runs=2))
    assert again.status == "imported"
    assert load_task(again.task).config.baseline.runs == 2
    rows_file = _write_jsonl(tmp_path / "dup.jsonl", [rows[1].model_dump(mode="json")] * 2)
    outcomes = import_dataset(rows_file, DATA, tmp_path / "tasks", check=False)
    assert [o.status for o in outcomes] == ["imported", "error"]
    assert outcomes[1].cause == "duplicate instance_id (line 2; first at line 1): the first is kept"


# --------------------------------------------------------------------------- odd rows


def _row_from_edit(checkout: Path, base: str, edit, test_paths: list[str], instance: str):
    """A row whose test_patch is ``git diff`` (git's own quoting) of ``edit`` on ``base``."""
    git("checkout", "-q", "-f", base, cwd=checkout)
    edit(checkout)
    git("add", "-A", cwd=checkout)
    test_patch = git("diff", "--cached", "--", *test_paths, cwd=checkout)
    patch = git("diff", "--cached", "--", ".", *(f":(exclude){p}" for p in test_paths),
                cwd=checkout)
    git("reset", "-q", "--hard", cwd=checkout)
    return {"instance_id": instance, "repo": PARSE, "base_commit": base,
            "patch": patch, "test_patch": test_patch}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("repos") / "r1chardj0n3s__parse"
    git("clone", "-q", str(DATA / "parse.bundle"), str(path))
    return path


def _fix(repo: Path) -> None:
    (repo / "parse.py").write_text((repo / "parse.py").read_text() + "\n# fixed\n")


def test_odd_test_patches_are_rows_or_clear_errors(checkout, rows, tmp_path):
    base = rows[0].base_commit

    def unicode_name(repo):
        _fix(repo)
        (repo / "tests" / "data").mkdir()
        (repo / "tests" / "data" / "ünï.txt").write_text("dätä\n")

    def symlink(repo):
        _fix(repo)
        (repo / "tests" / "secret.txt").symlink_to("/etc/hostname")

    def fix_in_tests(repo):  # the fix is in the test patch, the patch only edits the README
        _fix(repo)
        (repo / "README.rst").write_text((repo / "README.rst").read_text() + "\nMore.\n")
        (repo / "tests" / "test_more.py").write_text("def test_x():\n    pass\n")

    made = [_row_from_edit(checkout, base, unicode_name, ["tests"], "unicode"),
            _row_from_edit(checkout, base, symlink, ["tests"], "symlink"),
            _row_from_edit(checkout, base, fix_in_tests, ["tests", "parse.py"], "fix-in-tests")]
    no_prefix = dict(made[0], instance_id="no-prefix", test_patch=made[0]["test_patch"]
                     .replace("a/tests/", "tests/").replace("b/tests/", "tests/"))
    no_tests = dict(made[0], instance_id="no-test-patch", test_patch=None)
    rows_file = _write_jsonl(tmp_path / "odd.jsonl",
                             [*made, no_prefix, no_tests,
                              dict(made[0], instance_id="import-report.jsonl")])
    outcomes = {o.instance: o for o in import_dataset(rows_file, checkout.parent,
                                                      tmp_path / "tasks", check=False)}
    assert outcomes["unicode"].status == "imported", outcomes["unicode"].cause
    hidden = outcomes["unicode"].task / "hidden" / "tests" / "data" / "ünï.txt"
    assert hidden.read_text() == "dätä\n"
    assert outcomes["no-prefix"].status == "imported", outcomes["no-prefix"].cause
    assert (outcomes["no-prefix"].task / "hidden" / "tests" / "data" / "ünï.txt").is_file()
    assert outcomes["symlink"].cause == ("test_patch makes tests/secret.txt a symbolic link: "
                                         "a hidden test file must be a regular file")
    assert outcomes["fix-in-tests"].cause.startswith(
        "test_patch changes files that are not tests: parse.py")
    assert outcomes["no-test-patch"].cause.startswith("no test_patch")
    assert outcomes["import-report.jsonl"].cause == (
        "the instance_id is the name of a file the import writes")
    assert not list((tmp_path / "tasks").glob(".*partial*"))
    assert (tmp_path / "tasks" / "import-report.jsonl").is_file()


def test_relative_paths_to_a_checkout_and_the_output(checkout, rows, tmp_path, monkeypatch):
    monkeypatch.chdir(checkout.parent.parent)
    rows_file = _write_jsonl(tmp_path / "r.jsonl", [rows[2].model_dump(mode="json")])
    result = CliRunner().invoke(app, ["task", "import", "swebench", str(rows_file), "--repos",
                                      checkout.parent.name, "-o", "relative-out",
                                      "--no-check"])
    assert result.exit_code == 0, result.output
    task = checkout.parent.parent / "relative-out" / rows[2].instance_id
    assert (task / "task.toml").is_file() and oct(task.stat().st_mode & 0o777) == "0o755"


def test_the_row_s_own_names_win_over_aliases_and_numbers_are_text():
    from proctor.datasets.swebench_rows import parse_row

    got = parse_row({"instance_id": "a", "repo": "o/n", "base_commit": "abcd", "patch": "x",
                     "f2p": ["alias"], "FAIL_TO_PASS": ["own"], "version": 0.2,
                     "PASS_TO_PASS": None, "test_patch": None}, 1).row
    assert got.FAIL_TO_PASS == ["own"] and got.extra == {"f2p": ["alias"]}
    assert got.version == "0.2" and got.PASS_TO_PASS == [] and got.test_patch == ""


def test_the_checks_of_an_import_stay_within_the_sandbox_cap(rows, tmp_path, monkeypatch):
    """Each check holds a sandbox slot while its sandboxes live: with a cap of 1, two jobs
    check one task at a time (and the baseline's second sandbox finds no slot left over)."""
    import threading
    import time

    import proctor.harness.pipeline as pipeline
    import proctor.sandbox as sandbox
    from proctor.errors import TaskConfigError
    from proctor.harness.pipeline import slots

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(slots, "_max", 1)
    monkeypatch.setattr(sandbox, "choose_backend", lambda backend: "docker")
    monkeypatch.setattr(sandbox, "resolve_env", lambda *args: ("img", "sha256:img"))
    lock, live, seen = threading.Lock(), [0], []

    def fake_baseline(task, *args, **kwargs):
        with lock:
            live[0] += 1
            seen.append((live[0], slots.stats()["in_use"]))
        time.sleep(0.3)
        with lock:
            live[0] -= 1
        raise TaskConfigError("no FAIL_TO_PASS test (a fake baseline)")

    monkeypatch.setattr(pipeline, "task_baseline", fake_baseline)
    rows_file = _write_jsonl(tmp_path / "rows.jsonl",
                             [r.model_dump(mode="json") for r in rows[:2]])
    outcomes = import_dataset(rows_file, DATA, tmp_path / "tasks", check=True, jobs=2)
    assert len(outcomes) == 2 and all(o.agreement is not None for o in outcomes)
    assert seen == [(1, 1), (1, 1)]  # one check at a time, each holding the one slot
