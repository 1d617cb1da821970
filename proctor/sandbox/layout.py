"""What every sandbox looks like from inside, whichever backend made it: the in-sandbox
paths, the user the code under test runs as, and the seconds a command gets to stop after
its timeout, and the slack seconds every layer adds over the timeouts below it. The one
home of these constants for the backends, the steps, the suites and the pipeline; plain
values, importing this touches nothing."""

from __future__ import annotations

#: The task's repository, the patch applied to it; the working directory of the suites.
REPO = "/work/repo"
#: Proctor's own scripts (the pytest plugin, checkers), read-only to the code under test.
HARNESS_DIR = "/proctor/harness"
#: The sandbox's Python (the image's tools venv), the same in every backend.
PYTHON = "/opt/proctor/venv/bin/python"
#: The bytecode cache root of the interpreters that run the code under test (``-X
#: pycache_prefix``): a read-only tree inside the tools venv holding the bytecode of the
#: standard library and of the tools, compiled when the image or the venv was built, and,
#: under ``work/repo``, the task's pristine repository compiled once (a read-only mount:
#: :mod:`proctor.suites.bytecode`). No ``.pyc`` is read from a ``__pycache__`` beside a
#: source (one the patch's code wrote for a conftest or a test module a later run imports,
#: say) and none can be put where one would be read: a module the patch changed compiles
#: from its source, while pytest, the standard library and the untouched modules start from
#: their bytecode.
PYCACHE_PREFIX = "/opt/proctor/venv/pycache"
#: Where the harness's own steps write their reports.
OUT_DIR = "/proctor/out"
#: The mutation step's root-owned staging (the pristine repo, hidden tests, patch) and,
#: under ``repo``, the copy its mutants run in: made once per sandbox, at a fixed path so
#: the task's compiled files can be shown at its place under :data:`PYCACHE_PREFIX` too.
MUTATION_DIR = "/proctor/mutation"
#: Where ``install = true`` installs the patched project (outside the repository, so no
#: patch path reaches it); appended to ``sys.path`` after the repository and ``pythonpath``.
SITE_DIR = "/work/.proctor-site"

#: The unprivileged user (uid and gid) the code under test runs as; files it may write are
#: owned by it, files it may only read by root.
SANDBOX_UID = 1000
SANDBOX_USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
#: The sandbox user's home: a small private writable area, emptied between suites.
HOME = "/home/agent"
#: What every command of root (``user="0:0"``: the harness's own, often run after the code
#: under test ran) gets over the sandbox's environment: no file the sandbox user
#: can write is read as configuration. Root's ``git apply`` (the mutation copy) would
#: otherwise read ``$HOME/.gitconfig`` and ``$HOME/.config/git/attributes``, which the
#: patch's code may have written during a suite, and run their filter commands as root.
#: ``/nonexistent`` is Debian's home for users that have none.
ROOT_ENV = {"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
            "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def is_root(user: str | None) -> bool:
    """Whether a command's ``user`` (None: the sandbox user) is root (``0``, ``0:0``,
    ``root``, ``root:root``)."""
    return user is not None and user.split(":")[0] in ("0", "root")


#: Seconds between a timed-out command's TERM and its KILL (``timeout -k``).
KILL_AFTER_S = 3
#: Seconds the host's watchdog waits beyond a command's timeout and :data:`KILL_AFTER_S`
#: before it ends the exec from outside (a sandbox that no longer answers).
WATCHDOG_SLACK_S = 10
#: Extra seconds of a multi-step command's timeout over the sum of its steps'
#: (:func:`~proctor.sandbox.steps.run_steps`).
STEPS_SLACK_S = 10.0
#: The pytest supervisor kills a test that ran ``per_test * ITEM_TIMEOUT_FACTOR +
#: ITEM_TIMEOUT_SLACK_S`` seconds: after pytest-timeout's own limit (``per_test``), which
#: code under test can disable, and never before it.
ITEM_TIMEOUT_FACTOR = 1.2
ITEM_TIMEOUT_SLACK_S = 2.0
#: What the mutation step may wait for the public suite's killers (the other sandbox),
#: beyond the public suite's own budget (s).
KILLERS_WAIT_SLACK_S = 30.0
