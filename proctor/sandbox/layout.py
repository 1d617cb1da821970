"""Where things are inside a sandbox: the one home of the in-sandbox paths every backend
lays out and every step refers to. Plain constants; importing this touches nothing."""

from __future__ import annotations

#: The task's repository, the patch applied to it; the working directory of the suites.
REPO = "/work/repo"
#: Proctor's own scripts (the pytest plugin, checkers), read-only to the code under test.
HARNESS_DIR = "/proctor/harness"
#: Where the harness's own steps write their reports.
OUT_DIR = "/proctor/out"
#: The sandbox's Python (the image's tools venv), the same in every backend.
PYTHON = "/opt/proctor/venv/bin/python"
#: Where ``install = true`` installs the patched project (outside the repository, so no
#: patch path reaches it); appended to ``sys.path`` after the repository and ``pythonpath``.
SITE_DIR = "/work/.proctor-site"
