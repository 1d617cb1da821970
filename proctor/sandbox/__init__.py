"""Part 2 of the design, the sandbox: one throw-away environment per patch behind one
interface (:class:`Sandbox`: run, put and get files, close), its backends (``docker``,
``local`` bubblewrap) in a registry (:data:`BACKENDS`), the limits every backend enforces,
the in-sandbox layout, multi-step commands, the image and task environments, warm sandboxes
made ahead, and the ownership and cleanup of what a sandbox leaves on the host."""

from __future__ import annotations

from proctor.sandbox.backends import (
    SandboxSpec,
    check_required,
    choose_backend,
    open_sandbox,
    resolve_env,
)
from proctor.sandbox.base import BACKENDS, ExecResult, Limits, Sandbox, register, tar_of_tree
from proctor.sandbox.cleanup import remove_stale
from proctor.sandbox.conformance import CHECKS, CheckResult, ConformanceError, run_conformance
from proctor.sandbox.docker_backend import DockerSandbox, docker_can_bind
from proctor.sandbox.engine import docker_client
from proctor.sandbox.environments import list_images, prune_images
from proctor.sandbox.image import DEFAULT_BASE, build_image, resolve_image
from proctor.sandbox.layout import (
    HARNESS_DIR,
    HOME,
    ITEM_TIMEOUT_FACTOR,
    ITEM_TIMEOUT_SLACK_S,
    KILL_AFTER_S,
    KILLERS_WAIT_SLACK_S,
    MUTATION_DIR,
    OUT_DIR,
    PYCACHE_PREFIX,
    PYTHON,
    REPO,
    SANDBOX_UID,
    SITE_DIR,
    STEPS_SLACK_S,
)
from proctor.sandbox.ownership import host_dir
from proctor.sandbox.steps import CLEAR_PARENTS_SH, Step, run_steps
from proctor.sandbox.toolchain import SANDBOX_PYTHON, SANDBOX_TOOLS
from proctor.sandbox.warm_pool import (
    WarmConfigError,
    WarmKey,
    configure_warm,
    drain_warm,
    settle_warm,
    take_warm,
    warm_counts,
    warm_pool_size,
    warm_sandboxes,
    warm_waiting,
)

__all__ = [
    "CHECKS", "CheckResult", "ConformanceError", "run_conformance",
    "BACKENDS", "CLEAR_PARENTS_SH", "DEFAULT_BASE", "DockerSandbox", "ExecResult",
    "HARNESS_DIR", "HOME", "ITEM_TIMEOUT_FACTOR", "ITEM_TIMEOUT_SLACK_S", "KILL_AFTER_S",
    "KILLERS_WAIT_SLACK_S", "Limits", "MUTATION_DIR", "OUT_DIR", "PYCACHE_PREFIX", "PYTHON", "REPO",
    "SANDBOX_PYTHON", "SANDBOX_TOOLS", "SANDBOX_UID", "SITE_DIR", "STEPS_SLACK_S", "Sandbox",
    "SandboxSpec", "Step", "build_image",
    "check_required", "choose_backend", "docker_can_bind", "docker_client", "host_dir",
    "list_images",
    "open_sandbox", "prune_images", "register", "remove_stale", "resolve_env", "resolve_image",
    "run_steps", "tar_of_tree",
    "WarmConfigError", "WarmKey", "configure_warm", "drain_warm", "settle_warm", "take_warm",
    "warm_counts", "warm_pool_size", "warm_sandboxes", "warm_waiting",
]
