"""Every registered sandbox backend keeps the same promises: each check of
:mod:`proctor.sandbox.conformance` runs as one test on each backend of ``BACKENDS`` (ids
``<check>-<backend>``), with the leak check after it.

A backend is made ready by its fixture (``docker_ready``, ``local_ready``: they skip with the
reason when the engine, the image, bubblewrap or the venv is missing); any other registered
backend gets the environment ``resolve_env`` gives it, or skips saying why not. A check
that cannot apply (a limit the backend does not enforce here) skips naming the limit.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from proctor.sandbox import BACKENDS, CHECKS, ExecResult, Sandbox, resolve_env, run_conformance

#: backend -> the fixture that returns its environment (or skips).
READY = {"docker": "docker_ready", "local": "local_ready"}
#: backend -> its marker (``-m docker`` / ``-m local`` select the end-to-end tests).
MARKS = {"docker": pytest.mark.docker, "local": pytest.mark.local}


def _env(backend: str, request) -> str:
    if backend in READY:
        return request.getfixturevalue(READY[backend])
    try:
        return resolve_env(backend)[0]
    except Exception as exc:  # noqa: BLE001 - the skip reason shows why
        pytest.skip(f"{backend}: no environment: {type(exc).__name__}: {exc}")


#: Checks that wait out a timeout of a sleeping command (see the ``waits`` marker).
WAITING_CHECKS = {"timeout_kills_tree"}


@pytest.mark.parametrize(("check", "backend"), [
    pytest.param(check, backend, id=f"{check}-{backend}",
                 marks=([MARKS[backend]] if backend in MARKS else [])
                 + ([pytest.mark.waits] if check in WAITING_CHECKS else []))
    for backend in sorted(BACKENDS) for check in CHECKS])
def test_conformance(check, backend, request, no_leaks):
    [res] = run_conformance(backend, _env(backend, request), only=[check])
    if res.status == "skipped":
        pytest.skip(res.message)
    assert res.status == "passed", res.message


# ------------------------------------------------------------------ the runner itself


class _Broken(Sandbox):
    """Answers every command with exit 0 and no output; claims not to enforce memory."""

    name = "broken"
    closed = 0

    def __init__(self, env, *, limits=None, mounts=None, **_):
        pass

    def run(self, argv, *, timeout, **_):
        return ExecResult(tuple(argv), 0, "", 0.0)

    def put_archive(self, dest_dir, tar_bytes, *, as_root=False):
        pass

    def get_file(self, path, max_bytes=64 * 1024**2):
        return None

    def close(self):
        type(self).closed += 1

    def leftovers(self):
        return []

    @classmethod
    def unenforced_here(cls):
        return {"memory": "it is a stub"}


def test_runner_reports_failures_and_skips_and_closes_every_sandbox(monkeypatch):
    monkeypatch.setitem(BACKENDS, "broken", _Broken)
    monkeypatch.setattr(_Broken, "closed", 0)
    results = run_conformance("broken", "env", only=["stdin_empty", "memory_process_tree",
                                                     "nothing_leaks"])
    got = {r.name: r for r in results}
    assert [r.name for r in results] == ["memory_process_tree", "stdin_empty", "nothing_leaks"]
    assert got["stdin_empty"].status == "failed"
    assert "expected success with 'end\\n'" in got["stdin_empty"].message
    assert got["memory_process_tree"].status == "skipped"
    assert got["memory_process_tree"].message == ("broken: limit 'memory' not enforced: "
                                                  "it is a stub")
    assert got["nothing_leaks"].status == "failed"  # reading the first one's files "worked"
    assert _Broken.closed == 4  # one sandbox each, two for nothing_leaks
    assert all(r.backend == "broken" and r.seconds >= 0 for r in results)
    with pytest.raises(ValueError, match="unknown conformance check"):
        run_conformance("broken", "env", only=["no_such_check"])
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        run_conformance("no-such-backend", "env")


class _Leaky(_Broken):
    """Keeps the stdin_empty promise, but its close leaves a container behind."""

    name = "leaky"

    def run(self, argv, *, timeout, **_):
        return ExecResult(tuple(argv), 0, "end\n", 0.0)

    def leftovers(self):
        return ["container leaky-1"]


def test_a_check_that_passes_fails_when_close_leaves_something(monkeypatch):
    monkeypatch.setitem(BACKENDS, "leaky", _Leaky)
    [res] = run_conformance("leaky", "env", only=["stdin_empty"])
    assert res.status == "failed"
    assert res.message == "after close, leftovers() = ['container leaky-1']"


# ------------------------------------------------------------------ the command line


@pytest.mark.local
def test_cli_checks_one_backend(local_ready):
    from proctor.cli import app

    res = CliRunner().invoke(app, ["sandbox", "check", "--backend", "local",
                                   "--only", "stdin_empty"])
    assert res.exit_code == 0, res.output
    assert "stdin_empty" in res.output and "passed" in res.output
    assert "1 passed, 0 failed, 0 skipped" in res.output
    bad = CliRunner().invoke(app, ["sandbox", "check", "--backend", "local",
                                   "--only", "no_such_check"])
    assert bad.exit_code == 2 and "unknown conformance check" in bad.output
