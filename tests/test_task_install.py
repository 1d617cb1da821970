"""The task field ``install``: the (patched) repo pip-installed offline in every sandbox that
runs tests, so tests that read the package's metadata (``importlib.metadata.version``, entry
points) are a task.

Bad input is a ``TaskConfigError`` at load naming the field. End to end (real Docker
sandboxes, real setuptools build): a flat-layout setuptools project whose ``__init__`` reads
its own version from the installed metadata; the reference fix, the same task without
``install``, a patch that breaks the build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor import load_task, score
from proctor.errors import TaskConfigError
from proctor.harness.pipeline import INSTALL_FAILED, NOT_RUN_NOTE
from proctor.harness.pipeline.install import InstallResult, install_script, tail_bytes
from proctor.patch import code_lines_changed
from proctor.rewards import diff_cost
from proctor.sandbox import SITE_DIR
from tests.test_redteam_corpus import make_patch

PYPROJECT = """\
[build-system]
requires = ["setuptools", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "verpkg"
version = "1.2.3"

[project.entry-points."verpkg.plugins"]
hello = "verpkg.core:hello"

[tool.setuptools]
packages = ["verpkg"]
"""
INIT = ('from importlib.metadata import version\n\nfrom verpkg.core import add, hello\n\n'
        '__version__ = version("verpkg")\n__all__ = ["add", "hello"]\n')
CORE = 'def add(a, b):\n    return a - b\n\n\ndef hello():\n    return "hi"\n'
FIXED = CORE.replace("return a - b", "return a + b")
PUBLIC = """\
import importlib.metadata as md

import verpkg


def test_version():
    assert md.version("verpkg") == "1.2.3" == verpkg.__version__


def test_entry_point():
    eps = md.entry_points(group="verpkg.plugins")
    assert sorted(e.name for e in eps) == ["hello"]
    assert eps["hello"].load()() == "hi"


def test_add():
    assert verpkg.add(2, 3) == 5
"""
HIDDEN = ("import verpkg\n\n\ndef test_add_negative():\n    assert verpkg.add(-2, -3) == -5\n"
          "\n\ndef test_add_zero():\n    assert verpkg.add(0, 7) == 7\n")
TOML = ('id = "verpkg"\nsources = ["verpkg"]\n{install}\n{requirements}\n'
        '[tests]\npublic = ["tests/test_public.py"]\n\n[baseline]\nruns = 1\n')
#: setuptools 66.1.1 (the image's) builds wheels only with the ``wheel`` package.
WHEEL = 'requirements = ["wheel==0.45.1"]'
BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.local)]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def build(dest: Path, install: str = "install = true", requirements: str = WHEEL,
          pyproject: str | None = PYPROJECT) -> Path:
    """A setuptools task in ``dest``: ``add`` subtracts; ``reference.patch`` fixes it."""
    files = {"task.toml": TOML.format(install=install, requirements=requirements),
             "repo/verpkg/__init__.py": INIT, "repo/verpkg/core.py": CORE,
             "repo/tests/test_public.py": PUBLIC, "hidden/tests/test_hidden.py": HIDDEN}
    if pyproject is not None:
        files["repo/pyproject.toml"] = pyproject
    _write(dest, files)
    patch = make_patch(dest / "repo", {"verpkg/core.py": FIXED}, dest.parent / "scratch")
    (dest / "reference.patch").write_bytes(patch)
    return dest


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("install") / "task")


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("line", ['install = "true"', "install = 1", "install = []"])
def test_install_must_be_a_boolean(tmp_path, line):
    with pytest.raises(TaskConfigError, match="field .install.: Input should be a valid boolean"):
        load_task(build(tmp_path / "task", install=line))


def test_install_without_pyproject_or_setup_py_is_refused(tmp_path):
    with pytest.raises(TaskConfigError, match="field 'install': repo/ has neither "
                                              "pyproject.toml nor setup.py"):
        load_task(build(tmp_path / "task", pyproject=None))


def test_install_with_a_setup_py_and_no_pyproject_loads(tmp_path):
    root = build(tmp_path / "task", pyproject=None)
    (root / "repo" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    assert load_task(root).config.install is True


@pytest.mark.parametrize(("text", "why"), [
    ("[project\nname = 1\n", "is not valid TOML"),
    ('build-system = "setuptools"\n', "must be a table"),
    ('[build-system]\nrequires = "setuptools"\n', "must be a table"),
    ('[build-system]\nbuild-backend = 3\n', "must be a table"),
])
def test_install_with_a_pyproject_pip_cannot_read_is_refused(tmp_path, text, why):
    with pytest.raises(TaskConfigError, match="field 'install'") as exc:
        load_task(build(tmp_path / "task", pyproject=text))
    assert why in str(exc.value) and "pyproject.toml" in str(exc.value)


def test_a_pyproject_without_build_system_is_accepted(tmp_path):
    """pip then builds with setuptools' legacy backend."""
    task = load_task(build(tmp_path / "task", pyproject='[project]\nname = "verpkg"\n'))
    assert task.config.install is True


def test_the_site_dir_follows_the_pythonpath_only_with_install(tmp_path):
    on = load_task(build(tmp_path / "on"))
    assert on.pythonpath_in("/work/repo") == [SITE_DIR] == ["/work/.proctor-site"]
    off = load_task(build(tmp_path / "off", install=""))
    assert off.config.install is False and off.pythonpath_in("/work/repo") == []


def test_the_site_dir_comes_after_the_pythonpath_dirs(tmp_path):
    """A src layout's own files are imported before the installed copy (mutants live there)."""
    root = build(tmp_path / "task", install='install = true\npythonpath = ["verpkg"]')
    assert load_task(root).pythonpath_in("/m/repo") == ["/m/repo/verpkg", SITE_DIR]


def test_the_site_dir_is_outside_the_repo_and_made_afresh():
    script = install_script("/work/repo", "abc")
    assert not SITE_DIR.startswith("/work/repo/")
    lines = script.splitlines()
    assert lines[1] == 'echo "@@proctor-abc-start $(date +%s.%N)"'  # before the build runs
    assert lines[2] == f"rm -rf -- {SITE_DIR} || exit 90"  # before anything else runs
    assert "--target /work/.proctor-site ." in script and "--no-index" in script
    assert "--no-build-isolation" in script and " -e " not in script


def test_tail_bytes_keeps_the_last_bytes_at_a_character_boundary():
    assert tail_bytes("abcdef", 4) == "cdef"
    assert tail_bytes("abc", 4) == "abc"
    # "xéxéxé" is 9 bytes; its last 4 start inside an "é", which is dropped
    assert tail_bytes("xé" * 3, 4) == "xé"


def test_an_install_failure_summary_names_pip_and_its_last_line():
    res = InstallResult(ok=False, exit_code=1, output="Processing .\nerror: boom\n\n",
                        duration_s=1.0, timed_out=False, command="pip install")
    assert res.summary() == f"{INSTALL_FAILED}: pip exited 1: error: boom"
    quoted = InstallResult(ok=False, exit_code=1, duration_s=1.0, timed_out=False,
                           command="pip install", output=(
                               "  ╰─> [2 lines of output]\n      running dist_info\n"
                               "      configuration error: `project.version` must be pep440\n"
                               "      [end of output]\n\nerror: metadata-generation-failed\n"
                               "hint: See above for details.\n"))
    assert quoted.summary() == (f"{INSTALL_FAILED}: pip exited 1: configuration error: "
                                "`project.version` must be pep440")
    late = InstallResult(ok=False, exit_code=124, output="", duration_s=9.0, timed_out=True,
                         command="pip install")
    assert late.summary() == f"{INSTALL_FAILED}: timed out"


# ------------------------------------------------------------------------------ end to end

@pytest.mark.parametrize("backend", BACKENDS)
def test_reference_fix_scores_every_component_with_the_package_installed(task_dir, backend):
    patch = (task_dir / "reference.patch").read_bytes()
    rec = score(load_task(task_dir), patch, rollout_id="reference", sandbox=backend)
    assert rec.status == "scored", rec.error
    assert rec.reason is None
    assert rec.tests["public"].fail_to_pass == {"tests/test_public.py::test_add": "passed"}
    assert rec.tests["public"].pass_to_pass == {
        "tests/test_public.py::test_version": "passed",
        "tests/test_public.py::test_entry_point": "passed"}
    assert rec.tests["hidden"].fail_to_pass == {
        "tests/test_hidden.py::test_add_negative": "passed",
        "tests/test_hidden.py::test_add_zero": "passed"}
    assert rec.components["public_tests"] == rec.components["hidden_tests"] == 1.0
    assert rec.components["mutation_score"] == 1.0  # mutants of verpkg/core.py, imported
    assert rec.evidence["install"].exit_code == 0
    assert rec.evidence["install_hidden"].exit_code == 0
    assert "Successfully installed verpkg-1.2.3" in rec.evidence["install"].output
    assert rec.reward == pytest.approx(1.0 - diff_cost(code_lines_changed(patch.decode())))


@pytest.mark.docker
def test_without_install_the_package_has_no_metadata_and_the_task_is_refused(tmp_path):
    """The same task without the field: ``import verpkg`` raises PackageNotFoundError on the
    base repo and with the fix, which no patch could be fairly scored against."""
    task = load_task(build(tmp_path / "task", install=""))
    rec = score(task, (task.root / "reference.patch").read_bytes(), rollout_id="no-install")
    assert rec.status == "error" and rec.reward is None
    assert rec.error is not None and rec.error.kind == "task_config"
    # the hidden module imports verpkg at its top: it cannot be collected with the fix
    assert rec.error.message == (
        f"{task.root}: hidden tests cannot be collected on the reference patch: "
        f"tests/test_hidden.py (see {task.hidden}); the hidden tests must import and "
        "collect once the reference patch is applied")


@pytest.mark.docker
def test_without_wheel_the_base_repo_does_not_build_and_the_task_is_refused(tmp_path):
    task = load_task(build(tmp_path / "task", requirements=""))
    rec = score(task, (task.root / "reference.patch").read_bytes(), rollout_id="no-wheel")
    assert rec.status == "error" and rec.reward is None and rec.error is not None
    assert rec.error.kind == "task_config"
    assert rec.error.message.startswith(f"{task.root}: ")
    assert "field 'install': the base repo does not install (pip exited 1; setuptools " \
           "before 70.1 builds wheels only with the 'wheel' package" in rec.error.message
    assert "invalid command 'bdist_wheel'" in rec.error.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_patch_that_breaks_the_build_fails_its_suites_as_install_failed(task_dir, tmp_path,
                                                                          backend):
    """The fix plus a ``[project] version`` setuptools refuses (an edit the integrity rules
    allow): scored, never an error; every test failed, reason ``install_failed``."""
    broken = PYPROJECT.replace('version = "1.2.3"', 'version = "1.2.3 beta"')
    patch = make_patch(task_dir / "repo", {"verpkg/core.py": FIXED,
                                           "pyproject.toml": broken}, tmp_path / "scratch")
    rec = score(load_task(task_dir), patch, rollout_id="broken-build", sandbox=backend)
    assert rec.status == "scored", rec.error
    assert rec.reason == INSTALL_FAILED and not rec.integrity.violated
    # the metadata tests passed on the base repo: not run now, they are broken (P2P)
    assert rec.tests["public"].fail_to_pass == {"tests/test_public.py::test_add": "missing"}
    assert rec.tests["public"].pass_to_pass == {
        "tests/test_public.py::test_version": "missing",
        "tests/test_public.py::test_entry_point": "missing"}
    assert rec.components["public_tests"] == -1.0 and rec.components["hidden_tests"] == 0.0
    assert rec.components["compiled"] == rec.components["static_analysis"] == 1.0
    assert rec.components["mutation_score"] is None  # no progress: cannot change the reward
    # progress 0: only the public suite's regressions and the diff cost count
    assert rec.weights["public_tests"] == 0.25
    assert rec.reward == pytest.approx(-0.25 - diff_cost(code_lines_changed(patch.decode())))
    for key in ("install", "install_hidden"):
        assert rec.evidence[key].exit_code not in (0, None)
        assert "project.version" in rec.evidence[key].output
        assert len(rec.evidence[key].output.encode()) <= 4000
    note = rec.measurements.notes["public_tests"]
    assert note == ("install_failed: pip exited 1: configuration error: `project.version` "
                    "must be pep440")
    assert rec.measurements.notes["hidden_tests"] == note
    assert rec.evidence["public_tests"].command == "not run: install_failed"
    assert rec.evidence["public_tests"].details["ended_early"] == ["install_failed"]
    assert rec.component_notes["public_tests"] == note


#: A build script that writes a conftest.py into the repository under test (outside the copy
#: pip builds), after the tamper checks judged the tree.
SETUP_WRITES_REPO = """\
import pathlib

from setuptools import setup

target = pathlib.Path("/work/repo") / "tests" / ("conf" + "test.py")
target.write_text("def pytest_collection_modifyitems(items):\\n    items.clear()\\n")
setup()
"""


@pytest.mark.docker
def test_a_build_that_writes_into_the_repository_is_an_integrity_violation(task_dir,
                                                                          tmp_path):
    patch = make_patch(task_dir / "repo", {"verpkg/core.py": FIXED,
                                           "setup.py": SETUP_WRITES_REPO}, tmp_path / "s")
    rec = score(load_task(task_dir), patch, rollout_id="build-writes-repo")
    assert rec.status == "scored", rec.error
    assert rec.reward == -1.0 and rec.reason == "integrity_violation"
    assert rec.integrity.violated
    assert [r for r in rec.integrity.reasons if "install" in r] == [
        "tests: changed in the repository by the install's build code",
        "tests/conftest.py: changed in the repository by the install's build code"]
    assert rec.evidence["install"].details["repo_changes"] == ["tests", "tests/conftest.py"]


@pytest.mark.docker
def test_an_honest_build_leaves_the_repository_unchanged(task_dir):
    """The control: the reference fix's build (in a copy) changes nothing in the repo."""
    rec = score(load_task(task_dir), (task_dir / "reference.patch").read_bytes(),
                rollout_id="honest-build")
    assert rec.status == "scored" and not rec.integrity.violated
    assert rec.evidence["install"].details["repo_changes"] == []
    assert rec.evidence["install_hidden"].details["repo_changes"] == []


#: A build script that leaves processes behind (setuptools runs it more than once): each
#: waits for the pristine public tests to be put back (a new inode: after the install and
#: its repository check), then empties every test collection through a conftest.py.
SETUP_LEAVES_DAEMON = """\
import os
import pathlib
import time

from setuptools import setup

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # pip reads the build's output until every holder closes it
            os.dup2(null, fd)
        public = pathlib.Path("/work/repo/tests/test_public.py")
        first = public.stat().st_ino
        for _ in range(1200):
            time.sleep(0.05)
            try:
                if public.stat().st_ino != first:
                    target = public.parent / ("conf" + "test.py")
                    target.write_text(
                        "def pytest_collection_modifyitems(items):\\n    items.clear()\\n")
                    break
            except OSError:
                pass
    os._exit(0)
os.wait()
setup()
"""


@pytest.mark.docker
def test_what_the_build_left_running_is_killed_before_the_tests(task_dir, tmp_path):
    patch = make_patch(task_dir / "repo", {"verpkg/core.py": FIXED,
                                           "setup.py": SETUP_LEAVES_DAEMON}, tmp_path / "s")
    rec = score(load_task(task_dir), patch, rollout_id="build-daemon")
    assert rec.status == "scored", rec.error
    assert not rec.integrity.violated and rec.reason is None
    assert rec.tests["public"].fail_to_pass == {"tests/test_public.py::test_add": "passed"}
    assert rec.components["public_tests"] == rec.components["hidden_tests"] == 1.0


@pytest.mark.docker
def test_without_overlap_the_record_is_the_same(task_dir):
    patch = (task_dir / "reference.patch").read_bytes()
    task = load_task(task_dir)
    one, two = (score(task, patch, rollout_id=f"overlap-{o}", overlap=o) for o in (True, False))
    assert one.status == two.status == "scored"
    assert one.components == two.components and one.reward == two.reward
    assert two.evidence["install_hidden"].exit_code == 0


@pytest.mark.waits
@pytest.mark.docker
def test_a_build_that_hangs_is_cut_by_the_deadline_and_its_suites_fail(tmp_path):
    root = build(tmp_path / "task")
    toml = root / "task.toml"
    toml.write_text(toml.read_text() + "\n[timeouts]\nper_patch = 10\nper_suite = 10\n")
    task = load_task(root)
    patch = make_patch(root / "repo", {"verpkg/core.py": FIXED, "setup.py":
                                       "import time\ntime.sleep(1000)\n"}, tmp_path / "s")
    rec = score(task, patch, rollout_id="build-hangs")
    assert rec.status == "scored", rec.error
    assert rec.measurements.notes["public_tests"].startswith(NOT_RUN_NOTE)
    assert rec.measurements.notes["hidden_tests"].startswith(NOT_RUN_NOTE)
    assert rec.components["public_tests"] == -1.0 and rec.components["hidden_tests"] == 0.0
    assert rec.evidence["install"].details["timed_out"] is True
    assert rec.timing["total_s"] - rec.timing["baseline_s"] < 10 + 10  # baseline: uncounted


@pytest.mark.parametrize(("path", "why"), [
    ("../.proctor-site/verpkg/__init__.py", "'..' escapes the repository"),
    ("/work/.proctor-site/verpkg/__init__.py", "absolute path"),
])
def test_a_patch_cannot_write_the_site_dir_before_the_install(task_dir, path, why):
    """Refused on the host, before any sandbox: the install's directory is outside the repo."""
    patch = (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
             f"+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n")
    rec = score(load_task(task_dir), patch, rollout_id="site-dir")
    assert rec.status == "scored" and rec.reward == -1.0
    assert rec.integrity.reasons == [f"{path}: {why}"]


BENCH = """\
import importlib.metadata as md

import verpkg

assert md.version("verpkg") == verpkg.__version__ == "1.2.3"
print("ops=", sum(verpkg.add(i, 1) for i in range(1000)))
"""


@pytest.mark.docker
def test_the_benchmark_imports_the_installed_package(tmp_path):
    root = build(tmp_path / "task")
    _write(root, {"bench/bench_add.py": BENCH})
    toml = root / "task.toml"
    toml.write_text(toml.read_text() + '\n[benchmark]\ncommand = ["{python}", '
                    '"{bench}/bench_add.py"]\ndir = "bench"\nmetric = "wall_s"\n'
                    'target = 5.0\nweight = 0.1\ntimeout_s = 30\nrepeat = 1\n')
    task = load_task(root)
    rec = score(task, (root / "reference.patch").read_bytes(), rollout_id="bench")
    assert rec.status == "scored", rec.error
    assert rec.evidence["performance"].exit_code == 0, rec.evidence["performance"].output
    assert f"run_bench.py /work/repo {SITE_DIR} -- " in rec.evidence["performance"].command
    assert rec.components["performance"] == 1.0


SRC_PYPROJECT = PYPROJECT.replace('packages = ["verpkg"]',
                                  'packages = ["verpkg"]\npackage-dir = {"" = "src"}')


def build_src(dest: Path, pythonpath: str) -> Path:
    """The same task in a src layout (``src/verpkg``), ``pythonpath`` as given."""
    toml = TOML.format(install="install = true", requirements=WHEEL).replace(
        'sources = ["verpkg"]', f'sources = ["src/verpkg"]\n{pythonpath}')
    _write(dest, {"task.toml": toml, "repo/pyproject.toml": SRC_PYPROJECT,
                  "repo/src/verpkg/__init__.py": INIT, "repo/src/verpkg/core.py": CORE,
                  "repo/tests/test_public.py": PUBLIC, "hidden/tests/test_hidden.py": HIDDEN})
    patch = make_patch(dest / "repo", {"src/verpkg/core.py": FIXED}, dest.parent / "scratch")
    (dest / "reference.patch").write_bytes(patch)
    return dest


@pytest.mark.docker
def test_a_src_layout_whose_tests_import_the_installed_copy_is_a_task_config_error(tmp_path):
    """Without ``pythonpath = ["src"]`` the tests import the installed copy, which mutation
    never mutates: every mutant would survive unseen. ``proctor task check`` says so, from
    the baseline's reach map, and names the field; with it the task is accepted and the
    reference scores full marks."""
    from typer.testing import CliRunner

    from proctor.cli import app

    bad = build_src(tmp_path / "bad", "")
    res = CliRunner().invoke(app, ["task", "check", str(bad)])
    assert res.exit_code == 2, res.output
    assert "no test entered a function under sources" in res.output
    assert "pythonpath" in res.output
    good = build_src(tmp_path / "good", 'pythonpath = ["src"]')
    rec = score(load_task(good), (good / "reference.patch").read_bytes())
    assert rec.status == "scored", rec.error
    assert rec.components["mutation_score"] == 1.0
    assert rec.reward == pytest.approx(1.0 - diff_cost(code_lines_changed(
        (good / "reference.patch").read_text())))


@pytest.mark.docker
def test_a_build_backend_missing_from_the_image_is_named_in_the_error(tmp_path):
    """The backend's module is named, with the fix (add it to requirements)."""
    task = load_task(build(tmp_path / "task", pyproject=PYPROJECT.replace(
        'requires = ["setuptools", "wheel"]\nbuild-backend = "setuptools.build_meta"',
        'requires = ["hatchling"]\nbuild-backend = "hatchling.build"')))
    rec = score(task, (task.root / "reference.patch").read_bytes(), rollout_id="no-backend")
    assert rec.status == "error" and rec.error.kind == "task_config"
    assert "the build needs 'hatchling', which the sandbox image lacks: add it (with its " \
           "plugins) to the task's requirements" in rec.error.message
