"""Result cache: a scored record, reused for every identical patch on the same task.

Key: sha256 over (patch sha256, task fingerprint, image digest, Proctor version, sandbox
backend, cache format). Identical patches in a GRPO group (common: several samples return
the same fix, or the empty patch) are scored once; the others get a copy of the record with
their own ``rollout_id`` / ``group_id`` / ``sample_index`` / ``metadata``.

Only ``status == "scored"`` records are stored: an error is never cached, so a retry or a
later batch measures again. Entries live in ``$PROCTOR_CACHE_DIR/results/<key>.json``,
written atomically; :meth:`ResultCache.lock` serialises the first scoring of a key across
threads and processes so two workers never score the same patch at once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

from pydantic import ValidationError

from proctor import cache_dirs
from proctor.file_lock import file_lock
from proctor.record import RewardRecord
from proctor.version import __version__

#: Bumped whenever the stored shape or its meaning changes: part of every key.
RESULT_FORMAT = "1"


def result_key(patch_sha256: str, task_fingerprint: str, image_digest: str | None,  # noqa: PLR0913
               version: str = __version__, sandbox: str = "docker",
               said_sha256: str | None = None, judge: str | None = None) -> str:
    """Content address of a result (64 hex characters); pure. ``said_sha256``: the digest
    of the rollout's message and transcript, which the record's message checks read (None:
    neither given); ``judge``: the judge that may veto it (its command or entry point and
    timeout; None: no judge)."""
    parts = [patch_sha256, task_fingerprint, image_digest or "-", version, sandbox,
             RESULT_FORMAT] + ([said_sha256] if said_sha256 else []) + \
        ([f"judge:{judge}"] if judge else [])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def relabel(rec: RewardRecord, *, rollout_id: str, group_id: str | None,
            sample_index: int | None, metadata: dict | None,
            lookup_s: float) -> RewardRecord:
    """A copy of a cached record for another rollout: its ids and metadata, timing
    ``{"total_s": lookup_s, "cache_hit": 1.0, "scored_total_s": <the original total>}``."""
    out = rec.model_copy(deep=True)
    out.rollout_id, out.group_id, out.sample_index = rollout_id, group_id, sample_index
    out.metadata = metadata
    out.timing = {"total_s": round(lookup_s, 3), "cache_hit": 1.0,
                  "scored_total_s": rec.timing.get("total_s", 0.0)}
    return out


class ResultCache:
    """Scored records on disk by :func:`result_key`. Safe for threads and processes."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_dirs.results()

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> RewardRecord | None:
        """The stored record, or None (missing or unreadable: then it is scored again)."""
        try:
            return RewardRecord.model_validate_json(self._path(key).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None

    def put(self, key: str, rec: RewardRecord) -> None:
        """Store ``rec`` if it is ``scored`` (errors are never cached)."""
        if rec.status != "scored":
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(rec.to_json())
        os.replace(tmp, self._path(key))

    def lock(self, key: str) -> AbstractContextManager[None]:
        """Exclusive lock for the first scoring of ``key``."""
        return file_lock(self.root / "locks" / f"{key}.lock")
