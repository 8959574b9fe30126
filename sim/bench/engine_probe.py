"""vLLM's own token counts from the engines inside a pool's workers.

`esc-eval bench gpu` runs our side through the pool exactly as `score` / `simulate` do; the
engines live in the worker actors, out of the driver's reach. This probe is a pool job sent to
each worker directly (not through the job's chunk scheduling, which may put two chunks on one
worker): in there it finds the started engines (serve/backends/vllm_engine.py's hosts) and, per
engine, adds or reads its token counter (serve/engines/vllm_compat.py), optionally resetting its prefix
cache. Engines behind Serve deployments are not in the workers: the probe then finds none, and
the benchmark says vLLM's counts were not available.
"""
from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from typing import Any


class EngineProbe:
    """A pool job (sim/pool_worker.Job) whose one item reports this worker's engines."""

    kind = "scores"  # rows go nowhere: the probe writes none

    def __init__(self, reset_prefix_cache: bool = False):
        self.reset_prefix_cache = reset_prefix_cache

    async def setup(self, models) -> None:
        pass

    def after_flush(self, items) -> None:
        pass

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        from esc_eval.serve.engines.vllm_compat import kv_cache_blocks, token_counter
        from esc_eval.serve.backends.vllm_engine import _HOSTS  # this process's engine hosts (re-exported by main's engine_host split)

        engines = []
        for host in [h for h in list(_HOSTS.values()) if h.engine is not None]:
            if self.reset_prefix_cache:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(host.engine.reset_prefix_cache(), host.loop))
            counter = token_counter(host.engine)
            engines.append({"model": host.model_path, "id": f"{os.getpid()}:{id(host.engine)}",
                            "counts": counter.snapshot() if counter is not None else None,
                            "kv_cache": kv_cache_blocks(host.engine), "dtype": host.dtype,
                            "engine_kwargs": started_kwargs(host)})
        return [], {"ok": True, "calls": 0, "engines": engines}


def started_kwargs(host) -> dict[str, str]:
    """The arguments a started engine host gave vLLM (its options resolved for its device)."""
    from esc_eval.serve.engines.args import engine_kwargs

    kwargs = engine_kwargs(host.engine_kwargs, host.device, adapters=len(host.adapters))
    return {k: repr(v) for k, v in sorted(kwargs.items())}


def probe_workers(pool, reset_prefix_cache: bool = False) -> list[dict[str, Any]]:
    """One entry per started engine in the pool's workers (model path, counts since the counter was
    added, KV cache, dtype); the workers must be up (after a warm-up run)."""
    job = EngineProbe(reset_prefix_cache)
    job_id = f"probe-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="esc-bench-probe-") as folder:
        spec = (job, folder, pool.execution)
        if pool.workers:
            import ray

            chunks = ray.get([w.run_chunk.remote(job_id, [{}], spec) for w in pool.workers])
            ray.get([w.finish_job.remote(job_id) for w in pool.workers])
        elif pool._local is not None:  # executor 'local': the worker is this process
            async def local() -> list[list[dict[str, Any]]]:
                chunk = await pool._local.run_chunk(job_id, [{}], spec)
                await pool._local.finish_job(job_id)
                return [chunk]

            chunks = asyncio.run(local())
        else:
            return []
    return [e for chunk in chunks for summary in chunk for e in summary["engines"]]


def counts_delta(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, dict[str, int]] | None:
    """Per model path, what the engines counted between two probes (engines of one model in several
    workers summed); None when an engine kept no counts or none was found."""
    if not after or any(e["counts"] is None for e in after):
        return None
    start = {e["id"]: e["counts"] for e in before if e["counts"] is not None}
    out: dict[str, dict[str, int]] = {}
    for e in after:
        base = start.get(e["id"], {})
        acc = out.setdefault(e["model"], {})
        for k, v in e["counts"].items():
            acc[k] = acc.get(k, 0) + v - base.get(k, 0)
    return out


__all__ = ["EngineProbe", "started_kwargs", "counts_delta", "probe_workers"]
