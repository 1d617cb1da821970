"""The bytes of a file named on the command line (a patch, a completion, a message, a
transcript): a regular file, anything else that reads like one (``/dev/null``, a pipe such
as ``<(cmd)``, ``/dev/stdin``), or ``-`` for standard input.

Every way it cannot be read is an :class:`InputFileError` whose message says which and
names the file, for the CLI to print as a usage error (exit 2); it never reads a directory
as empty or calls an existing file missing.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

#: Bytes read at most (a score's own limits on a patch, a message or a transcript are far
#: lower, and judged by the score): beyond, ``/dev/zero`` say, nothing is read into memory.
MAX_INPUT_BYTES = 256 * 1024 * 1024


class InputFileError(ValueError):
    """The file cannot be read; ``str(exc)`` is the message for the user."""


def read_input(path: Path | str, what: str) -> bytes:
    """The whole content of ``path`` (``"-"``: standard input until its end).

    ``what`` names it in messages (``"patch file"``, ``"--message-file"``).

    Raises:
        InputFileError: standard input is closed, the path does not exist, is a directory,
            holds more than :data:`MAX_INPUT_BYTES`, or reading it failed (permissions, an
            I/O error); the message says which.
    """
    if str(path) == "-":
        return _read_stdin(what)
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputFileError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputFileError(f"{what} is a directory, not a file: {path}")
    try:
        with open(path, "rb") as fh:
            return _bounded(fh.read(MAX_INPUT_BYTES + 1), what, path)
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _bounded(data: bytes, what: str, where) -> bytes:
    if len(data) > MAX_INPUT_BYTES:
        raise InputFileError(f"{what} {where} holds more than {MAX_INPUT_BYTES >> 20} MiB: "
                             "not read")
    return data


def _read_stdin(what: str) -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    try:
        if stream is None or not is_open(0):
            raise InputFileError(f"{what} is '-' but standard input is closed")
        return _bounded(stream.read(MAX_INPUT_BYTES + 1), what, "(standard input)")
    except OSError as exc:
        raise InputFileError(f"cannot read {what} from standard input: "
                             f"{exc.strerror or exc}") from None


def is_open(fd: int) -> bool:
    """Whether this process has descriptor ``fd`` open."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
