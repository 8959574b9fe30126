"""`esc-eval serve up|status|down|write-config`: Ray Serve deployments of the models.

    esc-eval serve up                          # the embedded model on a local Ray, 127.0.0.1:8000
    esc-eval serve up --config cluster/serve/esc-eval-serve.yaml --address ray://head:10001
    esc-eval serve status
    esc-eval serve down [--stop-ray]
    esc-eval serve write-config --model embedded -o serve.yaml   # for `serve deploy serve.yaml`

`up` returns once every replica is healthy, or fails within --timeout naming the model whose
replicas did not come up (with Serve's own message).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from esc_eval.cli.common import local_out
from esc_eval.serve.app.application import MIN_REPLICAS, SERVE_HOST, SERVE_PORT

app = typer.Typer(no_args_is_help=True, help="Ray Serve deployments of the models (vLLM, OpenAI routes).")


@app.command("up")
def serve_up(
    config: Annotated[Optional[Path], typer.Option(help="Serve config YAML (ServeConfig); overrides --model.")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="Registry model(s) to serve.")] = None,
    replicas: Annotated[int, typer.Option(help="Min replicas per model.")] = MIN_REPLICAS,
    max_replicas: Annotated[Optional[int], typer.Option(help="Max replicas per model (autoscaling).")] = None,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address; default: local (started if needed).")] = None,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = SERVE_HOST,
    port: Annotated[int, typer.Option(help="HTTP port.")] = SERVE_PORT,
    timeout: Annotated[Optional[float], typer.Option(help="Seconds to wait for healthy replicas.")] = None,
) -> dict[str, Any]:
    """Start the OpenAI-compatible Serve app for registry models and wait until it is healthy."""
    from esc_eval.serve.app.commands import serve_up as up

    return up(config, models, replicas, max_replicas, address, host, port, timeout)


@app.command("status")
def serve_status(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
) -> dict[str, Any]:
    """Show Serve applications, deployments and replica states."""
    from esc_eval.serve.app.commands import serve_status as status

    return status(address)


@app.command("down")
def serve_down(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
    app_name: Annotated[Optional[str], typer.Option(help="Delete only this application.")] = None,
    stop_ray: Annotated[bool, typer.Option(help="Also stop the local Ray node (`ray stop`).")] = False,
) -> None:
    """Delete the Serve app (or all of Serve); optionally stop the local Ray node."""
    from esc_eval.serve.app.commands import serve_down as down

    down(address, app_name, stop_ray)


@app.command("write-config")
def serve_write_config(
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Serve config file to write (for `serve deploy FILE`).")],
    config: Annotated[Optional[Path], typer.Option(help="Serve config YAML (ServeConfig); overrides --model.")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="Registry model(s) to serve.")] = None,
    replicas: Annotated[int, typer.Option(help="Min replicas per model.")] = MIN_REPLICAS,
    max_replicas: Annotated[Optional[int], typer.Option(help="Max replicas per model (autoscaling).")] = None,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = SERVE_HOST,
    port: Annotated[int, typer.Option(help="HTTP port.")] = SERVE_PORT,
) -> dict[str, Any]:
    """Write a Ray Serve config file (ray.serve.llm's OpenAI app) for `serve deploy`; no cluster needed."""
    from esc_eval.serve.app.commands import serve_write_config as write

    return write(out, config, models, replicas, max_replicas, host, port)
