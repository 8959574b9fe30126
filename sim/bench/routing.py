"""`esc-eval bench routing`: what sticky routing is worth with several Serve replicas.

The same simulation (ESC-Role and the target both served by one `ray.serve.llm` deployment of the
embedded model with N replicas) runs twice through `serve/<model>` handles:
  session  ConsistentHashRouter on the session id: every turn of a dialogue side reaches the
           replica that holds its growing history in the prefix cache;
  default  Serve's power-of-two-choices router: a turn lands on whichever replica is less busy,
           so a turn often finds its history on the other replica and prefills it again.
Reported per mode: wall time, dialogues/hour, mean and p90 latency of a model call, and how many
replicas each dialogue side touched; `sticky_speedup` = default wall / session wall.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional


from esc_eval.serve.chat import GenerationParams
from esc_eval.sim.cards import write_cards
from esc_eval.sim.config import ExecutionConfig, ModelRef, SimulationConfig
from esc_eval.sim.runfolder import RunFolder
from esc_eval.sim.simulation import run_simulation

MODES = ("session", "default")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _deploy(routing: str, replicas: int, kv_cache_gib: int, max_num_seqs: int, timeout_s: float) -> str:
    from esc_eval.serve.deploy import deploy_app
    from esc_eval.serve.serve_app import ServeConfig, ServeModelConfig

    cfg = ServeConfig(
        app_name=f"bench-{routing}", route_prefix=f"/bench-{routing}", kv_cache_gib=kv_cache_gib,
        # Several engines on a small machine: let the OS place them (the default binds each to the
        # same first core) and give each one OpenMP thread.
        env_vars={"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"},
        # half a logical CPU each: N replicas fit beside whatever else the node runs
        models=[ServeModelConfig(name="embedded", min_replicas=replicas, max_replicas=replicas, routing=routing,
                                 max_num_seqs=max_num_seqs, max_ongoing_requests=max(64, max_num_seqs * 2),
                                 replica_cpus=0.5)])
    deploy_app(cfg, timeout_s)
    return cfg.app_name


def _measure(app: str, cards_file: Path, dialogues: int, rounds: int, max_tokens: int, out: Path) -> dict[str, Any]:
    params = GenerationParams(max_tokens=max_tokens)
    ref = ModelRef(model="serve/embedded", options={"app_name": app, "address": None}, params=params)
    ex = ExecutionConfig(executor="local", concurrency=dialogues, chunk_size=dialogues, max_attempts=3,
                         turn_checkpoints=False)
    cfg = SimulationConfig(cards=str(cards_file), rounds=rounds, role=ref, targets=[ref], execution=ex)
    t0 = time.perf_counter()
    res = run_simulation(cfg, out)
    wall = time.perf_counter() - t0
    rows = list(RunFolder(out, create=False).iter_rows("dialogues"))
    lat = [t["latency_s"] for r in rows for t in r["turns"] if t["index"] > 0]
    return {"dialogues": res["items"], "failed": res["failed"], "model_calls": res["model_calls"],
            "wall_s": round(wall, 1), "dialogues_per_hour": round(res["items"] / wall * 3600, 1),
            "call_latency_mean_s": round(statistics.fmean(lat), 2) if lat else None,
            "call_latency_p90_s": round(statistics.quantiles(lat, n=10)[-1], 2) if len(lat) > 1 else None,
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "completion_tokens": sum(r["completion_tokens"] for r in rows)}


def run_routing_bench(dialogues: int = 16, rounds: int = 3, max_tokens: int = 48, replicas: int = 2,
                      kv_cache_gib: int = 1, timeout_s: float = 900) -> dict[str, Any]:
    import ray
    from ray import serve

    from esc_eval.sim.bench.simulation import synthetic_cards

    if dialogues < 1 or replicas < 2:
        raise ValueError("the routing bench needs at least 1 dialogue and 2 replicas")
    started_ray = not ray.is_initialized()
    if started_ray:
        from esc_eval.serve.ray_cluster import forget_stale_address

        forget_stale_address()
        ray.init(namespace="serve", include_dashboard=False, log_to_driver=False)
    tmp = Path(tempfile.mkdtemp(prefix="esc-bench-routing-"))
    cards = synthetic_cards(dialogues + 2)
    cards_file = write_cards(cards[:dialogues], tmp / "cards.json")
    warm_file = write_cards(cards[dialogues:], tmp / "warm.json")
    out: dict[str, Any] = {"model": "embedded (SmolLM2-135M-Instruct)", "replicas": replicas, "dialogues": dialogues,
                           "rounds": rounds, "max_new_tokens": max_tokens, "kv_cache_gib_per_replica": kv_cache_gib,
                           "workload": "ESC-Role and target both on the served model, all dialogues in flight"}
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
        for mode in MODES:
            t0 = time.perf_counter()
            app = _deploy(mode, replicas, kv_cache_gib, max_num_seqs=max(8, dialogues * 2), timeout_s=timeout_s)
            deploy_s = time.perf_counter() - t0
            _measure(app, warm_file, 2, 1, 8, tmp / f"warm-{mode}")  # first requests on the replicas
            out[mode] = _measure(app, cards_file, dialogues, rounds, max_tokens, tmp / mode)
            out[mode]["deploy_s"] = round(deploy_s, 1)
            serve.delete(app)
            time.sleep(2)  # let the old replicas' engine processes exit before the next deploy
        out["sticky_speedup"] = round(out["default"]["wall_s"] / out["session"]["wall_s"], 2)
    finally:
        if started_ray:
            try:
                serve.shutdown()
            finally:
                ray.shutdown()
    return out
