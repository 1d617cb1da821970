"""A stand-in for a sandbox that records the operations made through it (tests only)."""

from __future__ import annotations

OPERATIONS = ("run", "put_archive", "put_files", "put_read_only_dirs", "get_file")


class CountingSandbox:
    """Wraps a sandbox; ``ops`` lists the names of the operations called through it, in
    order (an operation's own inner calls on the real sandbox are not listed)."""

    def __init__(self, sb) -> None:
        self.sb, self.ops = sb, []

    @property
    def runs(self) -> int:
        return self.ops.count("run")

    def __getattr__(self, name):
        attr = getattr(self.sb, name)
        if name not in OPERATIONS:
            return attr

        def counted(*args, **kwargs):
            self.ops.append(name)
            return attr(*args, **kwargs)

        return counted
