"""``proctor daemon start|run|status|stop``: the CLI daemon (:mod:`proctor.daemon`), which
runs ``proctor score`` in a process forked with every module already imported."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time

import typer
from rich.console import Console

from proctor import cache_dirs, daemon, generator_process
from proctor.file_lock import file_lock

daemon_app = typer.Typer(no_args_is_help=True, help="A warm process for `proctor score`: "
                         "starts each score with every module already imported.")
out = Console(soft_wrap=True)  # messages only: whole lines, whatever the width
err = Console(stderr=True, soft_wrap=True)  # messages: whole lines, whatever the width
#: Seconds ``daemon start`` waits for the daemon to answer.
START_WAIT_S = 60.0


def _entry() -> list[str]:
    """How this process was started (the console script, or ``python -m proctor`` with its
    interpreter flags): a daemon started the same way has the same ``sys.path`` and flags,
    hence the same key."""
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return [sys.executable, *subprocess._args_from_interpreter_flags(), "-m", "proctor"]
    return [sys.argv[0]]


def _program() -> str:
    """This command as the user typed it (``proctor`` or ``python -m proctor``)."""
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return f"{os.path.basename(sys.executable)} -m proctor"
    return os.path.basename(sys.argv[0])


def as_runner() -> None:
    """In a runner, before the client's command: the module-level consoles made again, so
    that they see the client's terminal and environment (colours, width, ``NO_COLOR``), not
    the daemon's log file."""
    import rich

    rich._console = None
    for name, module in list(sys.modules.items()):
        if not name.startswith("proctor") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, Console):
                setattr(module, attr,
                        type(value)(stderr=value.stderr, soft_wrap=value.soft_wrap))


@daemon_app.command("start")
def start_command(
    idle: float = typer.Option(daemon.IDLE_S, min=1.0, help="Seconds without a request "
                               "after which the daemon ends."),
) -> None:
    """Start this environment's daemon in the background (nothing if one runs). From then
    on, ``proctor score`` in this environment (same code, interpreter and keyed variables:
    see ``proctor daemon status``) runs in it. Started as ``python -m proctor``, it serves
    the clients started so from the same directory (the first entry of ``sys.path``)."""
    key = daemon.daemon_key()
    logs = cache_dirs.daemon_logs()
    logs.mkdir(parents=True, exist_ok=True)
    with file_lock(logs / f"{key}.start.lock"):  # starts at once: one daemon, one pid said
        _start(key, idle, logs)


def _start(key: str, idle: float, logs) -> None:
    found = daemon.ask("status", key)
    if found:
        out.print(f"a daemon already runs for this environment (pid {found['pid']})")
        return
    log_path = logs / f"{key}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([*_entry(), "daemon", "run", "--idle", str(idle)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
    end = time.monotonic() + START_WAIT_S
    while time.monotonic() < end:
        found = daemon.ask("status", key)
        if found:
            out.print(f"daemon started (pid {found['pid']}; ends after {idle:g} s without "
                      f"a request): {daemon.socket_path(key)}")
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = log_path.read_text(errors="replace").strip().splitlines()[-10:]
    err.print(f"[red]error[/red]: the daemon did not start; {log_path}:\n" + "\n".join(tail))
    raise typer.Exit(3)


@daemon_app.command("run")
def run_command(
    idle: float = typer.Option(daemon.IDLE_S, min=1.0, help="Seconds without a request "
                               "after which the daemon ends."),
) -> None:
    """Run this environment's daemon in the foreground (``start`` runs this in the
    background; a supervisor may run it directly). Ends when idle, on ``stop``, SIGTERM or
    SIGINT."""
    if not daemon.LAUNCHED:
        err.print("[red]error[/red]: this `proctor` does not run through proctor.launcher:main "
                  "(an install older than its code?): reinstall the package, then start the "
                  "daemon again")
        raise typer.Exit(3)
    _preload()
    key = daemon.daemon_key()
    spares = generator_process.Spares(generator_process.record_path(key))
    try:
        request = daemon.serve(key, idle, spares=spares, ready=lambda: print(
            f"proctor daemon {os.getpid()} serving on {daemon.socket_path(key)}", flush=True))
    except daemon.DaemonError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(3) from None
    if request is not None:  # a runner: the launcher runs the client's command next
        daemon.hand_over(request)


def _preload() -> None:
    """Import what ``proctor score`` imports and load what it loads on first use
    (detect-secrets' plugins), so that its runners start with none of it left."""
    import ctypes  # noqa: F401
    import multiprocessing  # noqa: F401
    import netrc  # noqa: F401
    import pkgutil  # noqa: F401

    import docker  # noqa: F401
    import pydantic.type_adapter  # noqa: F401

    import proctor.harness.pipeline.score  # noqa: F401
    import proctor.sandbox.bwrap_backend  # noqa: F401
    import proctor.sandbox.docker_backend  # noqa: F401
    from proctor.harness.integrity import secrets

    secrets.preload()
    for name in ("typer._adapters", "typer._click.decorators"):  # typer's, on first call
        try:
            importlib.import_module(name)
        except ImportError:
            pass


@daemon_app.command("status")
def status_command() -> None:
    """Whether a daemon runs for this environment: its pid, requests served, seconds up.
    Exit 1 when none does."""
    parts = daemon.key_parts()
    key = daemon.daemon_key()
    found = daemon.ask("status", key)
    if not found:
        out.print(f"no daemon for this environment (key {key}); `{_program()} daemon start` "
                  "starts one")
        for other in daemon.running_keys():
            theirs = daemon.ask("status", other) if other != key else None
            if theirs:
                differ = daemon.differing_parts(parts, theirs.get("key_parts") or {})
                out.print(f"daemon pid {theirs['pid']} runs for another environment; it "
                          f"differs in: {', '.join(differ) or 'unknown (older code)'}")
        raise typer.Exit(1)
    out.print(f"daemon pid {found['pid']}: {found['served']} served, up {found['up_s']} s, "
              f"ends after {found['idle_s']:g} s idle; {daemon.socket_path(key)}")
    out.print(f"mutant generators started ahead for the next score: {found.get('spares', 0)}")
    if not found.get("serves_you", True):
        out.print("but not this process: its groups, namespaces, cgroup, limits, nice value "
                  "or CPU affinity differ from the daemon's (its commands run on their own)")


@daemon_app.command("stop")
def stop_command(
    every: bool = typer.Option(False, "--all", help="Stop every daemon of this user (those "
                               "of other code or environments too)."),
) -> None:
    """Stop this environment's daemon (the commands it runs finish)."""
    keys = daemon.running_keys() if every else [daemon.daemon_key()]
    stopped = sum(daemon.ask("stop", key) is not None for key in keys)
    out.print(f"{stopped} daemon(s) stopped" if stopped else "no daemon runs"
              + ("" if every else " for this environment"))
