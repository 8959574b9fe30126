"""Replicas sharing one GPU (`gpu_fraction`, serve/app/application.py): what each tells vLLM, and
their engine starts taken one at a time.

vLLM's Ray executor asks Ray for VLLM_RAY_PER_WORKER_GPUS of a GPU for its worker (default: a whole
one), read in the engine-core process the replica spawns. Ray Serve LLM 2.60 derives the fraction
from the placement bundle only for its download tasks, so each replica names its own
(application.py puts it in the replica's env).

vLLM sizes its KV cache by profiling the GPU's memory while it starts, assuming that no other process
on the GPU changes its use meanwhile (a note in vLLM's gpu_worker). Serve starts a run's replicas
together, so replicas sharing a GPU would profile each other's allocations as their own: a cache too
small, or vLLM's "Error in memory profiling". A replica that shares a GPU therefore starts its engine
under a lock held by one replica of the node at a time (a file lock in the node's temp folder: Ray's
actors on one node share it, and the lock goes with a process that dies). Replicas with whole GPUs
start at once as before. A lock not had within START_LOCK_TIMEOUT_S is given up with a warning and
the start goes on, the KV check (server.py) still guarding it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Mapping

log = logging.getLogger("esc_eval.serve.app.gpu_share")

PER_WORKER_GPUS_ENV = "VLLM_RAY_PER_WORKER_GPUS"  # the GPUs vLLM's Ray executor asks for each worker
START_LOCK_ENV = "ESC_EVAL_GPU_START_LOCK"  # the lock file's path (default: in the node's temp folder)
START_LOCK_TIMEOUT_S = 1800.0  # a 70B start with CUDA graphs takes minutes; a stuck one must not hold all


def shares_a_gpu(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this replica's engine runs on part of a GPU (PER_WORKER_GPUS_ENV below 1)."""
    try:
        return 0 < float(env.get(PER_WORKER_GPUS_ENV) or 1) < 1
    except ValueError:
        return False


def start_lock_path(env: Mapping[str, str] = os.environ) -> str:
    return env.get(START_LOCK_ENV) or os.path.join(tempfile.gettempdir(), "esc-eval-gpu-engine-start.lock")


@asynccontextmanager
async def one_start_at_a_time(model: str, timeout_s: float | None = None) -> AsyncIterator[float]:
    """Held while a replica sharing a GPU starts its engine (see the module doc); yields the seconds
    it waited. A replica with whole GPUs does not wait."""
    if not shares_a_gpu():
        yield 0.0
        return
    from filelock import FileLock, Timeout

    # acquired in a thread (the replica's event loop stays free), released from the loop: not thread-local
    lock = FileLock(start_lock_path(), timeout=START_LOCK_TIMEOUT_S if timeout_s is None else timeout_s,
                    thread_local=False)
    t0 = time.monotonic()
    try:
        await asyncio.to_thread(lock.acquire)
    except Timeout:
        log.warning("engine start of %s: another engine on this node's GPUs still starting after %.0f s; "
                    "starting beside it", model, time.monotonic() - t0)
        yield time.monotonic() - t0
        return
    waited = time.monotonic() - t0
    if waited >= 1:
        log.info("engine start of %s: waited %.0f s for the engines sharing its GPU to start", model, waited)
    try:
        yield waited
    finally:
        lock.release()


__all__ = ["PER_WORKER_GPUS_ENV", "START_LOCK_ENV", "START_LOCK_TIMEOUT_S", "one_start_at_a_time", "shares_a_gpu",
           "start_lock_path"]
