"""The tools that run inside the sandbox, pinned to exact versions. The one place they are.

The sandbox image installs exactly these from a host-side wheelhouse; changing a pin
changes the image tag (content-addressed), hence every baseline cache key.
"""

from __future__ import annotations

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
