"""Harness-owned pytest entry point, run inside the sandbox as
``python -I -B run_pytest.py REPO -- PYTEST_ARGS``.

``-I`` ignores PYTHON* variables and user site; this script then puts the harness plugin
directory first on ``sys.path`` and the repository under test *last*, so a module in the
repo can never shadow pytest, its plugins or the standard library at start-up. Plugin
autoload is off: only the plugins named with ``-p`` load.
"""

import os
import sys

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
