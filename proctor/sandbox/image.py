"""Build the sandbox image offline and find it again by its content-addressed tag.

Steps of :func:`build_image`:
1. Base: pull ``base`` when a registry answers; otherwise build a Debian bookworm base with
   ``debootstrap`` (python3, venv, git) and ``docker import`` it.
2. Wheelhouse: the host downloads the pinned tools (``toolchain.SANDBOX_TOOLS``) with pip,
   for the sandbox's Python and platform. Containers never reach a registry.
3. ``docker build`` of ``Dockerfile.sandbox`` with ``network_mode=none``.

The Dockerfile is package data (``proctor/sandbox/Dockerfile.sandbox``; the repository
root's ``Dockerfile.sandbox`` is a symlink to it), read through :mod:`importlib.resources`,
so an installed wheel builds the same image as the checkout.

The tag is ``proctor-sandbox:<16 hex>``, a sha256 over the Dockerfile, the pins and the
base image id, so any change to them is a new image (and a new baseline cache key): a wheel
install and the checkout it was built from compute the same tag.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
from importlib.resources import files

from docker.errors import APIError, BuildError, ImageNotFound

from proctor.errors import ImageMissing, InfraError
from proctor.sandbox.engine import docker_client
from proctor.sandbox.ownership import host_dir
from proctor.sandbox.toolchain import SANDBOX_PYTHON, host_pip, requirements_txt

#: The sandbox image's Dockerfile, shipped inside the package (a Traversable).
DOCKERFILE = files("proctor.sandbox").joinpath("Dockerfile.sandbox")
IMAGE_REPO = "proctor-sandbox"
DEBOOTSTRAP_SUITE = "bookworm"
DEBOOTSTRAP_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_PACKAGES = ("python3", "python3-venv", "git", "ca-certificates")
DEFAULT_BASE = f"proctor-base:{DEBOOTSTRAP_SUITE}"


def _log(msg: str) -> None:
    print(f"[proctor image] {msg}", file=sys.stderr, flush=True)


def _sha(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()


def _image_id(client, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except ImageNotFound:
        return None


def ensure_base(client, base: str = DEFAULT_BASE) -> str:
    """Return the id of the base image, pulling it or building it with debootstrap.

    Raises:
        InfraError: neither a pull nor debootstrap could provide it.
    """
    found = _image_id(client, base)
    if found:
        return found
    if base != DEFAULT_BASE:
        repo, _, tag = base.partition(":")
        try:
            _log(f"pulling {base}")
            return client.images.pull(repo, tag=tag or "latest").id
        except APIError as exc:
            raise InfraError(f"cannot pull base image {base}: {exc.explanation}") from None
    return _debootstrap_base(client, base)


def _debootstrap_base(client, tag: str) -> str:
    if shutil.which("debootstrap") is None:
        raise InfraError(
            "no base image and no debootstrap: `apt-get install debootstrap` (root, Debian) "
            "or pass --base IMAGE with python3 and git"
        )
    with host_dir("debootstrap") as owned:
        workdir = owned / "work"
        workdir.mkdir()
        rootfs = workdir / "rootfs"
        try:
            _log(f"no registry base: building {tag} with debootstrap (about a minute)")
            subprocess.run(
                ["debootstrap", "--variant=minbase",
                 "--include=" + ",".join(DEBOOTSTRAP_PACKAGES),
                 DEBOOTSTRAP_SUITE, str(rootfs), DEBOOTSTRAP_MIRROR],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, check=True,
                           stdout=subprocess.DEVNULL)
            if tar.wait() != 0:
                raise InfraError("tar of the debootstrap root failed")
        except subprocess.CalledProcessError as exc:
            err = (exc.stderr or b"").decode(errors="replace")[-2000:]
            raise InfraError(f"debootstrap base build failed: {exc}\n{err}") from None
    return client.images.get(tag).id


def image_tag(base_id: str) -> str:
    """Content-addressed tag of the sandbox image built on ``base_id``."""
    digest = _sha(DOCKERFILE.read_text(encoding="utf-8"), requirements_txt(), base_id)
    return f"{IMAGE_REPO}:{digest[:16]}"


def _platform_args() -> list[str]:
    machine = platform.machine()
    plats = [f"manylinux_2_{v}_{machine}" for v in (17, 28)] + [
        f"manylinux2014_{machine}", f"linux_{machine}"]
    args = ["--only-binary=:all:", "--python-version", SANDBOX_PYTHON, "--implementation", "cp",
            "--abi", "cp" + SANDBOX_PYTHON.replace(".", "")]
    for plat in plats:
        args += ["--platform", plat]
    return args


def build_image(base: str = DEFAULT_BASE) -> str:
    """Build (or find) the sandbox image; returns its tag.

    Raises:
        EngineUnavailable: no Docker engine.
        InfraError: the base, the wheelhouse download or the build failed.
    """
    client = docker_client()
    base_id = ensure_base(client, base)
    tag = image_tag(base_id)
    if _image_id(client, tag):
        _log(f"{tag} is up to date")
        return tag
    with host_dir("image-build") as owned:
        ctx = owned / "context"
        ctx.mkdir()
        try:
            (ctx / "requirements.txt").write_text(requirements_txt())
            (ctx / "Dockerfile.sandbox").write_bytes(DOCKERFILE.read_bytes())
            _log("downloading the wheelhouse on the host")
            subprocess.run(
                [*host_pip(), "download", "-q", "--disable-pip-version-check",
                 "-r", str(ctx / "requirements.txt"), "-d", str(ctx / "wheelhouse"),
                 *_platform_args()],
                check=True,
            )
            _log(f"building {tag}")
            client.images.build(
                path=str(ctx), dockerfile="Dockerfile.sandbox", tag=tag, rm=True, forcerm=True,
                network_mode="none", buildargs={"BASE_IMAGE": base_id},
                labels={"org.proctor.role": "sandbox-image"},
            )
        except subprocess.CalledProcessError as exc:
            raise InfraError(f"wheelhouse download failed: {exc}") from None
        except BuildError as exc:
            log = "".join(chunk.get("stream", "") for chunk in exc.build_log)[-3000:]
            raise InfraError(f"sandbox image build failed: {exc.msg}\n{log}") from None
    return tag


def resolve_image(client, image: str | None = None) -> tuple[str, str]:
    """Return (tag, image id) of the sandbox image to use.

    ``image`` None means the image built from the current Dockerfile, pins and default base.

    Raises:
        ImageMissing: not built yet; the message says to run ``proctor image build``.
    """
    if image is None:
        base_id = _image_id(client, DEFAULT_BASE)
        image = image_tag(base_id) if base_id else None
    image_id = _image_id(client, image) if image else None
    if image_id is None:
        raise ImageMissing(
            f"sandbox image {image or IMAGE_REPO + ':<tag>'} is not built on this engine; "
            "run `proctor image build`"
        )
    return image, image_id
