"""Task environments: a task's requirements are installed (offline, from a wheelhouse) into a
per-task image layer or venv, cached by content hash, and listed / pruned."""

from __future__ import annotations

import shutil

import pytest

from proctor import load_task, score
from proctor.errors import TaskConfigError
from proctor.sandbox import open_sandbox, resolve_env

REQS = ["six==1.16.0"]
IMPORT_SIX = ["/opt/proctor/venv/bin/python", "-c", "import six, pytest; "
              "print(six.__version__, pytest.__version__)"]


@pytest.fixture(scope="session")
def env_task(toolz_task, tmp_path_factory):
    """The toolz task with ``requirements = ["six==1.16.0"]`` (and one baseline run of each
    state: flaky tests are not this task's subject)."""
    dest = tmp_path_factory.mktemp("envtask") / "task"
    shutil.copytree(toolz_task, dest)
    toml = (dest / "task.toml").read_text()
    (dest / "task.toml").write_text(toml.replace('sources = ["toolz"]',
                                                 'sources = ["toolz"]\nrequirements = '
                                                 '["six==1.16.0"]').replace("runs = 3",
                                                                            "runs = 1"))
    return dest


def test_requirements_come_from_the_list_and_the_file(env_task, tmp_path):
    task = tmp_path / "t"
    shutil.copytree(env_task, task)
    (task / "reqs.txt").write_text("# tools\nattrs\n\nsix==1.16.0  # again\n")
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace("requirements = ", 'requirements_file = '
                                                 '"reqs.txt"\nrequirements = '))
    assert load_task(task).requirements == ["attrs", "six==1.16.0"]


@pytest.mark.parametrize("line", ["-e .", "--index-url http://x", "pkg @ file:///x", "../x"])
def test_requirements_with_options_paths_or_urls_are_refused(env_task, tmp_path, line):
    task = tmp_path / "t"
    shutil.copytree(env_task, task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace('"six==1.16.0"', repr(line).replace("'", '"')))
    with pytest.raises(TaskConfigError, match="not a plain requirement"):
        load_task(task)


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_task_env_is_built_once_and_has_the_requirement_beside_the_pinned_tools(backend):
    env, env_id = resolve_env(backend, None, REQS)
    again = resolve_env(backend, None, REQS)
    assert again == (env, env_id)
    assert env_id != resolve_env(backend, None, [])[1]
    with open_sandbox(backend, env) as sb:
        res = sb.run(IMPORT_SIX, timeout=30)
    assert res.ok and res.output.split() == ["1.16.0", "9.0.3"]


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_a_task_with_requirements_scores_like_without(backend, env_task, toolz_patches):
    rec = score(env_task, toolz_patches["reference"], sandbox=backend)
    assert rec.status == "scored", rec.error
    assert rec.reward == pytest.approx(0.998)
    assert rec.env.image_digest == resolve_env(backend, None, REQS)[1]


@pytest.mark.docker
@pytest.mark.serial  # prunes every task image: another test's would go, or be busy
def test_image_list_and_prune_keep_n(docker_engine):
    from proctor.sandbox import list_images, prune_images
    from proctor.sandbox.environments import TASK_ROLE

    tag, _ = resolve_env("docker", None, REQS)
    listed = {i.tag: i for i in list_images(docker_engine)}
    assert listed[tag].role == TASK_ROLE and "six==1.16.0" in listed[tag].requirements
    assert any(i.role == "sandbox-image" for i in listed.values())
    removed, busy = prune_images(docker_engine, keep=0)
    assert tag in removed and busy == []
    assert all(i.role != TASK_ROLE for i in list_images(docker_engine))
    assert any(i.role == "sandbox-image" for i in list_images(docker_engine))


def test_an_environment_build_works_in_an_owned_host_dir_removed_after_a_failure(
        monkeypatch):
    """The build context lives in a :func:`~proctor.sandbox.ownership.host_dir` (a ``.owner``
    file a later sweep reads after a ``kill -9``) and is gone once the build failed."""
    import json
    import os
    import subprocess
    from pathlib import Path
    from types import SimpleNamespace

    from docker.errors import ImageNotFound

    from proctor.sandbox import environments

    seen = []

    def failing_download(argv, **kw):
        owned = Path(argv[argv.index("-d") + 1]).parent.parent  # <host dir>/context/wheelhouse
        seen.append((owned, json.loads((owned / ".owner").read_text())))
        return subprocess.CompletedProcess(argv, 1, "", "no matching distribution")

    def no_image(tag):
        raise ImageNotFound(tag)

    monkeypatch.setattr(environments.subprocess, "run", failing_download)
    client = SimpleNamespace(images=SimpleNamespace(get=no_image))
    with pytest.raises(TaskConfigError, match="cannot be resolved as wheels"):
        environments.task_image(client, "base:tag", "sha256:base", ["nothing-such==1"])
    [(owned, owner)] = seen
    assert owned.name.startswith("proctor-host-env-build-")
    assert owner["org.proctor.run"] == "host-env-build"
    assert owner["org.proctor.owner_pid"] == str(os.getpid())
    assert not owned.exists()
