"""The batch layer: a pool of Ray actors (or the current process) running a Job over work items.

The pool owns concurrency, checkpoints and retries of whole items; a Job owns what one item is.
- Items are pulled lazily and sent in chunks with backpressure (sim/pool/on_ray.py); each worker runs
  up to `concurrency` items at once and streams rows into atomic Parquet parts (sim/pool/worker.py).
- Where the rows go: the run folder is a local path or a storage URI (sim/runs/storage.py). Workers
  write an object store directly. A local folder is written directly by the workers that see it
  (same node as the driver, or a file system every node shares: checked with a marker file the
  driver writes for the job); a worker on another node sends its parts and turn checkpoints to a
  writer actor on the driver's node (sim/runs/storage_server.py), so nothing stays on a disk nobody reads.
- A worker that dies (its process, or its whole node) has its chunks re-sent to the live workers;
  items of a re-sent chunk resume from their turn checkpoints. Rows of the chunk that were flushed
  before the death are written again: readers keep one row per key and the finished job compacts
  its parts to exactly one row per key (sim/runs/runfolder.py).
- The end of a job is checked against the run folder itself: every item sent must have its rows
  there, else MissingRowsError names how many are missing and which workers ran them.
- Each worker sets the job up before any item is sent: its engines start then (a model that
  cannot start fails the setup with the engine's own cause) and report what they hold, which
  sizes the worker's items in flight on GPUs (sim/pool/capacity.py; PoolStats.workers says how).
- A failure of the run (serve.chat.interface.RunStopError: an engine dead for good, a later target's engine
  that cannot start) is not an item's: the pool stops sending items, the workers start no new one,
  what runs finishes and is flushed, and the error is raised as itself; checkpoints stay to resume.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
import uuid
from typing import Any, Callable, Iterable, Iterator

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.devices.cpu import DTYPE_ENV
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.env import temporary_env
from esc_eval.sim.pool.on_ray import ensure_ray, run_on_ray, start_workers
from esc_eval.sim.pool.stats import LIVE, LIVE_PROGRESS_S, SETUP, PoolStats, add_live

GONE_WAIT_S = 60.0  # how long close() waits for its killed actors to be dead
from esc_eval.sim.pool.job import Job, check_job
from esc_eval.sim.pool.worker import Worker
from esc_eval.sim.runs.open import StorageSpec
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import is_uri

log = logging.getLogger("esc_eval.pool")


class MissingRowsError(RuntimeError):
    """A job ended without some of its items' rows in the run folder (one line: how many, whose)."""


class _Ledger:
    """Which worker each item's row keys were last sent to, to check the run folder at the end."""

    def __init__(self, job: Job):
        self.job = job
        self.owner: dict[Any, int] = {}

    def sent(self, chunk: list[dict[str, Any]], worker: int) -> None:
        for item in chunk:
            for key in self.job.item_keys(item) or ():  # None: the job's rows are not checked
                self.owner[key] = worker

    def track(self, items: Iterable[dict[str, Any]], worker: int) -> Iterator[dict[str, Any]]:
        for item in items:
            self.sent([item], worker)
            yield item

    def check(self, job: Job, run: RunFolder, labels: list[str]) -> int:
        """Raise MissingRowsError unless every key sent is in the folder; returns how many were checked."""
        if not self.owner:
            return 0
        present = job.present_keys(run)
        missing = [k for k in self.owner if k not in present]
        if missing:
            by_worker: dict[int, list[Any]] = {}
            for k in missing:
                by_worker.setdefault(self.owner[k], []).append(k)
            whose = "; ".join(f"{len(ks)} sent to worker {w} on {labels[w] if w < len(labels) else '?'} (e.g. {ks[0]})"
                              for w, ks in sorted(by_worker.items()))
            raise MissingRowsError(f"{len(missing)} of {len(self.owner)} {job.kind} rows are not in {run}: {whose}; "
                                   f"nothing was lost for good: run the same command again to redo them")
        return len(self.owner)


class WorkerPool:
    """Worker actors that outlive one job, so engines started for simulation serve the scoring.

    with WorkerPool(execution) as pool:
        pool.run(sim_job, items, run_dir)
        pool.run(score_job, items, run_dir)
    """

    def __init__(self, execution: ExecutionConfig):
        self.execution = execution
        self.workers: list[Any] = []
        self._local: Worker | None = None
        self._jobs = itertools.count()
        # The writer actor on this node for workers that cannot see a local run folder: one for every
        # job and folder of the pool, started beside the workers (a process start costs a core-second).
        self._writer: Any = None

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _ensure_workers(self, writer: bool = False) -> None:
        """The workers, and with `writer` the writer actor (it boots while they do, not during a job)."""
        if writer and self._writer is None:
            from esc_eval.sim.runs.storage_server import start_server

            ensure_ray(self.execution)
            self._writer = start_server()
        if not self.workers:
            self.workers = start_workers(self.execution)

    def _storage_spec(self, run: RunFolder, ex: ExecutionConfig) -> tuple[StorageSpec, str | None]:
        """How the Ray workers reach the run folder, and the marker file written for this job."""
        if is_uri(run.location):
            return StorageSpec(run.location), None  # every node opens the store itself
        marker = f".esc-eval-job-{uuid.uuid4().hex}"
        run.storage.write(marker, b"", durable=False)
        server = self._writer if ex.worker_writes != "direct" else None
        return StorageSpec(str(run.path.resolve()), marker, server, ex.worker_writes), marker

    def run(self, job: Job, items: Iterable[dict[str, Any]], run_dir: str,
            on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
            execution: ExecutionConfig | None = None) -> PoolStats:
        """Run `job` over `items`, writing rows into `run_dir`. Returns counters."""
        ex = execution or self.execution
        check_job(job)
        stats = PoolStats(calls_per_item=job.calls_per_item)
        run = RunFolder(run_dir)
        ledger = _Ledger(job)

        def note(summary: dict[str, Any]) -> None:
            if not summary.get("live"):  # LIVE, SETUP: nothing finished, only `stats` moved
                stats.add(summary)
            if on_summary:
                on_summary(summary, stats)

        job_id = f"job-{next(self._jobs)}-{os.getpid()}"
        if ex.executor == "local":
            if self._local is None:
                self._local = Worker()
            labels = [f"{os.uname().nodename}:{os.getpid()} (this process)"]
            # The local worker is this process: its engines read the dtype from our env while the job
            # starts them; the caller's env is restored after (a library call must not leak it).
            with temporary_env(DTYPE_ENV, ex.dtype) if ex.dtype != "auto" else contextlib.nullcontext():
                asyncio.run(_run_local(self._local, job_id, job, ledger.track(items, 0), run.location, ex, note, stats))
        else:
            self._ensure_workers(writer=not is_uri(run.location) and ex.worker_writes != "direct")
            spec, marker = self._storage_spec(run, ex)
            labels: list[str] = []
            try:
                lost = run_on_ray(self.workers, job_id, job, items, spec, ex, note, stats, labels, ledger.sent)
            finally:
                if marker:
                    run.storage.delete(marker)
            self._drop_workers(lost)
        # Every worker has flushed: one row per key from here on, whatever was re-run on the way.
        before, after = run.compact(job.kind)
        if before != after:
            log.info("compacted %s: %d rows -> %d (re-run items kept once)", job.kind, before, after)
        stats.rows_checked = ledger.check(job, run, labels)
        return stats

    def _drop_workers(self, lost: set[int]) -> None:
        """Forget workers lost in a job (a lost node's actor may wait forever for room to restart):
        the next job runs on the others, or on new ones if none is left."""
        if not lost:
            return
        import ray

        for i in lost:
            ray.kill(self.workers[i], no_restart=True)
        self.workers = [w for i, w in enumerate(self.workers) if i not in lost]

    def close(self) -> None:
        if self._local is not None:
            asyncio.run(self._local.close())
            self._local = None
        if self.workers or self._writer is not None:
            import ray

            try:
                ray.get([w.close.remote() for w in self.workers], timeout=120)
            except Exception as e:  # noqa: BLE001 - a dead worker has nothing left to close
                log.warning("closing workers: %s", e)
            actors = [*self.workers, *([self._writer] if self._writer is not None else [])]
            for w in actors:
                ray.kill(w)
            wait_gone(actors)
            self.workers, self._writer = [], None


def wait_gone(actors: list[Any], timeout_s: float = GONE_WAIT_S) -> list[Any]:
    """Wait until Ray has every killed actor dead, so the resources they held are back for the next
    job (ray.kill only asks: on a busy 2-core machine a bench's next pool found one of the last one's
    workers still holding its CPU 20 s later, and could not be placed). Returns those still not gone
    after timeout_s (the caller goes on: a placement that finds no room says so itself)."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    deadline = time.monotonic() + timeout_s
    left = []
    for a in actors:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                left.append(a)
                break
            try:  # a call on a killed actor fails once Ray has it dead; until then it may still answer
                ray.get(a.__ray_ready__.remote(), timeout=min(remaining, 5.0))
            except RayActorError:
                break
            except GetTimeoutError:
                continue
            time.sleep(0.05)
    if left:
        log.warning("%d killed worker actor(s) not gone after %.0f s", len(left), timeout_s)
    return left


def run_pool(job: Job, items: Iterable[dict[str, Any]], run_dir: str, execution: ExecutionConfig,
             on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
             pool: WorkerPool | None = None) -> PoolStats:
    """Run one job on `pool`, or on a pool made for it and closed after."""
    if pool is not None:
        return pool.run(job, items, run_dir, on_summary, execution)
    with WorkerPool(execution) as own:
        return own.run(job, items, run_dir, on_summary)


async def _run_local(worker: Worker, job_id, job, items, run_dir, execution, note, stats: PoolStats) -> None:
    worker.start_job(job_id, job, run_dir, execution)
    # The job's engines start now, before any item (a model that cannot start raises RunStopError).
    stats.workers = [await asyncio.wait_for(worker.setup(job_id), execution.worker_start_timeout_s)]
    note(SETUP)
    log.info("worker 0: this process; %s", stats.workers[0]["concurrency"]["reason"])
    core = worker.jobs[job_id]
    pending: set[asyncio.Future] = set()
    limit = core.concurrency.value * 2
    last_live = time.monotonic()
    stopping: list[RunStopError] = []  # the run stopped: no new item, what runs finishes

    async def drain(until: int) -> None:
        nonlocal pending, last_live
        while len(pending) > until:
            done, pending = await asyncio.wait(pending, timeout=LIVE_PROGRESS_S, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                try:
                    note(t.result())
                except RunStopError as e:
                    if not stopping:
                        log.warning("stopping the job: %s", e)
                    stopping.append(e)
            if time.monotonic() - last_live >= LIVE_PROGRESS_S:
                last_live = time.monotonic()
                add_live(stats, job.kind, [worker.progress(job_id)])
                note(LIVE)

    try:
        for item in items:
            await drain(limit - 1)
            if stopping:
                break
            pending.add(asyncio.ensure_future(core.run_one(item)))
        await drain(0)
    finally:
        for t in pending:
            t.cancel()
        await worker.finish_job(job_id)
    if stopping:
        raise stopping[0]  # after the rows of what finished were flushed
