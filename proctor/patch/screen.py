"""First look at the patch bytes: the honest failures that need no parsing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: A patch over this many bytes is an honest failure (``patch_too_large``).
MAX_PATCH_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class ScreenedPatch:
    """``text`` is the decoded patch when ``reason`` is None; otherwise ``reason`` is one
    of ``empty_patch``, ``patch_too_large``, ``patch_not_utf8`` and ``message`` says why."""

    sha256: str
    size: int
    text: str | None
    reason: str | None = None
    message: str = ""


def screen_patch(data: bytes) -> ScreenedPatch:
    """Classify raw patch bytes (pure). Never raises."""
    sha, size = hashlib.sha256(data).hexdigest(), len(data)
    if size > MAX_PATCH_BYTES:
        return ScreenedPatch(sha, size, None, "patch_too_large",
                             f"patch is {size} bytes, over the {MAX_PATCH_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ScreenedPatch(sha, size, None, "patch_not_utf8",
                             f"patch is not UTF-8 ({exc.reason} at byte {exc.start})")
    if not text.strip():
        return ScreenedPatch(sha, size, None, "empty_patch", "patch is empty")
    return ScreenedPatch(sha, size, text)
