"""``proctor serve``: run :mod:`proctor.http_server` until interrupted."""

from __future__ import annotations

import ipaddress

import typer
from rich.console import Console


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Address to bind (no auth: keep loopback "
                             "unless the network is trusted)."),
    port: int = typer.Option(8765, help="TCP port."),
    workers: int | None = typer.Option(None, min=1, help="Concurrent rollouts per batch "
                                       "request (default: cores)."),
    max_body_mb: float = typer.Option(64.0, help="Request body limit in MiB."),
) -> None:
    """Serve /v1/score, /v1/score_batch, OpenRLHF's /get_reward and /healthz."""
    from proctor.http_server import make_server

    err = Console(stderr=True)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        err.print(f"[yellow]warning[/yellow]: binding {host}: anyone who reaches it can run "
                  "patches in your sandboxes (no authentication)")
    server = make_server(host, port, workers=workers, max_body=int(max_body_mb * 1024**2))
    err.print(f"proctor serve on http://{host}:{server.server_address[1]}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
