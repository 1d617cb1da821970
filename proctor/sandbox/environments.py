"""Task environments: a task's Python requirements as a per-task image layer (Docker) or a
per-task venv (local), built offline from a host-side wheelhouse, cached by content hash and
reused by every patch of the task.

The requirements go into the tools venv (``/opt/proctor/venv``) with the tool pins as pip
constraints, so a requirement can never move pytest or its plugins; a conflict is a task
configuration error. The patched repo is never installed here: with ``install = true`` it goes
to a directory of its own, per sandbox (:mod:`proctor.harness.pipeline.install`), and the runners
load no plugin through entry points (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``).

Docker images are tagged ``proctor-task:<16 hex>`` (sha256 over the sandbox image id and the
sorted requirements) and labelled ``org.proctor.role=task-env``; ``proctor image list`` and
``proctor image prune --keep N`` manage them.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass

from docker.errors import APIError, BuildError, ImageNotFound

from proctor.errors import InfraError, TaskConfigError
from proctor.sandbox.layout import PYCACHE_PREFIX
from proctor.sandbox.ownership import host_dir
from proctor.sandbox.toolchain import host_pip, requirements_txt

TASK_IMAGE_REPO = "proctor-task"
ROLE_LABEL = "org.proctor.role"
TASK_ROLE = "task-env"
SANDBOX_ROLE = "sandbox-image"

DOCKERFILE = """\
# Task environment layer, built by Proctor with no network.
FROM {base}
USER 0:0
COPY requirements.txt constraints.txt /tmp/proctor-env/
COPY wheelhouse/ /tmp/proctor-env/wheelhouse/
RUN /opt/proctor/venv/bin/pip install --no-cache-dir --no-index --disable-pip-version-check \\
      --find-links /tmp/proctor-env/wheelhouse -r /tmp/proctor-env/requirements.txt \\
      -c /tmp/proctor-env/constraints.txt \\
 && rm -rf /tmp/proctor-env \\
 && (PYTHONPYCACHEPREFIX={prefix} /opt/proctor/venv/bin/python -m compileall \\
      -q -j 0 -x '/(test|tests)/' /opt/proctor/venv/lib >/dev/null || true)
USER 1000:1000
"""


def env_hash(base_id: str, requirements: list[str]) -> str:
    """sha256 (hex) over the environment's base and its sorted requirements."""
    h = hashlib.sha256(base_id.encode() + b"\0" + requirements_txt().encode())
    for line in sorted(requirements):
        h.update(b"\0" + line.encode())
    return h.hexdigest()


def task_image(client, base_tag: str, base_id: str, requirements: list[str]) -> tuple[str, str]:
    """(tag, image id) of the sandbox image plus ``requirements``, built when missing.

    Raises:
        TaskConfigError: pip cannot resolve the requirements (with the tool pins).
        InfraError: the image build failed.
    """
    digest = env_hash(base_id, requirements)
    tag = f"{TASK_IMAGE_REPO}:{digest[:16]}"
    try:
        return tag, client.images.get(tag).id
    except ImageNotFound:
        pass
    with host_dir("env-build") as owned:
        ctx = owned / "context"
        ctx.mkdir()
        try:
            (ctx / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements))
            (ctx / "constraints.txt").write_text(requirements_txt())
            (ctx / "Dockerfile").write_text(DOCKERFILE.format(base=base_id,
                                                              prefix=PYCACHE_PREFIX))
            print(f"[proctor image] building task environment {tag}", file=sys.stderr)
            from proctor.sandbox.image import _platform_args

            res = subprocess.run(
                [*host_pip(), "download", "-q", "--disable-pip-version-check",
                 "-r", str(ctx / "requirements.txt"), "-c", str(ctx / "constraints.txt"),
                 "-d", str(ctx / "wheelhouse"), *_platform_args()],
                capture_output=True, text=True)
            if res.returncode != 0:
                raise TaskConfigError(f"task requirements cannot be resolved as wheels: "
                                      f"{res.stderr[-1500:]}")
            (ctx / "wheelhouse").mkdir(exist_ok=True)
            client.images.build(
                path=str(ctx), tag=tag, rm=True, forcerm=True, network_mode="none",
                labels={ROLE_LABEL: TASK_ROLE, "org.proctor.env": digest[:16],
                        "org.proctor.base": base_tag,
                        "org.proctor.requirements": ";".join(requirements)[:1000]})
        except BuildError as exc:
            log = "".join(chunk.get("stream", "") for chunk in exc.build_log)[-2000:]
            raise InfraError(f"task environment build failed: {exc.msg}\n{log}") from None
        except APIError as exc:
            raise InfraError(f"task environment build failed: {exc}") from None
    return tag, client.images.get(tag).id


@dataclass(frozen=True)
class ImageInfo:
    """One Proctor image: ``role`` (``sandbox-image`` or ``task-env``), size in bytes,
    ``created`` as the engine's ISO time."""

    tag: str
    id: str
    role: str
    created: str
    size: int
    requirements: str


def list_images(client) -> list[ImageInfo]:
    """Proctor's sandbox and task-environment images, newest first."""
    out = []
    for img in client.images.list(filters={"label": ROLE_LABEL}):
        labels = img.labels or {}
        out.append(ImageInfo(
            tag=(img.tags or ["<none>"])[0], id=img.id, role=labels.get(ROLE_LABEL, ""),
            created=img.attrs.get("Created", ""), size=int(img.attrs.get("Size", 0)),
            requirements=labels.get("org.proctor.requirements", "")))
    return sorted(out, key=lambda i: i.created, reverse=True)


def prune_images(client, keep: int) -> tuple[list[str], list[str]]:
    """Remove task-environment images but the ``keep`` newest (the sandbox images are never
    pruned). Returns (removed tags, tags kept because a container still uses them)."""
    if keep < 0:
        raise ValueError("keep must be >= 0")
    tasks = [i for i in list_images(client) if i.role == TASK_ROLE]
    removed, busy = [], []
    for info in tasks[keep:]:
        try:
            client.images.remove(info.id)
            removed.append(info.tag)
        except APIError:
            busy.append(info.tag)
    return removed, busy
