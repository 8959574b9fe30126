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

import subprocess
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from esc_eval.cli.common import local_out

from esc_eval.serve.app.deploy import check_machine, connect, deploy_app, ray_executable, ray_modules
from esc_eval.serve.app.application import ServeConfig, ServeModelConfig, build_app, build_app_args, write_serve_config

app = typer.Typer(no_args_is_help=True, help="Ray Serve deployments of the models (vLLM, OpenAI routes).")


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _config(config: Optional[Path], models: Optional[list[str]], replicas: int, max_replicas: Optional[int],
            host: str, port: int) -> ServeConfig:
    if config is not None:
        return ServeConfig.from_yaml(config)
    return ServeConfig(host=host, port=port, models=[
        ServeModelConfig(name=n, min_replicas=replicas, max_replicas=max(replicas, max_replicas or replicas))
        for n in (models or ["embedded"])])


@app.command("up")
def serve_up(
    config: Annotated[Optional[Path], typer.Option(help="Serve config YAML (ServeConfig); overrides --model.")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="Registry model(s) to serve.")] = None,
    replicas: Annotated[int, typer.Option(help="Min replicas per model.")] = 1,
    max_replicas: Annotated[Optional[int], typer.Option(help="Max replicas per model (autoscaling).")] = None,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address; default: local (started if needed).")] = None,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    timeout: Annotated[Optional[float], typer.Option(help="Seconds to wait for healthy replicas.")] = None,
) -> dict[str, Any]:
    """Start the OpenAI-compatible Serve app for registry models and wait until it is healthy."""
    cfg = _config(config, models, replicas, max_replicas, host, port)
    timeout_s = timeout if timeout is not None else cfg.health_timeout_s
    t0 = time.monotonic()
    build_app_args(cfg)  # validates models against the registry before any cluster work
    check_machine(cfg, address)  # a GPU node whose torch cannot use its GPUs: one line before Ray starts
    # Connect before building the app: ray.serve.llm's builder touches Ray, and without a connection
    # Ray auto-started a driver-owned local instance that died with this command.
    connect(address, start_local=True)
    app = build_app(cfg)
    _, serve = ray_modules()
    serve.start(http_options={"host": cfg.host, "port": cfg.port})
    deploy_app(cfg, timeout_s, app)
    info = {
        "app": cfg.app_name,
        "url": f"http://{cfg.host}:{cfg.port}{cfg.route_prefix.rstrip('/')}/v1",
        "models": [m.name for m in cfg.models],
        "start_s": round(time.monotonic() - t0, 1),
    }
    _console().print(f"[green]serving[/green] {', '.join(info['models'])} at {info['url']} "
                     f"(ready in {info['start_s']} s)")
    return info


@app.command("status")
def serve_status(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
) -> dict[str, Any]:
    """Show Serve applications, deployments and replica states."""
    from rich.table import Table

    connect(address, start_local=False)
    _, serve = ray_modules()
    st = serve.status()
    table = Table("application", "status", "deployment", "deployment status", "replicas", "message")
    out: dict[str, Any] = {}
    for app_name, app in st.applications.items():
        out[app_name] = {"status": str(app.status), "deployments": {}}
        for dname, d in app.deployments.items():
            counts = {str(k): v for k, v in (d.replica_states or {}).items()}
            out[app_name]["deployments"][dname] = {"status": str(d.status), "replicas": counts}
            table.add_row(app_name, str(app.status), dname, str(d.status),
                          ", ".join(f"{k}={v}" for k, v in counts.items()), d.message or "")
    _console().print(table if out else "no Serve applications running")
    return out


@app.command("down")
def serve_down(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
    app_name: Annotated[Optional[str], typer.Option(help="Delete only this application.")] = None,
    stop_ray: Annotated[bool, typer.Option(help="Also stop the local Ray node (`ray stop`).")] = False,
) -> None:
    """Delete the Serve app (or all of Serve); optionally stop the local Ray node."""
    ray, serve = ray_modules()
    try:
        connect(address, start_local=False)
        if app_name:
            serve.delete(app_name)
        else:
            serve.shutdown()
    except ConnectionError as exc:
        _console().print(f"[yellow]{exc}[/yellow]")
    finally:
        if ray.is_initialized():
            ray.shutdown()
    if stop_ray:
        subprocess.run([ray_executable(), "stop"], capture_output=True, text=True, timeout=120)
    _console().print("serve down")



@app.command("write-config")
def serve_write_config(
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Serve config file to write (for `serve deploy FILE`).")],
    config: Annotated[Optional[Path], typer.Option(help="Serve config YAML (ServeConfig); overrides --model.")] = None,
    models: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="Registry model(s) to serve.")] = None,
    replicas: Annotated[int, typer.Option(help="Min replicas per model.")] = 1,
    max_replicas: Annotated[Optional[int], typer.Option(help="Max replicas per model (autoscaling).")] = None,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
) -> dict[str, Any]:
    """Write a Ray Serve config file (ray.serve.llm's OpenAI app) for `serve deploy`; no cluster needed."""
    path = write_serve_config(_config(config, models, replicas, max_replicas, host, port), out)
    _console().print(f"wrote {path}")
    return {"path": str(path)}
