"""The ``proctor`` command's entry point (and ``python -m proctor``'s).

``proctor score`` goes to this environment's CLI daemon when one runs
(:mod:`proctor.daemon`: started by ``proctor daemon start``, never by itself), which runs
it in a process forked with every module already imported; otherwise, and for every other
command, the command runs here. Importing this module imports the standard library only.
"""

from __future__ import annotations

import sys

#: The commands a daemon runs: the per-patch ones, where the start is a large share.
DAEMON_COMMANDS = frozenset({"score"})


def main() -> None:
    """Run the ``proctor`` command line on ``sys.argv``; exits with the command's status."""
    if len(sys.argv) > 1 and sys.argv[1] in DAEMON_COMMANDS:
        from proctor import daemon

        code = daemon.run_in_daemon(list(sys.argv))
        if code is not None:
            sys.exit(code)
    from proctor import daemon
    from proctor.cli import app

    daemon.LAUNCHED[:] = [True]  # ``daemon run`` may serve: its runners come back here
    try:
        app(prog_name="proctor")
    except SystemExit:
        request = daemon.take_request()
        if request is None:  # any command but a daemon's runner ending
            raise
    # a runner forked by ``proctor daemon run``: the client's command, as a process of its own
    from proctor.cli_daemon import as_runner

    as_runner()
    daemon.unblock_signals()
    app(args=request.argv[1:], prog_name="proctor")
