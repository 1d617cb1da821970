"""Where Proctor keeps what it computes once and reuses: the one home of its cache directories.

Everything lives under :func:`cache_root` (``$PROCTOR_CACHE_DIR``, else ``~/.cache/proctor``),
one subdirectory per kind, except the local backend's tools venvs (:func:`venvs`), which
must be readable by the sandbox's unprivileged uid and so default to ``/var/cache`` for root.
Each function returns the path; none creates it (the writer does, atomically). Pure path
arithmetic on the environment; importing this touches nothing.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$PROCTOR_CACHE_DIR``, else ``~/.cache/proctor``."""
    return Path(os.environ.get("PROCTOR_CACHE_DIR") or Path.home() / ".cache" / "proctor")


def baselines() -> Path:
    """Baseline runs of a task on an image: ``<key>.json``."""
    return cache_root() / "baselines"


def repos() -> Path:
    """A task's repository as the tar laid into each sandbox: ``<fingerprint>-v<N>.tar``."""
    return cache_root() / "repos"


def harness_files() -> Path:
    """Proctor's in-sandbox scripts, read-only, one directory per content digest."""
    return cache_root() / "harness"


def results() -> Path:
    """The batch result cache: one finished record per ``<key>.json``."""
    return cache_root() / "results"


def slots() -> Path:
    """The host-wide sandbox slots (``slot-<i>.lock``) shared by the processes of one cache."""
    return cache_root() / "slots"


def gen_tools() -> Path:
    """The mutant generator's tools unpacked from an image, one directory per image id."""
    return cache_root() / "gen-tools"


def image_modules() -> Path:
    """The top-level module names each image can import: ``<image id>.json``."""
    return cache_root() / "image-modules"


def image_facts() -> Path:
    """What one sandbox of an image showed, for every later one: ``<image id>.<fact>``
    (e.g. ``.work-1777``: its ``/work`` is sticky as made, see the Docker backend)."""
    return cache_root() / "image-facts"


def bytecode() -> Path:
    """A task's pristine files compiled once, per task and image: ``<key>/`` (see
    :mod:`proctor.suites.bytecode`)."""
    return cache_root() / "bytecode"


def daemon_logs() -> Path:
    """The CLI daemons' own output (``proctor daemon``): ``<key>.log``."""
    return cache_root() / "daemon"


def venvs() -> Path:
    """The local backend's tools venvs: ``$PROCTOR_VENV_DIR``, else
    ``/var/cache/proctor/venvs`` when running as root (the sandbox's uid must read it), else
    ``~/.cache/proctor/venvs``."""
    if os.environ.get("PROCTOR_VENV_DIR"):
        return Path(os.environ["PROCTOR_VENV_DIR"])
    if os.geteuid() == 0:
        return Path("/var/cache/proctor/venvs")
    return Path.home() / ".cache" / "proctor" / "venvs"
