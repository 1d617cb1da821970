"""The ``proctor`` command's entry point (and ``python -m proctor``'s).

``proctor score`` goes to this environment's CLI daemon when one runs
(:mod:`proctor.daemon`: started by ``proctor daemon start``, never by itself), which runs
it in a process forked with every module already imported; otherwise, and for every other
command, the command runs here (a score after starting, before its imports, the host mutant
generator it will use). Importing this module imports the standard library only.
"""

from __future__ import annotations

import sys

#: The commands a daemon runs: the per-patch ones, where the start is a large share.
DAEMON_COMMANDS = frozenset({"score"})


def main() -> None:
    """Run the ``proctor`` command line on ``sys.argv``; exits with the command's status."""
    try:
        request = _run()
    except KeyboardInterrupt:  # before the command ran (typer makes it 130 from then on)
        sys.exit(130)
    if request is None:
        return
    # a runner forked by ``proctor daemon run``: the client's command, as a process of its own
    from proctor import daemon
    from proctor.cli import app
    from proctor.cli_daemon import as_runner

    as_runner()
    daemon.unblock_signals()
    app(args=request.argv[1:], prog_name="proctor")


def _run():
    """The command, here or in a daemon; returns the :class:`~proctor.daemon.Request` to
    run in a daemon's runner (else it exits with the command's status)."""
    if len(sys.argv) > 1 and sys.argv[1] in DAEMON_COMMANDS:
        _heed_stop_signals()
        from proctor import daemon

        code = daemon.run_in_daemon(list(sys.argv))
        if code is not None:
            sys.exit(code)
        _start_generator_early(daemon)
    from proctor import daemon
    from proctor.cli import app

    daemon.LAUNCHED[:] = [True]  # ``daemon run`` may serve: its runners come back here
    request = None
    try:
        app(prog_name="proctor")
    except SystemExit:
        request = daemon.take_request()
        if request is None:  # any command but a daemon's runner ending
            raise
    return request


def _start_generator_early(daemon) -> None:
    """Start the host mutant generator the last score of this environment used, so that it
    loads on the core these imports leave idle, not beside the score's sandboxes
    (:mod:`proctor.generator_process`). Only a head start: nothing here stops the command."""
    try:
        from proctor import generator_process

        generator_process.start_early(generator_process.record_path(daemon.daemon_key()))
    except Exception:  # noqa: BLE001, S110 - the score starts its own generator instead
        pass


def _heed_stop_signals() -> None:
    """SIGINT and SIGTERM end ``proctor score`` from its first instant, even when inherited
    ignored (a shell's background job has SIGINT ignored): its sandboxes' cleanup takes
    them over once it scores, and before that they must not depend on how far the start
    got, nor on whether a daemon runs it."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
