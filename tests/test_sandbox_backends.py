"""Backend selection and per-task limits (no sandbox is started here)."""

from __future__ import annotations

import pytest

from proctor.errors import TaskConfigError
from proctor.sandbox import BACKENDS, Limits, backends
from proctor.task import LimitsConfig


def test_both_backends_are_registered():
    assert {"docker", "local"} <= set(BACKENDS)


def test_without_an_engine_the_local_backend_is_chosen_and_said_once(monkeypatch, capsys):
    monkeypatch.delenv(backends.ENV_VAR, raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/proctor-test.sock")
    monkeypatch.setattr(backends, "_announced", False)
    assert backends.choose_backend() == "local"
    assert backends.choose_backend() == "local"
    err = capsys.readouterr().err
    assert err.count("no Docker engine reachable") == 1 and len(err.splitlines()) == 1


def test_an_explicit_or_environment_choice_wins(monkeypatch):
    monkeypatch.setenv(backends.ENV_VAR, "local")
    assert backends.choose_backend() == "local"
    assert backends.choose_backend("docker") == "docker"
    with pytest.raises(TaskConfigError, match="unknown sandbox backend 'lxc'"):
        backends.choose_backend("lxc")


def test_a_task_requiring_an_unenforceable_limit_is_refused_by_the_local_backend():
    with pytest.raises(TaskConfigError, match="'memory' limit"):
        backends.check_required("local", ["memory"])
    backends.check_required("local", ["pids", "file_size"])
    backends.check_required("docker", ["memory", "pids", "disk", "file_size"])


def test_task_limits_default_to_the_safe_defaults_and_convert_to_bytes():
    assert LimitsConfig().to_limits() == Limits()
    lim = LimitsConfig(memory_mib=512, disk_mib=64, output_kib=8).to_limits()
    assert (lim.memory_bytes, lim.disk_bytes, lim.output_cap) == (512 * 1024**2,
                                                                  64 * 1024**2, 8192)
    with pytest.raises(ValueError, match="unknown limit 'gpu'"):
        LimitsConfig(required=["gpu"])
