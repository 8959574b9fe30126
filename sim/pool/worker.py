"""Inside a worker: what runs a job's items and writes their rows (the same in a Ray actor and in
the driver's process, executor 'local').

Each worker runs up to `concurrency` items at once and streams result rows into atomic Parquet
parts (a buffered sink flushed every `flush_rows` rows or `flush_seconds`). The run folder is
reached through the storage the driver's `StorageSpec` names (sim/runs/storage.py): directly when the
worker sees it, else through the writer actor on the driver's node.
"""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import time
from typing import Any, Callable

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.sim.pool.capacity import Concurrency, choose_concurrency
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.runs.open import StorageSpec
from esc_eval.sim.runs.runfolder import RunFolder


class PartSink:
    """Buffers rows and writes them as atomic Parquet parts."""

    def __init__(self, run: RunFolder, kind: str, flush_rows: int, flush_seconds: float,
                 on_flush: Callable[[list[dict[str, Any]]], None] | None = None):
        self.run, self.kind = run, kind
        self.flush_rows, self.flush_seconds = flush_rows, flush_seconds
        self.on_flush = on_flush
        self.rows: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.last = time.monotonic()
        self.parts_written = 0

    def add(self, rows: list[dict[str, Any]], item: dict[str, Any]) -> None:
        self.rows.extend(rows)
        self.items.append(item)
        if len(self.rows) >= self.flush_rows or self.due():
            self.flush()

    def due(self) -> bool:
        return bool(self.rows or self.items) and time.monotonic() - self.last >= self.flush_seconds

    async def flush_every(self, period: float) -> None:
        """Flush on a timer, so rows finished just before a long quiet spell do not wait for the next row."""
        while True:
            await asyncio.sleep(period)
            if self.due():
                self.flush()

    def flush(self) -> None:
        if self.rows:
            self.run.write_part(self.kind, self.rows)  # durable before the items are forgotten below
            self.parts_written += 1
        if self.on_flush and self.items:
            self.on_flush(self.items)
        self.rows, self.items = [], []
        self.last = time.monotonic()


def as_spec(run_dir: str | StorageSpec) -> StorageSpec:
    return run_dir if isinstance(run_dir, StorageSpec) else StorageSpec(str(run_dir))


class WorkerCore:
    """One job's state inside a worker (the same in a Ray actor and in-process)."""

    def __init__(self, job: Job, run_dir: str | StorageSpec, execution: ExecutionConfig, models: ModelPool):
        self.job = job
        self.execution = execution
        self.models = models
        self.run = RunFolder(str(as_spec(run_dir).location), storage=as_spec(run_dir).open())
        models.run_storage = self.run.storage  # where the run folder's call cache is (sim/runs/call_cache.py)
        job.open_run(self.run)
        self.sink = PartSink(self.run, job.kind, execution.flush_rows, execution.flush_seconds, on_flush=job.after_flush)
        default = execution.concurrency or job.default_concurrency
        self.concurrency = Concurrency(default, "explicit" if execution.concurrency else "default", "")
        self.engines: list[dict[str, Any]] = []  # the capacities the job's engines reported
        self.sem = asyncio.Semaphore(default)
        self.stopped: RunStopError | None = None  # the run stopped: no new item starts here
        self.tally_at_start = models.tally.snapshot()
        self._setup_task: asyncio.Future | None = None
        self._timer: asyncio.Future | None = None

    async def ensure_setup(self) -> None:
        if self._setup_task is None:
            self._setup_task = asyncio.ensure_future(self._setup())
            period = min(1.0, self.execution.flush_seconds / 2)
            self._timer = asyncio.ensure_future(self.sink.flush_every(period))
        await self._setup_task

    async def _setup(self) -> None:
        """The job's setup (its engines start), then the items in flight its engines can hold."""
        await self.job.setup(self.models)
        pairs = []
        for ref, demand in self.job.demands():
            cap = self.models.capacity(ref)
            if cap is not None:
                pairs.append((cap, demand))
                self.engines.append({**dataclasses.asdict(cap), "demand": dataclasses.asdict(demand)})
        self.concurrency = choose_concurrency(self.execution.concurrency, self.concurrency.value, pairs,
                                              self.job.unit)
        self.sem = asyncio.Semaphore(self.concurrency.value)  # before any item: run_one waits for the setup

    def setup_report(self) -> dict[str, Any]:
        return {"where": f"{os.uname().nodename}:{os.getpid()}", "concurrency": self.concurrency.as_dict(),
                "engines": self.engines}

    async def run_one(self, item: dict[str, Any]) -> dict[str, Any]:
        async with self.sem:
            if self.stopped is not None:  # the run stopped while this item waited: it never starts
                raise self.stopped
            try:
                rows, summary = await self.job.run(item)
            except RunStopError as e:
                self.stopped = self.stopped or e
                raise
        self.sink.add(rows, item)
        return summary

    async def run_chunk(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await self.ensure_setup()
        # Every item ends (its row in the sink) before the chunk answers, even when one stops the run.
        results = await asyncio.gather(*(self.run_one(it) for it in items), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise next((e for e in errors if isinstance(e, RunStopError)), errors[0])
        return list(results)

    async def finish(self) -> int:
        if self._timer is not None:
            self._timer.cancel()
        self.sink.flush()
        self.job.finish()
        return self.sink.parts_written


class Worker:
    """A worker: engines that outlive jobs (ModelPool) plus the state of each job it runs."""

    def __init__(self) -> None:
        self.models = ModelPool()
        self.jobs: dict[str, WorkerCore] = {}

    def start_job(self, job_id: str, job: Job, run_dir: str | StorageSpec, execution: ExecutionConfig) -> str:
        """Returns how this worker reaches the run folder (direct, via the driver, object storage)."""
        if job_id not in self.jobs:
            self.jobs[job_id] = WorkerCore(job, run_dir, execution, self.models)
        return type(self.jobs[job_id].run.storage).__name__

    async def setup(self, job_id: str) -> dict[str, Any]:
        """Set the job up here (its engines start); returns where, the items in flight chosen and why,
        and the engines' capacities."""
        core = self.jobs[job_id]
        await core.ensure_setup()
        return core.setup_report()

    def stop_job(self, job_id: str, reason: str) -> None:
        """The run stopped (elsewhere): items not started here yet never start."""
        core = self.jobs.get(job_id)
        if core is not None and core.stopped is None:
            core.stopped = RunStopError(reason)

    async def run_chunk(self, job_id: str, items: list[dict[str, Any]],
                        spec: tuple[Job, Any, ExecutionConfig] | None = None, rerun: bool = False) -> list[dict[str, Any]]:
        if job_id not in self.jobs and spec is not None:
            # A restarted actor (the old one died) re-running this chunk: it has no job state yet.
            self.start_job(job_id, *spec)
        core = self.jobs[job_id]
        if rerun:
            core.job.rerun(items)  # another worker ran these and was lost: pick up what it left
        return await core.run_chunk(items)

    async def finish_job(self, job_id: str) -> int:
        core = self.jobs.pop(job_id, None)
        return await core.finish() if core else 0

    def progress(self, job_id: str) -> dict[str, int]:
        """Model calls and tokens answered in this worker since the job started here."""
        core = self.jobs.get(job_id)
        now = self.models.tally.snapshot()
        base = core.tally_at_start if core else now
        return {k: now[k] - base[k] for k in now}

    async def close(self) -> None:
        for job_id in list(self.jobs):
            await self.finish_job(job_id)
        await self.models.close()


# A worker's young-generation collections between two that count survivors as old (CPython: 10).
GC_GEN1_THRESHOLD = 100


def tune_gc() -> None:
    """The garbage collector of a worker process, set when it starts (Ray actors only: a driver's,
    e.g. executor local in a notebook, is the user's). The cyclic GC's full collections walk every
    object the process holds: with thousands of dialogues in flight they cost about a fifth of a
    worker's CPU per model call (bench sim (a)). What is alive at start (modules, Ray) leaves those
    walks for good (gc.freeze: it is never garbage), and a dialogue's short-lived objects get 10x
    more young collections to die in before they are promoted."""
    gc.collect()
    gc.freeze()
    young, old, oldest = gc.get_threshold()
    gc.set_threshold(young, max(old, GC_GEN1_THRESHOLD), oldest)


def actor_class():
    import ray

    @ray.remote
    class PoolWorker:
        def __init__(self):
            self.w = Worker()
            tune_gc()

        def start_job(self, job_id, job, run_dir, execution):
            return self.w.start_job(job_id, job, run_dir, execution)

        async def setup(self, job_id):
            return await self.w.setup(job_id)

        async def stop_job(self, job_id, reason):
            self.w.stop_job(job_id, reason)

        async def run_chunk(self, job_id, items, spec=None, rerun=False):
            return await self.w.run_chunk(job_id, items, spec, rerun)

        async def finish_job(self, job_id):
            return await self.w.finish_job(job_id)

        async def progress(self, job_id):
            return self.w.progress(job_id)

        async def close(self):
            await self.w.close()

    return PoolWorker
