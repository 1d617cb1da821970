"""Proctor: decomposed, tamper-resistant rewards for coding-agent patches."""

from proctor.version import __version__

__all__ = ["__version__"]
