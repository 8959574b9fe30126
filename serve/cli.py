"""`esc-eval serve up|status|down`: plain functions with typer annotations (registered by sim.cli).

    esc-eval serve up                          # the embedded model on a local Ray, 127.0.0.1:8000
    esc-eval serve up --config cluster/serve/esc-eval-serve.yaml --address ray://head:10001
    esc-eval serve status
    esc-eval serve down [--stop-ray]

`up` returns once every replica is healthy, or fails within --timeout naming the model whose
replicas did not come up (with Serve's own message).
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from serve.serve_app import INSTALL_HINT, ServeConfig, ServeModelConfig, build_app

RUNNING, FAILED = "RUNNING", ("DEPLOY_FAILED", "UNHEALTHY")


class ServeStartError(RuntimeError):
    """The Serve app did not become healthy in time (names the model and Serve's message)."""


def _ray():
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray, serve


def connect(address: str | None, *, start_local: bool, num_cpus: int | None = None) -> str:
    """Join `address`, else a running local cluster, else (start_local) start a local head node."""
    ray, _ = _ray()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        return "connected"
    if address:
        ray.init(address=address, namespace="serve", log_to_driver=False)
        return address
    try:
        ray.init(address="auto", namespace="serve", log_to_driver=False)
        return "auto"
    except ConnectionError:
        if not start_local:
            raise ConnectionError("no running Ray cluster found (start one with `esc-eval serve up`)") from None
    cmd = [_ray_executable(), "start", "--head", "--disable-usage-stats", "--include-dashboard=false",
           f"--num-cpus={num_cpus or os.cpu_count() or 1}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ServeStartError(f"`{' '.join(cmd)}` failed:\n{proc.stderr[-2000:]}")
    ray.init(address="auto", namespace="serve", log_to_driver=False)
    return "local head"


def _deployment_models(cfg: ServeConfig) -> dict[str, str]:
    """deployment-name suffix -> model name, to name the model behind a failing deployment."""
    return {":" + m.name.replace("/", "--").replace(".", "_"): m.name for m in cfg.models}


def wait_until_healthy(app_name: str, timeout_s: float, models: dict[str, str] | None = None,
                       poll_s: float = 1.0) -> float:
    """Poll serve.status() until `app_name` is RUNNING; raise ServeStartError on failure or timeout."""
    _, serve = _ray()
    models = models or {}
    start = time.monotonic()

    def describe(app) -> str:
        parts = []
        for dname, d in (app.deployments if app else {}).items():
            if str(d.status).endswith("HEALTHY") and not str(d.status).endswith("UNHEALTHY"):
                continue
            model = next((m for suffix, m in models.items() if dname.endswith(suffix)), None)
            label = f"model {model!r} (deployment {dname})" if model else f"deployment {dname}"
            parts.append(f"{label}: {d.status} {d.message}".strip())
        return "; ".join(parts) or (app.message if app else "application not created")

    while True:
        app = serve.status().applications.get(app_name)
        status = str(app.status).rsplit(".", 1)[-1] if app else "NOT_STARTED"
        if status == RUNNING:
            return time.monotonic() - start
        if status in FAILED:
            raise ServeStartError(f"Serve app {app_name!r} failed: {describe(app)}")
        if time.monotonic() - start > timeout_s:
            raise ServeStartError(
                f"Serve app {app_name!r} not healthy after {timeout_s:.0f} s ({status}): {describe(app)}")
        time.sleep(poll_s)


def deploy_app(cfg: ServeConfig, timeout_s: float, app: Any = None) -> None:
    """Deploy `cfg` on the running Serve instance and wait (bounded) until it is healthy."""
    _, serve = _ray()
    # _run(_blocking=False): deploy without serve.run's unbounded wait; we poll with a timeout.
    serve._run(app if app is not None else build_app(cfg), _blocking=False, name=cfg.app_name,
               route_prefix=cfg.route_prefix)
    wait_until_healthy(cfg.app_name, timeout_s, _deployment_models(cfg))


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
    if config is not None:
        cfg = ServeConfig.from_yaml(config)
    else:
        names = models or ["embedded"]
        cfg = ServeConfig(host=host, port=port, models=[
            ServeModelConfig(name=n, min_replicas=replicas, max_replicas=max(replicas, max_replicas or replicas))
            for n in names])
    timeout_s = timeout if timeout is not None else cfg.health_timeout_s
    t0 = time.monotonic()
    app = build_app(cfg)  # validates models against the registry before any cluster work
    connect(address, start_local=True)
    _, serve = _ray()
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


def serve_status(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
) -> dict[str, Any]:
    """Show Serve applications, deployments and replica states."""
    from rich.table import Table

    connect(address, start_local=False)
    _, serve = _ray()
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


def serve_down(
    address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: the local one).")] = None,
    app_name: Annotated[Optional[str], typer.Option(help="Delete only this application.")] = None,
    stop_ray: Annotated[bool, typer.Option(help="Also stop the local Ray node (`ray stop`).")] = False,
) -> None:
    """Delete the Serve app (or all of Serve); optionally stop the local Ray node."""
    ray, serve = _ray()
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
        subprocess.run([_ray_executable(), "stop"], capture_output=True, text=True, timeout=120)
    _console().print("serve down")


def _ray_executable() -> str:
    """The `ray` CLI of this interpreter's environment (a venv's bin is often not on PATH)."""
    import shutil
    import sys

    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


def _console():
    from rich.console import Console

    return Console(stderr=True)
