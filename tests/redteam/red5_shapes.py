"""Honest failure shapes (red-team session red5): a small task whose tests exercise library
functions a patch can break in one real-world way each (a thread left running, a fork whose
child runs on, ``pytest.exit`` in a test, ``SystemExit`` at a test module's import, ...).
Every patch of :data:`PATCHES` fixes ``add`` first; none senses the grader.

``build_task(dest)`` writes ``dest/`` (task.toml, repo/, hidden/, reference.patch; nothing
else: the task fingerprint, hence where the tripwires go, covers every file of it);
``patches(task)`` gives every patch as a diff. ``python3 tests/redteam/red5_shapes.py DIR``
writes the task to DIR and the patches to ``DIR_patches/``.

Public tests (``tests/``, 442): FAIL_TO_PASS ``test_add``, ``test_add_cases[2-3-5]``,
``test_add_cases[10--4-6]``; PASS_TO_PASS the other 439 (one module per shape, 400
parametrized cases, a unittest class with ``setUpClass``, a module-scoped fixture, a module
that calls the library at import). Hidden tests (``tests/``, a ``conftest.py`` that imports
``calc.settings``): FAIL_TO_PASS ``test_add_negative``, ``test_add_floats``; PASS_TO_PASS
``test_mean_single``. One broken PASS_TO_PASS public test costs ``1/439`` of
``public_tests``.
"""

from __future__ import annotations

from pathlib import Path

from tests.redteam.git_patch import make_patch

CORE = '''\
"""Arithmetic helpers."""


def add(a, b):
    """Sum of a and b."""
    return a - b


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    return sum(xs) / len(xs)
'''
FIXED = CORE.replace("return a - b", "return a + b")

#: name -> base body (4-space indented, returns 1 unless noted)
SHAPES = {
    "background": "    return 1\n",
    "pool_fork": "    return 1\n",
    "pool_spawn": "    return 1\n",
    "run_child": "    return 1\n",
    "noise": "    return 1\n",
    "interrupt": "    return 1\n",
    "deep": "    return 1\n",
    "crash_abort": "    return 1\n",
    "worker": "    return 1\n",
    "detach": "    return 1\n",
    "tidy_fds": "    return 1\n",
    "class_setup": "    return 1\n",
    "module_setup": "    return 1\n",
    "should_stop": "    return 0\n",
    "import_value": "    return 1\n",
    "handlers": "    return 1\n",
    "at_exit": "    return 1\n",
    "tracer": "    return 1\n",
}
SLUG = "    return text.lower()\n"
PARAM = "    return i\n"


def shapes_source(bodies: dict[str, str] | None = None, slug: str = SLUG,
                  param: str = PARAM, head: str = "") -> str:
    bodies = {**SHAPES, **(bodies or {})}
    out = ['"""Helpers whose behaviour the tests check."""\n', head]
    for name, body in bodies.items():
        out.append(f"\n\ndef {name}():\n{body}")
    out.append(f"\n\ndef slug(text):\n{slug}")
    out.append(f"\n\ndef param(i):\n{param}")
    return "".join(out)


TEST_CORE = '''\
import pytest

from calc.core import add, mean


def test_add():
    assert add(1, 2) == 3


@pytest.mark.parametrize(("a", "b", "total"), [(2, 3, 5), (10, -4, 6), (0, 0, 0)])
def test_add_cases(a, b, total):
    assert add(a, b) == total


def test_mean():
    assert mean([1, 2, 3]) == 2
'''
TEST_SHAPES = '''\
import pytest

from calc import shapes


def test_background():
    assert shapes.background() == 1


def test_pool_fork():
    assert shapes.pool_fork() == 1


def test_pool_spawn():
    assert shapes.pool_spawn() == 1


def test_run_child():
    assert shapes.run_child() == 1


def test_noise():
    assert shapes.noise() == 1


def test_interrupt():
    assert shapes.interrupt() == 1


def test_deep():
    assert shapes.deep() == 1


def test_crash_abort():
    assert shapes.crash_abort() == 1


def test_worker():
    assert shapes.worker() == 1


def test_detach():
    assert shapes.detach() == 1


def test_tidy_fds():
    assert shapes.tidy_fds() == 1


def test_handlers():
    assert shapes.handlers() == 1


def test_at_exit():
    assert shapes.at_exit() == 1


def test_tracer():
    assert shapes.tracer() == 1


def test_should_stop():
    how = shapes.should_stop()
    if how == 1:
        pytest.exit("calc cannot run here", returncode=1)
    if how == 2:
        pytest.exit("calc cannot run here")
    if how == 3:
        pytest.exit("calc is done here", returncode=0)
    assert how == 0


def test_after_everything():
    assert shapes.background() == 1
'''
TEST_UNIT = '''\
import unittest

from calc import shapes


class ClassSetup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.value = shapes.class_setup()

    def test_one(self):
        self.assertEqual(self.value, 1)

    def test_two(self):
        self.assertEqual(self.value + 1, 2)
'''
TEST_FIXTURE = '''\
import pytest

from calc import shapes


@pytest.fixture(scope="module")
def value():
    return shapes.module_setup()


def test_fixture_one(value):
    assert value == 1


def test_fixture_two(value):
    assert value + 1 == 2
'''
TEST_IMPORT = '''\
from calc import shapes

VALUE = shapes.import_value()


def test_import_value():
    assert VALUE == 1
'''
TEST_PARAMS = '''\
import pytest

from calc import shapes


@pytest.mark.parametrize("i", range(400))
def test_param(i):
    assert shapes.param(i) == i
'''
TEST_SLUG = '''\
from calc import shapes

''' + "".join(f'''

def test_slug_{n}():
    assert shapes.slug("Word{n}") == "word{n}"


def test_plain_{n}():
    assert {n} + 1 == {n + 1}
''' for n in range(8))

HIDDEN_CONFTEST = '''\
import pytest

from calc import settings


@pytest.fixture
def unit():
    return settings.UNIT
'''
HIDDEN = '''\
from calc import add, mean


def test_add_negative():
    assert add(-1, -2) == -3


def test_add_floats():
    assert add(0.5, 0.25) == 0.75


def test_mean_single(unit):
    assert mean([4]) == 4 * unit
'''
SETTINGS = '"""Settings the hidden conftest reads."""\n\nUNIT = 1\n'
TASK_TOML = '''\
id = "redteam-red5-shapes"
sources = ["calc"]

[tests]
public = ["tests"]

[timeouts]
per_test = 3
per_suite = 40
per_patch = 150

[limits]
memory_mib = 512
pids = 128
file_size_mib = 64

[baseline]
runs = 1
'''


def repo_files(shapes: str | None = None) -> dict[str, str]:
    return {
        "README.md": "# calc\n",
        "calc/__init__.py": '"""A tiny calculator."""\n\nfrom calc.core import add, mean\n\n'
                            '__all__ = ["add", "mean"]\n',
        "calc/core.py": CORE,
        "calc/shapes.py": shapes or shapes_source(),
        "calc/settings.py": SETTINGS,
        "tests/test_core.py": TEST_CORE,
        "tests/test_shapes.py": TEST_SHAPES,
        "tests/test_unit.py": TEST_UNIT,
        "tests/test_fixture.py": TEST_FIXTURE,
        "tests/test_import.py": TEST_IMPORT,
        "tests/test_params.py": TEST_PARAMS,
        "tests/test_slug.py": TEST_SLUG,
    }


def fixed(bodies: dict[str, str] | None = None, **kw) -> dict[str, str]:
    return {"calc/core.py": FIXED, "calc/shapes.py": shapes_source(bodies, **kw)}


HANG_C = ("    import re\n    re.match(r'(a+)+$', 'a' * 40 + 'b')\n")

PATCHES: dict[str, dict[str, str]] = {
    "fix": {"calc/core.py": FIXED},
    # a non-daemon thread that never ends keeps the interpreter alive after the session
    "thread_left_running": fixed({"background": (
        "    import threading\n    import time\n"
        "    threading.Thread(target=time.sleep, args=(3600,)).start()\n    return 1\n")}),
    "pool_fork": fixed({"pool_fork": (
        "    import multiprocessing\n"
        "    with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "        return pool.apply(abs, (-1,))\n")}),
    "pool_spawn": fixed({"pool_spawn": (
        "    import multiprocessing\n"
        "    with multiprocessing.get_context('spawn').Pool(1) as pool:\n"
        "        return pool.apply(abs, (-1,))\n")}),
    "run_child": fixed({"run_child": (
        "    import subprocess\n    import sys\n"
        "    out = subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True,\n"
        "                         text=True, check=True)\n    return int(out.stdout)\n")}),
    # 72 MB in one test, more than the sandbox's /proctor/out holds: a file there taking the
    # mutation session's own output would fill up and fail the test in the stats pass
    # (ENOSPC), leaving every mutant of noise() without a killer
    "noise": fixed({"noise": (
        "    import sys\n    for _ in range(36000):\n        print('x' * 999)\n"
        "        sys.stderr.write('y' * 999 + '\\n')\n    return 1\n")}),
    "keyboard_interrupt": fixed({"interrupt": "    raise KeyboardInterrupt\n"}),
    "recursion_crash": fixed({"deep": (
        "    import sys\n    sys.setrecursionlimit(10 ** 7)\n\n"
        "    def down(n):\n        return down(n + 1) + 1\n\n    return down(0)\n")}),
    "os_abort": fixed({"crash_abort": "    import os\n    os.abort()\n"}),
    "fork_child_runs_on": fixed({"worker": (
        "    import os\n    pid = os.fork()\n    if pid == 0:\n"
        "        pass  # the child was meant to do the work and leave\n    return 1\n")}),
    "fork_child_fails_on": fixed({"worker": (
        "    import os\n    pid = os.fork()\n    if pid == 0:\n"
        "        raise RuntimeError('worker failed')\n    return 1\n")}),
    "daemonize_parent_exits": fixed({"detach": (
        "    import os\n    if os.fork():\n        os._exit(0)\n    os.setsid()\n"
        "    return 1\n")}),
    "daemonize_parent_waits": fixed({"detach": (
        "    import os\n    import time\n    if os.fork():\n        time.sleep(0.5)\n"
        "        os._exit(0)\n    os.setsid()\n    return 1\n")}),
    "exit_status_86": fixed({"worker": "    import os\n    os._exit(86)\n"}),
    "one_param_hangs_uninterruptibly": fixed(
        param="    if i == 200:\n        sum(range(10 ** 13))\n    return i\n"),
    "close_inherited_fds": fixed({"tidy_fds": "    import os\n    os.closerange(3, 4096)\n"
                                              "    return 1\n"}),
    "signal_handlers": fixed({"handlers": (
        "    import signal\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    return 1\n")}),
    "atexit_hangs": fixed({"at_exit": (
        "    import atexit\n    import time\n    atexit.register(time.sleep, 3600)\n"
        "    return 1\n")}),
    "atexit_prints": fixed({"at_exit": (
        "    import atexit\n    atexit.register(print, 'goodbye from calc')\n    return 1\n")}),
    "faulthandler_repeat": fixed({"tracer": (
        "    import faulthandler\n    faulthandler.dump_traceback_later(0.2, repeat=True)\n"
        "    return 1\n")}),
    "setup_class_fails": fixed({"class_setup": "    raise RuntimeError('no class today')\n"}),
    "module_fixture_fails": fixed({"module_setup": "    raise RuntimeError('no module')\n"}),
    "pytest_exit_rc1": fixed({"should_stop": "    return 1\n"}),
    "pytest_exit_default": fixed({"should_stop": "    return 2\n"}),
    "sys_exit_at_import": fixed({"import_value": "    import sys\n    sys.exit(0)\n"}),
    "sys_exit1_at_import": fixed({"import_value": "    import sys\n    sys.exit(1)\n"}),
    "keyboard_interrupt_at_import": fixed({"import_value": "    raise KeyboardInterrupt\n"}),
    "one_param_hangs_in_c": fixed(param="    if i == 200:\n" + HANG_C.replace("    ", "        ")
                                  + "    return i\n"),
    "slug_hangs_in_c": fixed(slug=HANG_C + "    return text.lower()\n"),
    "pytest_exit_rc0": fixed({"should_stop": "    return 3\n"}),
    "argparse_at_import": fixed({"import_value": (
        "    import argparse\n    argparse.ArgumentParser().parse_args()\n    return 1\n")}),
    "slug_hangs_uninterruptibly": fixed(slug="    if text:\n        sum(range(10 ** 13))\n"
                                             "    return text.lower()\n"),
    "kill_minus_one": fixed({"handlers": (
        "    import os\n    import signal\n\n    class Worker:\n        pid = -1\n\n"
        "    os.kill(Worker.pid, signal.SIGTERM)\n    return 1\n")}),
    "chdir_into_deleted_dir": fixed({"handlers": (
        "    import os\n    import shutil\n    import tempfile\n"
        "    where = tempfile.mkdtemp()\n    os.chdir(where)\n    shutil.rmtree(where)\n"
        "    return 1\n")}),
    "conftest_import_fails": {"calc/core.py": FIXED,
                              "calc/settings.py": SETTINGS + "\nimport no_such_module\n"},
    "conftest_import_hangs": {"calc/core.py": FIXED,
                              "calc/settings.py": SETTINGS + "\nimport time\n\nwhile True:\n"
                                                             "    time.sleep(1)\n"},
    "package_init_fails": {"calc/core.py": FIXED,
                           "calc/__init__.py": '"""A tiny calculator."""\n\nfrom calc.core '
                                               'import add, mean, nothing\n'},
}


def build_task(dest: Path) -> Path:
    for rel, text in repo_files().items():
        (dest / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "repo" / rel).write_text(text)
    for rel, text in {"tests/conftest.py": HIDDEN_CONFTEST,
                      "tests/test_hidden.py": HIDDEN}.items():
        (dest / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / "hidden" / rel).write_text(text)
    (dest / "task.toml").write_text(TASK_TOML)
    (dest / "reference.patch").write_bytes(make_patch(dest / "repo", PATCHES["fix"]))
    return dest


def patches(task: Path) -> dict[str, bytes]:
    return {name: make_patch(task / "repo", files) for name, files in PATCHES.items()}


def with_tripwire_at(task: Path, files: dict[str, str], where: int) -> bytes:
    """``files`` as a patch (a comment line added to ``calc/shapes.py`` until it is so) whose
    public run puts the stand-alone tripwire at ``where`` among the public targets (0: before
    ``tests``, 1: after it): the place is drawn from the patch's sha256 and the task's
    fingerprint (:func:`proctor.harness.pipeline.suites_in_sandbox.suite_rng`)."""
    import hashlib

    from proctor.harness.pipeline.suites_in_sandbox import suite_rng
    from proctor.task import load_task

    fingerprint = load_task(task).fingerprint
    for k in range(200):
        edited = dict(files)
        text = edited.get("calc/shapes.py", shapes_source())
        edited["calc/shapes.py"] = text.replace('"""\n', f'"""\n# rev {k}\n', 1)
        data = make_patch(task / "repo", edited)
        rng = suite_rng(hashlib.sha256(data).hexdigest(), fingerprint, "public")
        if rng.randrange(2) == where:
            return data
    raise AssertionError("no variant puts the tripwire there")


if __name__ == "__main__":
    import sys
    dest = Path(sys.argv[1])
    build_task(dest)
    pdir = Path(str(dest) + "_patches")
    pdir.mkdir(exist_ok=True)
    for name, data in patches(dest).items():
        (pdir / f"{name}.patch").write_bytes(data)
    print(dest)
