"""What `esc-eval serve up|status|down|write-config` do once their options are parsed: the Serve config
from a YAML file or the options, the app started on a Ray cluster and waited for until every replica
is healthy (deploy.py), its applications and replicas shown, Serve (and the local Ray node) stopped,
the config written for `serve deploy`. Lines and tables go to stderr; what the command prints as JSON
comes back."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from esc_eval.serve.app.application import MIN_REPLICAS, SERVE_HOST, SERVE_PORT, ServeConfig, ServeModelConfig


def _console():
    from rich.console import Console

    return Console(stderr=True)


def serve_config_from_options(config: Path | None = None, models: list[str] | None = None, replicas: int = MIN_REPLICAS,
                              max_replicas: int | None = None, host: str = SERVE_HOST, port: int = SERVE_PORT) -> ServeConfig:
    """The Serve config: the YAML file `config` (which overrides the rest), else `models` (default the
    embedded one) with min `replicas` and max `max_replicas` each, on host:port."""
    if config is not None:
        return ServeConfig.from_yaml(config)
    return ServeConfig(host=host, port=port, models=[
        ServeModelConfig(name=n, min_replicas=replicas, max_replicas=max(replicas, max_replicas or replicas))
        for n in (models or ["embedded"])])


def serve_up(config: Path | None = None, models: list[str] | None = None, replicas: int = MIN_REPLICAS,
             max_replicas: int | None = None, address: str | None = None, host: str = SERVE_HOST, port: int = SERVE_PORT,
             timeout: float | None = None) -> dict[str, Any]:
    """`esc-eval serve up`: the OpenAI-compatible Serve app for registry models, started and waited for
    until healthy (within `timeout` s, default the config's health_timeout_s); its URL, models and start time."""
    from esc_eval.serve.app.application import build_app, build_app_args
    from esc_eval.serve.app.deploy import check_machine, connect, deploy_app, ray_modules

    cfg = serve_config_from_options(config, models, replicas, max_replicas, host, port)
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


def serve_status(address: str | None = None) -> dict[str, Any]:
    """`esc-eval serve status`: Serve's applications, deployments and replica states, as a table on
    stderr and as the returned dict."""
    from rich.table import Table

    from esc_eval.serve.app.deploy import connect, ray_modules

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


def serve_down(address: str | None = None, app_name: str | None = None, stop_ray: bool = False) -> None:
    """`esc-eval serve down`: the Serve app `app_name` deleted (else all of Serve shut down); with
    stop_ray also the local Ray node stopped (`ray stop`)."""
    import subprocess

    from esc_eval.serve.app.deploy import connect, ray_executable, ray_modules

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


def serve_write_config(out: Path, config: Path | None = None, models: list[str] | None = None, replicas: int = MIN_REPLICAS,
                       max_replicas: int | None = None, host: str = SERVE_HOST, port: int = SERVE_PORT) -> dict[str, Any]:
    """`esc-eval serve write-config`: a Ray Serve config file (ray.serve.llm's OpenAI app) for `serve
    deploy`, no cluster needed; its path."""
    from esc_eval.serve.app.application import write_serve_config

    path = write_serve_config(serve_config_from_options(config, models, replicas, max_replicas, host, port), out)
    _console().print(f"wrote {path}")
    return {"path": str(path)}


__all__ = ["serve_config_from_options", "serve_down", "serve_status", "serve_up", "serve_write_config"]
