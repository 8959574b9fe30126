"""Replicas sharing a GPU (serve/app/gpu_share.py): they tell vLLM's Ray worker their fraction, and
their engine starts take turns, in one process as across processes (the lock is a file)."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from esc_eval.serve.app.gpu_share import PER_WORKER_GPUS_ENV, START_LOCK_ENV, one_start_at_a_time, shares_a_gpu


def test_only_a_fraction_of_a_gpu_counts_as_sharing():
    assert shares_a_gpu({PER_WORKER_GPUS_ENV: "0.2141"})
    assert not shares_a_gpu({}) and not shares_a_gpu({PER_WORKER_GPUS_ENV: "1"})
    assert not shares_a_gpu({PER_WORKER_GPUS_ENV: "two"}) and not shares_a_gpu({PER_WORKER_GPUS_ENV: "0"})


async def _two_starts() -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []

    async def start(model: str) -> None:
        async with one_start_at_a_time(model):
            t0 = time.monotonic()
            await asyncio.sleep(0.3)  # an engine profiling the GPU's memory
            spans.append((t0, time.monotonic()))

    await asyncio.gather(start("role"), start("target"))
    return sorted(spans)


def test_replicas_sharing_a_gpu_start_one_after_the_other(monkeypatch, tmp_path):
    monkeypatch.setenv(START_LOCK_ENV, str(tmp_path / "start.lock"))
    monkeypatch.setenv(PER_WORKER_GPUS_ENV, "0.5")
    (a0, a1), (b0, _) = asyncio.run(_two_starts())
    assert b0 >= a1  # the second began after the first ended
    monkeypatch.delenv(PER_WORKER_GPUS_ENV)  # whole GPUs: together, as Serve starts them
    (a0, a1), (b0, _) = asyncio.run(_two_starts())
    assert b0 < a1


def test_the_lock_holds_across_processes_and_a_stuck_holder_is_waited_for_only_so_long(monkeypatch, tmp_path):
    lock = tmp_path / "start.lock"
    monkeypatch.setenv(START_LOCK_ENV, str(lock))
    monkeypatch.setenv(PER_WORKER_GPUS_ENV, "0.5")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from filelock import FileLock; l = FileLock(sys.argv[1]); l.acquire(); "
        "print('held', flush=True); time.sleep(30)"), str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"

        async def start() -> float:
            async with one_start_at_a_time("j7b", timeout_s=0.5) as waited:
                return waited

        assert 0.5 <= asyncio.run(start()) < 5  # another replica's engine still starting: given up, the start goes on
        holder.kill()
        holder.wait()
        assert asyncio.run(start()) < 0.5  # the lock went with the process that held it
    finally:
        holder.kill()


@pytest.mark.parametrize("fraction", [None, "0.5"])
def test_a_replica_starts_its_engine_under_the_lock_when_it_shares_a_gpu(monkeypatch, tmp_path, fraction):
    """serve/app/server.py's LLMServer.start on a stand-in engine: inside the lock exactly when sharing."""
    from filelock import FileLock, Timeout
    from ray.serve.llm import LLMConfig

    from esc_eval.serve.app.server import LLMServer

    monkeypatch.setenv(START_LOCK_ENV, str(tmp_path / "start.lock"))
    if fraction:
        monkeypatch.setenv(PER_WORKER_GPUS_ENV, fraction)
    seen = {}

    class StandInEngine:
        def __init__(self, llm_config):
            self._engine_client = None

        async def start(self):
            try:  # is another replica kept out while this engine starts?
                FileLock(str(tmp_path / "start.lock"), timeout=0).acquire()
                seen["locked"] = False
            except Timeout:
                seen["locked"] = True

    cfg = LLMConfig(model_loading_config={"model_id": "j7b", "model_source": "/models/j7b"},
                    accelerator_config={"kind": "cpu"})
    asyncio.run(LLMServer.sync_init(cfg, engine_cls=StandInEngine).start())
    assert seen["locked"] is bool(fraction)
