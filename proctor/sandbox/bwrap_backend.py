"""Local sandbox backend (bubblewrap). Placeholder until the backend lands."""

from __future__ import annotations


def remove_stale_dirs(*, expired: bool = True) -> list[str]:
    """Remove local-backend host directories whose owner is gone; returns their paths."""
    return []


def unavailable() -> str | None:
    return "not implemented yet"


def ensure_env() -> str:
    raise NotImplementedError
