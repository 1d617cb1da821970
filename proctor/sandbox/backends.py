"""Which sandbox backend runs a patch, and the environment it runs from.

The seam between the executor and the backends: the executor asks :func:`choose_backend`
once, :func:`resolve_env` for the environment (Docker: the image; local: the tools venv) and
its id (part of the baseline cache key), and :func:`open_sandbox` for each sandbox.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from proctor.errors import EngineUnavailable, TaskConfigError
from proctor.sandbox import bwrap_backend, docker_backend  # noqa: F401 - registers both
from proctor.sandbox.base import BACKENDS, Limits, Sandbox

#: Environment variable that picks the backend when no ``sandbox=`` is given.
ENV_VAR = "PROCTOR_SANDBOX"
_announced = False


def choose_backend(requested: str | None = None) -> str:
    """``requested`` (or ``$PROCTOR_SANDBOX``) when given; else ``docker`` when an engine
    answers, else ``local`` (said once on stderr).

    Raises:
        TaskConfigError: an unknown backend name.
    """
    global _announced
    name = requested or os.environ.get(ENV_VAR) or None
    if name is not None:
        if name not in BACKENDS:
            raise TaskConfigError(f"unknown sandbox backend {name!r}; "
                                  f"known: {', '.join(sorted(BACKENDS))}")
        return name
    try:
        from proctor.sandbox.engine import docker_client

        docker_client(timeout=10)
        return "docker"
    except EngineUnavailable:
        if not _announced:
            _announced = True
            print("[proctor] no Docker engine reachable: using the local (bubblewrap) sandbox",
                  file=sys.stderr, flush=True)
        return "local"


def resolve_env(backend: str, image: str | None = None,
                requirements: list[str] | None = None) -> tuple[str, str]:
    """(environment handed to the backend, its content id) for a task with ``requirements``
    (:mod:`proctor.sandbox.environments`). Docker: (image tag, image id), the task's layer
    when it has requirements; local: (venv dir, ``local-venv:<hash>``).

    Raises:
        ImageMissing / EngineUnavailable (Docker), InfraError (environment build),
        TaskConfigError (requirements that cannot be installed).
    """
    reqs = sorted(requirements or [])
    if backend == "docker":
        from proctor.sandbox.engine import docker_client
        from proctor.sandbox.environments import task_image
        from proctor.sandbox.image import resolve_image

        client = docker_client()
        tag, image_id = resolve_image(client, image)
        return task_image(client, tag, image_id, reqs) if reqs else (tag, image_id)
    if backend == "local":
        return bwrap_backend.ensure_env(reqs), bwrap_backend.env_id(reqs)
    raise TaskConfigError(f"unknown sandbox backend {backend!r}")


def check_required(backend: str, required: list[str], root_owned: bool = False) -> None:
    """Refuse a task that requires a limit this backend cannot enforce here, or (with
    ``root_owned``: the task sets ``hidden_at_upstream_path``) files in the sandbox's
    ``/work`` that the sandbox user cannot change, which a backend without
    ``ROOT_OWNED_FILES`` cannot make.

    Raises:
        TaskConfigError: names the limit (or the field) and why it is not enforced.
    """
    if root_owned and not getattr(BACKENDS[backend], "ROOT_OWNED_FILES", True):
        raise TaskConfigError(
            f"the task sets 'hidden_at_upstream_path', which needs hidden files in the "
            f"repository that the sandbox user cannot change; the {backend} sandbox cannot "
            "make them (root and the sandbox user are one host uid there, so a chown to "
            "root protects nothing); use --sandbox docker")
    missing = {k: v for k, v in BACKENDS[backend].unenforced_here().items() if k in required}
    if missing:
        name, why = next(iter(missing.items()))
        raise TaskConfigError(f"the task requires the '{name}' limit, which the {backend} "
                              f"sandbox cannot enforce here ({why}); use --sandbox docker")


@dataclass(frozen=True)
class SandboxSpec:
    """What a new sandbox is made from: ``env`` (an environment :func:`resolve_env` gave:
    Docker's image tag, the local backend's tools venv), ``backend`` (a name in
    :data:`~proctor.sandbox.base.BACKENDS`), its ``limits``, ``run_id`` (the label its
    resources carry; default: random) and ``ttl_s`` (seconds after which the sweeper may
    remove it if its owner is gone). ``mounts``: (path inside, host directory) pairs shown
    read-only from its creation on, besides the harness's (the task's compiled files,
    :mod:`proctor.suites.bytecode`)."""

    env: str
    backend: str = "docker"
    limits: Limits = field(default_factory=Limits)
    run_id: str | None = None
    ttl_s: float = 3600.0
    mounts: tuple[tuple[str, str], ...] = ()


def open_sandbox(backend: str, env: str, limits: Limits = Limits(), run_id: str | None = None,
                 ttl_s: float = 3600.0, mounts: dict[str, Path] | None = None) -> Sandbox:
    """A new sandbox of ``backend`` from ``env`` (see :func:`resolve_env`); caller closes.
    ``mounts``: path inside -> host directory, visible read-only from creation on (see
    :data:`proctor.sandbox.base.BACKENDS`)."""
    return BACKENDS[backend](env, limits=limits, run_id=run_id, ttl_s=ttl_s,
                             mounts=mounts or {})
