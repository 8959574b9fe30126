"""Router comparisons for `esc-eval bench serve --routing ...`: the Serve app deployed once per
routing mode, N replicas of one registry model, the same workload against each.

  session       ConsistentHashRouter on the `x-session-id` header: every turn of a dialogue reaches
                the replica that holds its history in the prefix cache
  prefix_cache  ray.serve.llm's PrefixCacheAffinityRouter: routes by the longest cached prefix
  default       Serve's power-of-two-choices: the less busy of two replicas, history or not
Each mode gets a fresh app (fresh engines, empty caches), deleted before the next one starts.
`reset_prefix_cache` empties every replica's cache of a running app, for arms that share one;
`prefix_cache_use` gives each arm its replicas' prefix-cache hit rate.
"""
from __future__ import annotations

import os
import socket
import time
from typing import Any

from esc_eval.serve.app.application import SERVE_PORT, ServeConfig, ServeModelConfig, deployment_name

ROUTING_MAX_NUM_SEQS = 64  # vLLM batch size per replica of a routing arm: the sweep's top level fits one replica

ROUTING_MODES = ("default", "session", "prefix_cache")
APP_PREFIX = "bench-serve-"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def routing_config(mode: str, model: str, replicas: int, kv_cache_gib: int | None = None, max_num_seqs: int = ROUTING_MAX_NUM_SEQS,
                   max_model_len: int | None = None, port: int = SERVE_PORT) -> ServeConfig:
    """The Serve app of one routing arm: `replicas` fixed replicas sharing the node's CPUs (each with
    `kv_cache_gib` of KV cache on a CPU; None: ServeConfig's default, this process's VLLM_CPU_KVCACHE_SPACE)."""
    if mode not in ROUTING_MODES:
        raise ValueError(f"--routing {mode!r}: expected one of {', '.join(ROUTING_MODES)}")
    if replicas < 2:
        raise ValueError(f"--replicas {replicas}: a routing comparison needs at least 2 replicas")
    return ServeConfig(
        app_name=APP_PREFIX + mode.replace("_", "-"), route_prefix=f"/{APP_PREFIX}{mode.replace('_', '-')}",
        port=port, **({} if kv_cache_gib is None else {"kv_cache_gib": kv_cache_gib}),
        # Several CPU engines on one node: let the OS place them (vLLM binds each to the first core
        # by default) and give each one OpenMP thread.
        env_vars={"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"},
        models=[ServeModelConfig(name=model, min_replicas=replicas, max_replicas=replicas, routing=mode,
                                 max_num_seqs=max_num_seqs, max_ongoing_requests=max(64, max_num_seqs * 2),
                                 max_model_len=max_model_len,
                                 # a fraction of a CPU each, so N replicas fit beside the rest of the node
                                 replica_cpus=0.5)])


def _serve():
    from esc_eval.serve.app.deploy import ray_modules

    return ray_modules()


def ensure_serve(address: str | None) -> tuple[bool, int]:
    """Join `address` (or this process's Ray), else start a local Ray that ends with this process;
    start Serve's HTTP proxy on a free port. Returns (started_ray, port)."""
    ray, serve = _serve()
    started = False
    if not ray.is_initialized():
        if address:
            from esc_eval.serve.app.deploy import connect

            connect(address, start_local=False)
        else:
            from esc_eval.serve.app.ray_cluster import forget_stale_address

            forget_stale_address()
            # Ray's workers run at nice 15; here they hold the replicas' engines, the load under test,
            # and at 15 any other process on the machine takes their CPU (as sim/pool/pool.py does).
            os.environ.setdefault("RAY_worker_niceness", "0")
            from esc_eval.sim.pool.ray_start import start_local_ray

            start_local_ray(namespace="serve", include_dashboard=False, log_to_driver=False)
            started = True
    serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
    # A Serve instance already running on the cluster keeps its own proxy port: ask it.
    from ray.serve.context import _get_global_client

    port = int(_get_global_client().http_config.port)
    return started, port


def deploy_routing_app(cfg: ServeConfig, timeout_s: float) -> tuple[str, float]:
    """Deploy one arm's app and wait until every replica is healthy: (its /v1 URL, seconds taken)."""
    from esc_eval.serve.app.deploy import deploy_app

    t0 = time.perf_counter()
    deploy_app(cfg, timeout_s)
    return f"http://127.0.0.1:{cfg.port}{cfg.route_prefix}/v1", time.perf_counter() - t0


def delete_app(name: str) -> None:
    _, serve = _serve()
    serve.delete(name)
    time.sleep(2)  # let the replicas' engine processes exit before the next arm's start


def prefix_cache_use(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the replicas' prefix caches served between two probes of their engines
    (sim/bench/engine_probe.py probe_replicas: {"id", "counts"} each): prompt tokens, those
    served from the cache and their share (the hit rate), in all and per replica; None when a
    replica keeps no counts. Each turn of a dialogue re-sends its whole history, so the hit rate is
    the share of that history a replica did not prefill again."""
    if not after or any(r["counts"] is None for r in after):
        return None
    start = {r["id"]: r["counts"] or {} for r in before}
    per = []
    for r in after:
        base = start.get(r["id"], {})
        d = {k: r["counts"].get(k, 0) - base.get(k, 0) for k in ("requests", "prompt_tokens", "cached_prompt_tokens")}
        per.append({"id": r["id"], **d, "hit_rate": _share(d["cached_prompt_tokens"], d["prompt_tokens"])})
    prompt, cached = sum(r["prompt_tokens"] for r in per), sum(r["cached_prompt_tokens"] for r in per)
    return {"prompt_tokens": prompt, "cached_prompt_tokens": cached, "hit_rate": _share(cached, prompt),
            "replicas": per}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def reset_prefix_cache(app_name: str, model: str) -> int:
    """Empty the prefix cache of every replica of `model` in a running Serve app; replicas reset."""
    _, serve = _serve()
    handle = serve.get_deployment_handle(deployment_name(model), app_name)
    try:
        return len(handle.broadcast("reset_prefix_cache").results())
    finally:
        handle.shutdown()  # no router thread left pushing metrics from the measuring process
