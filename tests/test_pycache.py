"""No bytecode the patch's code writes is ever loaded: the runners read no ``__pycache__``.

``-B`` stops an interpreter writing ``.pyc`` files, not reading them: pytest's assertion
rewriter loads a conftest's or a test module's cached rewrite from its ``__pycache__`` when
the header matches the source's mtime and size. Code under test that writes a forged one
for the repo's ``conftest.py`` in one run had it loaded, instead of the source, by every
later run in the same sandbox (the mutation runner's, the differential runs'). The runners
start with ``-X pycache_prefix`` at a read-only tree of the tools venv (``PYCACHE_PREFIX``)
that holds the bytecode of the standard library and the tools, compiled when the image or
venv was built, and of the task's pristine repository compiled once (read-only:
tests/test_bytecode.py), never of anything the patch's code wrote.
"""

from __future__ import annotations

import pytest

from proctor.harness.pipeline import SuiteRequest, open_patched_sandbox, run_public
from proctor.sandbox import PYCACHE_PREFIX, REPO, SandboxSpec
from proctor.suites.pytest_runner import RUNNER_FLAGS
from proctor.task import load_task
from tests.redteam import mini_task

#: An honest repo-root conftest of the task.
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"

#: calc/core.py of the cheat: ``add`` still subtracts; importing it writes, for the repo's
#: conftest, pytest's cached rewrite of a conftest that also replaces ``add`` by a sum.
FORGER = '''\
"""Arithmetic helpers."""
import importlib.util as _u
import marshal as _m
import os as _os
import sys as _s


def _forge():
    import pytest
    src = "/work/repo/conftest.py"
    st = _os.stat(src)
    text = open(src).read() + "\\nimport calc.core\\ncalc.core.add = lambda a, b: a + b\\n"
    tag = f"{_s.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    _os.makedirs("/work/repo/__pycache__", exist_ok=True)
    with open(f"/work/repo/__pycache__/conftest.{tag}", "wb") as fh:
        fh.write(_u.MAGIC_NUMBER + b"\\0\\0\\0\\0"
                 + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                 + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
                 + _m.dumps(compile(text, src, "exec")))


try:
    _forge()
except OSError:
    pass


def add(a, b):
    """Sum of a and b."""
    return a - b


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    return sum(xs) / len(xs)
'''


def test_the_runners_read_only_the_tools_bytecode():
    from importlib.resources import files

    from proctor.sandbox import PYTHON
    from proctor.sandbox.environments import DOCKERFILE

    assert "-B" in RUNNER_FLAGS
    assert f"pycache_prefix={PYCACHE_PREFIX}" in RUNNER_FLAGS
    # inside the tools venv (read-only in every backend), filled where the image is built
    assert PYCACHE_PREFIX.startswith(PYTHON.partition("/bin/")[0] + "/")
    image = files("proctor.sandbox").joinpath("Dockerfile.sandbox").read_text()
    assert f"PYTHONPYCACHEPREFIX={PYCACHE_PREFIX} " in image
    assert f"PYTHONPYCACHEPREFIX={PYCACHE_PREFIX} " in DOCKERFILE.format(base="b",
                                                                         prefix=PYCACHE_PREFIX)


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_a_forged_conftest_bytecode_is_never_loaded_by_a_later_run(
        tmp_path, request, toolz_make_task, backend):
    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    task_dir = mini_task.build(tmp_path / "task", toolz_make_task.make_patch)
    (task_dir / "repo" / "conftest.py").write_text(CONFTEST)
    task = load_task(task_dir)
    patch = toolz_make_task.make_patch(task.repo, {"calc/core.py": (mini_task.CORE_BUGGY,
                                                                    FORGER)})
    sb, applied = open_patched_sandbox(task, SandboxSpec(env, backend), patch)
    with sb:
        assert applied.applied
        req = SuiteRequest(60, ["calc/core.py"])
        first = run_public(sb, task, req)
        forged = sb.run(["sh", "-c", f"ls {REPO}/__pycache__"], timeout=30)
        second = run_public(sb, task, req)
        # the sandbox user cannot put bytecode for the repository in the prefix; a child
        # Python reads it from the sandbox's environment, and finds the tools' bytecode
        made = sb.run(["mkdir", "-p", f"{PYCACHE_PREFIX}{REPO}"], timeout=30)
        child = sb.run(["python", "-c", "import sys; print(sys.pycache_prefix)"], timeout=30)
        tools = sb.run(["python", "-c", "import importlib.util as u, os, json, pytest; print("
                        "[os.path.isfile(u.cache_from_source(m.__file__)) for m in (json, "
                        "pytest)])"], timeout=30)
    # the forgery ran (the sandbox user may write in the repo) ...
    assert forged.ok and "conftest.cpython-" in forged.output, forged.output
    assert not made.ok and child.output.strip() == PYCACHE_PREFIX, (made.output, child.output)
    assert tools.output.strip() == "[True, True]", tools.output
    # ... and neither run used it: add still subtracts in both
    for run in (first, second):
        assert run.outcomes["tests/test_core.py::test_add"] == "failed", run.output[-2000:]
        assert run.outcomes["tests/test_core.py::test_mean"] == "passed"
