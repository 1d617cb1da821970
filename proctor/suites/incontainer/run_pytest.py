"""Harness-owned pytest entry point, run inside the sandbox as
``python -I -B run_pytest.py REPO -- PYTEST_ARGS``.

``-I`` ignores PYTHON* variables and user site; this script then puts the harness plugin
directory first on ``sys.path`` and the repository under test *last*, so a module in the
repo can never shadow pytest, its plugins or the standard library at start-up. Plugin
autoload is off: only the plugins named with ``-p`` load.

Before anything else is imported, an audit hook (which nothing can remove) guards the runner:
the code under test replacing a function's code object (``f.__code__ = ...``: a test body
swapped for a no-op while the tripwire is spared) or installing an audit hook of its own (the
trigger such code needs between collection and the test run) ends the process at once with
exit status ``SUBVERTED_EXIT``, which the harness reads as a flipped tripwire. Only
``types.coroutine`` (the standard library, e.g. asyncio at import) may set ``__code__``.
"""

import os
import sys

SUBVERTED_EXIT = 86  # proctor.suites.pytest_runner.SUBVERTED_EXIT


def _install_guard():
    import types

    exit_now, write, getframe = os._exit, os.write, sys._getframe
    err = os.dup(2)  # the real stderr: pytest's capture replaces fd 2 while tests run
    allowed = types.coroutine.__code__  # the code object itself: a file name can be faked

    def guard(event, args):
        if event == "sys.addaudithook":
            why = "installed an audit hook"
        elif event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
            if getframe(1).f_code is allowed:
                return
            why = "replaced a function's __code__"
        else:
            return
        try:
            write(err, f"\nproctor: the code under test {why}\n".encode())
        finally:
            exit_now(SUBVERTED_EXIT)

    sys.addaudithook(guard)


_install_guard()

harness_dir = os.path.dirname(os.path.abspath(__file__))
repo = sys.argv[1]
args = sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]
sys.path.insert(0, harness_dir)
sys.path.append(repo)
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
os.environ.pop("PYTEST_ADDOPTS", None)
os.environ.pop("PYTEST_PLUGINS", None)

import pytest  # noqa: E402

sys.exit(int(pytest.main(args)))
