"""``proctor serve``: run :mod:`proctor.http_server` until interrupted."""

from __future__ import annotations

import ipaddress

import typer
from rich.console import Console


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to bind (no auth: keep loopback "
                             "unless the network is trusted)."),
    port: int = typer.Option(8765, help="TCP port (0: any free port, printed)."),
    workers: int | None = typer.Option(None, min=1, help="Sandbox slots for the whole "
                                       "server: rollouts scored at once over all requests "
                                       "(default: $PROCTOR_MAX_SANDBOXES, else cores)."),
    max_queue: int | None = typer.Option(None, min=0, help="Rollouts that may wait for a "
                                         "slot; beyond, requests get 503 with Retry-After "
                                         "(default: 4 x workers)."),
    max_body_mb: float = typer.Option(64.0, help="Request body limit in MiB (413 beyond)."),
    warm: int = typer.Option(0, "--warm", min=0, help="Sandboxes made ahead and kept "
                             "waiting, beyond the workers' (2 x workers: every rollout finds "
                             "its two; default none)."),
) -> None:
    """Serve /v1/score, /v1/score_batch, OpenRLHF's /get_reward, /healthz, /metrics and a
    live page at / (in flight, queued, rollouts per minute, recent rewards and errors)."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        from proctor.http_server import make_server
    except ImportError as exc:
        err.print(f"[red]error[/red]: proctor serve needs the serve extra "
                  f"(pip install 'proctor[serve]'): {exc}")
        raise typer.Exit(2) from None
    from proctor.errors import ProctorError

    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        err.print(f"[yellow]warning[/yellow]: binding {host}: anyone who reaches it can run "
                  "patches in your sandboxes (no authentication)")
    try:
        server = make_server(host, port, workers=workers, max_queue=max_queue,
                             max_body=int(max_body_mb * 1024**2), warm=warm)
    except ProctorError as exc:  # a bad $PROCTOR_MAX_SANDBOXES
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(2) from None
    svc = server.service
    err.print(f"proctor serve on http://{host}:{server.server_address[1]} "
              f"({svc.workers} sandbox slots, queue {svc.max_queue}"
              f"{f', {svc.warm} warm sandboxes' if svc.warm else ''}; live page at /)",
              soft_wrap=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        from proctor.sandbox import cleanup

        cleanup.close_all()
