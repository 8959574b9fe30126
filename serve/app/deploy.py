"""Deploying the Serve app on a Ray cluster: connect (or start a local head), deploy, wait
(bounded) until every replica is healthy, naming the model whose replicas did not come up and,
when a replica's engine did not start, the engine's own cause (serve/app/server.py raises it in
the replica; Serve's message ends with it). The `esc-eval serve` commands (serve/app/commands.py), the
runs' Serve placement (sim/driver/placement.py) and the routing benchmark call these."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from esc_eval.serve.engines.output import root_cause
from esc_eval.serve.app.ray_cluster import (StaleRayAddressError, forget_stale_address, live_local_address, prepare_auth,
                                        start_env)
from esc_eval.serve.app.application import INSTALL_HINT, ServeConfig, ServeConfigError, build_app

RUNNING, FAILED = "RUNNING", ("DEPLOY_FAILED", "UNHEALTHY")


class ServeStartError(RuntimeError):
    """The Serve app did not become healthy in time (names the model and Serve's message)."""


def ray_modules():
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray, serve


def connect(address: str | None, *, start_local: bool, num_cpus: int | None = None) -> str:
    """Join `address`, else a running local cluster, else (start_local) start a local head node."""
    ray, _ = ray_modules()
    prepare_auth(address)  # Ray's token auth stays on (see serve/app/ray_cluster.py)
    if ray.is_initialized():
        return "connected"
    if address:
        ray.init(address=address, namespace="serve", log_to_driver=False)
        return address
    try:
        live = live_local_address()
    except StaleRayAddressError as exc:
        if not start_local:
            raise ConnectionError(f"no running Ray cluster: {exc}") from None
        forget_stale_address()
        live = None
    if live:
        ray.init(address="auto", namespace="serve", log_to_driver=False)
        return "auto"
    if not start_local:
        raise ConnectionError("no running Ray cluster found (start one with `esc-eval serve up`)")
    cmd = [ray_executable(), "start", "--head", "--disable-usage-stats", "--include-dashboard=false",
           f"--num-cpus={num_cpus or os.cpu_count() or 1}"]
    # A new session: the head's daemons must outlive this CLI and the terminal or job group it ran in
    # (a signal to our process group once `serve up` returned used to take the head down with it).
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=start_env(), start_new_session=True)
    if proc.returncode != 0:
        raise ServeStartError(f"`{' '.join(cmd)}` failed:\n{proc.stderr[-2000:]}")
    ray.init(address="auto", namespace="serve", log_to_driver=False)
    return "local head"


def deployment_models(cfg: ServeConfig) -> dict[str, str]:
    """deployment-name suffix -> model name, to name the model behind a failing deployment."""
    return {":" + m.name.replace("/", "--").replace(".", "_"): m.name for m in cfg.models}


def wait_until_healthy(app_name: str, timeout_s: float, models: dict[str, str] | None = None,
                       poll_s: float = 1.0) -> float:
    """Poll serve.status() until `app_name` is RUNNING; raise ServeStartError on failure or timeout."""
    _, serve = ray_modules()
    models = models or {}
    start = time.monotonic()

    def describe(app) -> str:
        parts = []
        for dname, d in (app.deployments if app else {}).items():
            if str(d.status).endswith("HEALTHY") and not str(d.status).endswith("UNHEALTHY"):
                continue
            model = next((m for suffix, m in models.items() if dname.endswith(suffix)), None)
            label = f"model {model!r} (deployment {dname})" if model else f"deployment {dname}"
            cause = replica_cause(d.message or "")
            parts.append(f"{label}: {str(d.status).rsplit('.', 1)[-1]}" + (f": {cause}" if cause else ""))
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


def replica_cause(message: str) -> str:
    """One line from Serve's deployment message: why its replicas did not start (the replica's own
    EngineStartError, else the last exception of the traceback Serve quotes), else its first line."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "EngineStartError: " in line:
            return line.split("EngineStartError: ", 1)[1].strip()
    return root_cause(lines) or (lines[0].strip() if lines else "")


def check_machine(cfg: ServeConfig, address: str | None) -> None:
    """Before deploying on this machine (no address, or a local one): the accelerator decision the
    replicas' engines will follow (serve/devices/accelerator.py). Raises AcceleratorMismatch when the
    machine contradicts itself, ServeConfigError when a model asks for GPUs its engines would not use."""
    from esc_eval.serve.devices.accelerator import check_accelerator

    address = address or os.environ.get("RAY_ADDRESS")
    if address and address not in ("auto", "local"):
        return  # the replicas run on the cluster's nodes: their engines decide there
    decision = check_accelerator()
    on_gpu = [m.name for m in cfg.models if m.accelerator == "gpu"]
    if on_gpu and decision.kind != "cuda":
        raise ServeConfigError(f"models {', '.join(on_gpu)}: accelerator gpu, but this machine's engines run on the "
                               f"CPU ({decision.reason}); use accelerator: cpu, or --address a GPU cluster")


def deploy_app(cfg: ServeConfig, timeout_s: float, app: Any = None) -> None:
    """Deploy `cfg` on the running Serve instance and wait (bounded) until it is healthy."""
    _, serve = ray_modules()
    # _run(_blocking=False): deploy without serve.run's unbounded wait; we poll with a timeout.
    serve._run(app if app is not None else build_app(cfg), _blocking=False, name=cfg.app_name,
               route_prefix=cfg.route_prefix)
    wait_until_healthy(cfg.app_name, timeout_s, deployment_models(cfg))


def ray_executable() -> str:
    """The `ray` CLI of this interpreter's environment (a venv's bin is often not on PATH)."""
    import shutil
    import sys

    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")
