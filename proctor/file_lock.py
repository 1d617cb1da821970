"""An exclusive lock on a file in a cache directory, for threads and processes alike.

``flock(2)`` locks belong to the open file description, so two ``open`` calls exclude each
other whether they come from two threads of one process or from two processes on the host.
The lock is released when the descriptor is closed, including when the holder dies.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing, never deleted) for the block.
    Blocks until the lock is free."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
