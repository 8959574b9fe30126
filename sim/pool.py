"""The batch layer: a pool of Ray actors (or the current process) running a Job over work items.

The pool owns concurrency, checkpoints and retries of whole items; a Job owns what one item is.
- Items are pulled lazily from an iterator and sent in chunks (one Ray call per chunk), with at
  most a few chunks in flight per worker: backpressure, and flat driver memory for any item count.
- Each worker runs up to `concurrency` items at once and streams result rows into atomic Parquet
  parts (a buffered sink flushed every `flush_rows` rows or `flush_seconds`).
- A worker that dies is restarted by Ray and its chunk re-run; rows it had not flushed were never
  written, so nothing is duplicated, and resume-by-id skips everything that was.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from sim.config import ExecutionConfig
from sim.runfolder import RunFolder

log = logging.getLogger("esc_eval.pool")


class Job(Protocol):
    """What a worker runs. Must pickle before setup() (it travels to the actors)."""

    kind: str  # run-folder part kind the rows go to: "dialogues" | "scores"

    async def setup(self) -> None: ...

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Process one item; return (rows to write, a small summary for progress)."""

    def after_flush(self, items: list[dict[str, Any]]) -> None:
        """Called with the items whose rows were just written (e.g. drop their checkpoints)."""

    async def close(self) -> None: ...


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
        if len(self.rows) >= self.flush_rows or time.monotonic() - self.last >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.run.write_part(self.kind, self.rows)
            self.parts_written += 1
        if self.on_flush and self.items:
            self.on_flush(self.items)
        self.rows, self.items = [], []
        self.last = time.monotonic()


class _WorkerCore:
    """The part of a worker that is the same in a Ray actor and in-process."""

    def __init__(self, job: Job, run_dir: str, execution: ExecutionConfig):
        self.job = job
        self.execution = execution
        self.run = RunFolder(run_dir)
        self.sink = PartSink(self.run, job.kind, execution.flush_rows, execution.flush_seconds, on_flush=job.after_flush)
        self.sem = asyncio.Semaphore(execution.concurrency)
        self._setup_task: asyncio.Task | None = None

    async def ensure_setup(self) -> None:
        if self._setup_task is None:
            self._setup_task = asyncio.ensure_future(self.job.setup())
        await self._setup_task

    async def run_one(self, item: dict[str, Any]) -> dict[str, Any]:
        async with self.sem:
            rows, summary = await self.job.run(item)
        self.sink.add(rows, item)
        return summary

    async def run_chunk(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await self.ensure_setup()
        return list(await asyncio.gather(*(self.run_one(it) for it in items)))

    async def flush(self) -> int:
        self.sink.flush()
        return self.sink.parts_written


def _actor_class():
    import ray

    @ray.remote
    class PoolWorker:
        def __init__(self, job: Job, run_dir: str, execution: ExecutionConfig):
            self.core = _WorkerCore(job, run_dir, execution)

        async def setup(self) -> str:
            await self.core.ensure_setup()
            return f"{os.uname().nodename}:{os.getpid()}"

        async def run_chunk(self, items):
            return await self.core.run_chunk(items)

        async def flush(self) -> int:
            return await self.core.flush()

        async def close(self) -> None:
            await self.core.flush()
            await self.core.job.close()

    return PoolWorker


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    tokens: int = 0
    calls: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, summary: dict[str, Any]) -> None:
        self.done += 1
        self.failed += 0 if summary.get("ok", True) else 1
        self.tokens += int(summary.get("tokens", 0))
        self.calls += int(summary.get("calls", 0))

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def as_dict(self) -> dict[str, Any]:
        el = max(self.elapsed, 1e-9)
        return {"items": self.done, "failed": self.failed, "tokens": self.tokens, "model_calls": self.calls,
                "elapsed_s": round(el, 3), "items_per_s": self.done / el, "tokens_per_s": self.tokens / el,
                "calls_per_s": self.calls / el}


def chunked(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def ensure_ray(execution: ExecutionConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": True,
                              "runtime_env": {"env_vars": dict(execution.env)}}
    if execution.ray_address:
        ray.init(address=execution.ray_address, **kwargs)
    else:
        ray.init(include_dashboard=False, **kwargs)


def run_pool(job: Job, items: Iterable[dict[str, Any]], run_dir: str, execution: ExecutionConfig,
             on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None) -> PoolStats:
    """Run `job` over `items`, writing rows into `run_dir`. Returns counters."""
    stats = PoolStats()

    def note(summary: dict[str, Any]) -> None:
        stats.add(summary)
        if on_summary:
            on_summary(summary, stats)

    if execution.executor == "local":
        asyncio.run(_run_local(job, items, run_dir, execution, note))
        return stats
    _run_ray(job, items, run_dir, execution, note)
    return stats


async def _run_local(job, items, run_dir, execution, note) -> None:
    core = _WorkerCore(job, run_dir, execution)
    await core.ensure_setup()
    pending: set[asyncio.Task] = set()
    limit = execution.concurrency * 2
    try:
        for item in items:
            while len(pending) >= limit:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    note(t.result())
            pending.add(asyncio.ensure_future(core.run_one(item)))
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                note(t.result())
    finally:
        for t in pending:
            t.cancel()
        await core.flush()
        await job.close()


def _run_ray(job, items, run_dir, execution: ExecutionConfig, note) -> None:
    import ray

    ensure_ray(execution)
    Worker = _actor_class()
    opts = dict(num_cpus=execution.num_cpus_per_worker, num_gpus=execution.num_gpus_per_worker,
                max_restarts=2, max_task_retries=2, max_concurrency=max(64, execution.concurrency * 4),
                runtime_env={"env_vars": dict(execution.env)})
    workers = [Worker.options(**opts).remote(job, run_dir, execution) for _ in range(execution.workers)]
    try:
        setups = [w.setup.remote() for w in workers]
        ready, not_ready = ray.wait(setups, num_returns=len(setups), timeout=execution.worker_start_timeout_s)
        if not_ready:
            raise TimeoutError(
                f"{len(not_ready)} of {len(workers)} workers did not set up within "
                f"{execution.worker_start_timeout_s:g} s (engines not starting? see the Ray logs)"
            )
        ray.get(ready)  # surface setup errors (bad model name, missing weights) as exceptions here
        chunks = chunked(items, execution.chunk_size)
        per_worker = max(2, -(-execution.concurrency // execution.chunk_size) + 1)
        in_flight: dict[Any, int] = {}
        load = [0] * len(workers)
        exhausted = False

        def submit(w: int) -> bool:
            chunk = next(chunks, None)
            if chunk is None:
                return False
            ref = workers[w].run_chunk.remote(chunk)
            in_flight[ref] = w
            load[w] += 1
            return True

        for w in range(len(workers)):
            for _ in range(per_worker):
                if not submit(w):
                    exhausted = True
                    break
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                w = in_flight.pop(ref)
                load[w] -= 1
                for summary in ray.get(ref):
                    note(summary)
                if not exhausted and not submit(w):
                    exhausted = True
    finally:
        flushes = [w.close.remote() for w in workers]
        try:
            ray.get(flushes, timeout=120)
        except Exception as e:  # noqa: BLE001 - a dead worker has nothing left to flush
            log.warning("closing workers: %s", e)
        for w in workers:
            ray.kill(w)
