"""The tools that run inside the sandbox, pinned to exact versions. The one place they are.

The sandbox image installs exactly these from a host-side wheelhouse; changing a pin
changes the image tag (content-addressed), hence every baseline cache key.
"""

from __future__ import annotations

import importlib.util
import sys

from proctor.errors import InfraError

SANDBOX_TOOLS: dict[str, str] = {
    "pytest": "9.0.3",
    "pytest-timeout": "2.4.0",
    "ruff": "0.17.6",
    "mutmut": "3.8.1",
}

#: Python of the sandbox image (Debian bookworm's python3), for the wheelhouse download.
SANDBOX_PYTHON = "3.11"


def requirements_txt() -> str:
    """The pins as a pip requirements file (sorted, one ``name==version`` a line)."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(SANDBOX_TOOLS.items()))


def host_pip() -> list[str]:
    """argv prefix (``[python, "-m", "pip"]``) of the pip that downloads the wheelhouses on
    the host: the running interpreter's, so it is the environment Proctor is installed in.

    Raises:
        InfraError: this interpreter has no pip (a venv made by ``uv venv`` without ``--seed``,
            or ``python -m venv --without-pip``).
    """
    if importlib.util.find_spec("pip") is None:
        raise InfraError(
            f"{sys.executable} has no pip, which downloads the sandbox tools' wheelhouse on the "
            "host: install pip into this environment (`python -m ensurepip`, or `uv venv --seed`)")
    return [sys.executable, "-m", "pip"]
