"""The batch layer: a pool of Ray actors (or the current process) running a Job over work items.

The pool owns concurrency, checkpoints and retries of whole items; a Job owns what one item is.
- Items are pulled lazily from an iterator and sent in chunks (one Ray call per chunk), with at
  most a few chunks in flight per worker: backpressure, and flat driver memory for any item count.
- Each worker runs up to `concurrency` items at once and streams result rows into atomic Parquet
  parts (a buffered sink flushed every `flush_rows` rows or `flush_seconds`).
- A worker that dies (its process, or its whole node) has its chunks re-sent to the live workers,
  and Ray restarts it where there is room (a chunk carries the job, so a new actor can take it
  up); items of a re-sent chunk resume from their turn checkpoints. Rows of the chunk that were
  flushed before the death are written again: readers keep one row per key and the finished job
  compacts its parts to exactly one row per key (sim/runfolder.py).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from esc_eval.serve.cpu import DTYPE_ENV
from esc_eval.sim.config import ExecutionConfig
from esc_eval.sim.participants import ModelPool
from esc_eval.sim.runfolder import RunFolder

log = logging.getLogger("esc_eval.pool")


class Job(Protocol):
    """What a worker runs. Must pickle before setup() (it travels to the actors)."""

    kind: str  # run-folder part kind the rows go to: "dialogues" | "scores"

    async def setup(self, models: ModelPool) -> None:
        """Build what the job needs; `models` outlives the job (engines are shared and reused)."""

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Process one item; return (rows to write, a small summary for progress)."""

    def after_flush(self, items: list[dict[str, Any]]) -> None:
        """Called with the items whose rows were just written (e.g. drop their checkpoints)."""

    # Optional:
    # def rerun(self, items) -> None: items re-sent here after the worker running them was lost
    #     (e.g. read the checkpoints that worker left).
    # def finish(self) -> None: the job ended on this worker, after its last flush (close files).


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
            self.run.write_part(self.kind, self.rows)
            self.parts_written += 1
        if self.on_flush and self.items:
            self.on_flush(self.items)
        self.rows, self.items = [], []
        self.last = time.monotonic()


class _WorkerCore:
    """One job's state inside a worker (the same in a Ray actor and in-process)."""

    def __init__(self, job: Job, run_dir: str, execution: ExecutionConfig, models: ModelPool):
        self.job = job
        self.execution = execution
        self.models = models
        self.run = RunFolder(run_dir)
        self.sink = PartSink(self.run, job.kind, execution.flush_rows, execution.flush_seconds, on_flush=job.after_flush)
        self.sem = asyncio.Semaphore(execution.concurrency)
        self.tally_at_start = models.tally.snapshot()
        self._setup_task: asyncio.Future | None = None
        self._timer: asyncio.Future | None = None

    async def ensure_setup(self) -> None:
        if self._setup_task is None:
            self._setup_task = asyncio.ensure_future(self.job.setup(self.models))
            period = min(1.0, self.execution.flush_seconds / 2)
            self._timer = asyncio.ensure_future(self.sink.flush_every(period))
        await self._setup_task

    async def run_one(self, item: dict[str, Any]) -> dict[str, Any]:
        async with self.sem:
            rows, summary = await self.job.run(item)
        self.sink.add(rows, item)
        return summary

    async def run_chunk(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        await self.ensure_setup()
        return list(await asyncio.gather(*(self.run_one(it) for it in items)))

    async def finish(self) -> int:
        if self._timer is not None:
            self._timer.cancel()
        self.sink.flush()
        if hasattr(self.job, "finish"):
            self.job.finish()
        return self.sink.parts_written


class _Worker:
    """A worker: engines that outlive jobs (ModelPool) plus the state of each job it runs."""

    def __init__(self) -> None:
        self.models = ModelPool()
        self.jobs: dict[str, _WorkerCore] = {}

    def start_job(self, job_id: str, job: Job, run_dir: str, execution: ExecutionConfig) -> None:
        if job_id not in self.jobs:
            self.jobs[job_id] = _WorkerCore(job, run_dir, execution, self.models)

    async def setup(self, job_id: str) -> str:
        await self.jobs[job_id].ensure_setup()
        return f"{os.uname().nodename}:{os.getpid()}"

    async def run_chunk(self, job_id: str, items: list[dict[str, Any]],
                        spec: tuple[Job, str, ExecutionConfig] | None = None, rerun: bool = False) -> list[dict[str, Any]]:
        if job_id not in self.jobs and spec is not None:
            # A restarted actor (the old one died) re-running this chunk: it has no job state yet.
            self.start_job(job_id, *spec)
        core = self.jobs[job_id]
        if rerun and hasattr(core.job, "rerun"):
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


def _actor_class():
    import ray

    @ray.remote
    class PoolWorker:
        def __init__(self):
            self.w = _Worker()

        def start_job(self, job_id, job, run_dir, execution):
            self.w.start_job(job_id, job, run_dir, execution)

        async def setup(self, job_id):
            return await self.w.setup(job_id)

        async def run_chunk(self, job_id, items, spec=None, rerun=False):
            return await self.w.run_chunk(job_id, items, spec, rerun)

        async def finish_job(self, job_id):
            return await self.w.finish_job(job_id)

        async def progress(self, job_id):
            return self.w.progress(job_id)

        async def close(self):
            await self.w.close()

    return PoolWorker


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    tokens: int = 0
    calls: int = 0
    started: float = field(default_factory=time.monotonic)
    # Model calls and tokens answered so far in the job, items in flight included (polled from the
    # workers every few seconds): progress between two finished items, which can be minutes apart.
    live_calls: int = 0
    live_tokens: int = 0
    calls_per_item: float | None = None  # model calls one item makes (the job's `calls_per_item`), for an ETA

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


# How often the driver asks the workers for live progress (calls and tokens of items in flight).
LIVE_PROGRESS_S = float(os.environ.get("ESC_EVAL_LIVE_PROGRESS_S") or 5.0)
LIVE = {"live": True}  # the summary passed to on_summary for a live update (no item finished)


def add_live(stats: PoolStats, kind: str, parts: Iterable[dict[str, int]]) -> None:
    """Sum the workers' progress into `stats` (completion tokens for dialogues, prompt tokens for
    scores: the tokens the finished items' summaries count)."""
    parts = list(parts)
    stats.live_calls = sum(p["calls"] for p in parts)
    key = "completion_tokens" if kind == "dialogues" else "prompt_tokens"
    stats.live_tokens = sum(p[key] for p in parts)


def chunked(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def worker_env(execution: ExecutionConfig, index: int) -> dict[str, str]:
    """Environment of worker `index`: the configured env, plus its core binding under cpu_bind=per_worker
    (vLLM-CPU pins every engine to the first core by default; the front-ends mostly wait)."""
    env = dict(execution.env)
    if execution.dtype != "auto":  # read by the vLLM backend when a model's options leave dtype at auto
        env.setdefault(DTYPE_ENV, execution.dtype)
    if execution.cpu_bind == "per_worker":
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", str(index % (os.cpu_count() or 1)))
    return env


class PlacementError(RuntimeError):
    """The cluster has no room for the workers (one line: what they need, what the cluster has)."""


def describe_resources(need: dict[str, float]) -> str:
    import ray

    total, free = ray.cluster_resources(), ray.available_resources()
    parts = [f"need {v:g} {k} in total, the cluster has {total.get(k, 0):g} ({free.get(k, 0):g} free)"
             for k, v in need.items() if v]
    return "; ".join(parts) + " (other jobs, e.g. a Serve app, may hold the rest)"


def check_placeable(need: dict[str, float], workers: int) -> None:
    """Fail at once when the cluster could never hold the workers, whatever is freed later."""
    import ray

    total = ray.cluster_resources()
    if any(v > total.get(k, 0) + 1e-9 for k, v in need.items() if v):
        raise PlacementError(f"{workers} workers can never be placed: {describe_resources(need)}; "
                             f"lower execution.workers or num_cpus_per_worker")


def ensure_ray(execution: ExecutionConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    from esc_eval.serve.ray_cluster import forget_stale_address, prepare_auth

    prepare_auth(execution.ray_address)  # Ray's token auth stays on; tests opt out via RAY_AUTH_MODE
    if not execution.ray_address:
        forget_stale_address()  # a dead cluster's address file would be retried for minutes
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": execution.log_to_driver,
                              "runtime_env": {"env_vars": dict(execution.env)}}
    if execution.ray_address:
        ray.init(address=execution.ray_address, **kwargs)
    else:
        # Ray starts workers at nice 15 (to keep its raylet responsive); here the workers hold the
        # CPU engines, the job's whole workload, and at 15 any other process on a laptop or a shared
        # box starves them. A local cluster we start gives them the ordinary priority.
        os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(include_dashboard=False, **kwargs)


class WorkerPool:
    """Worker actors that outlive one job, so engines started for simulation serve the scoring.

    with WorkerPool(execution) as pool:
        pool.run(sim_job, items, run_dir)
        pool.run(score_job, items, run_dir)
    """

    def __init__(self, execution: ExecutionConfig):
        self.execution = execution
        self.workers: list[Any] = []
        self._local: _Worker | None = None
        self._jobs = itertools.count()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _ensure_workers(self) -> None:
        if self.workers:
            return
        ex = self.execution
        ensure_ray(ex)
        Worker = _actor_class()
        # Ray restarts a dead worker (its node permitting); the pool, not Ray, re-sends its chunks (_run_ray).
        opts = dict(num_cpus=ex.num_cpus_per_worker, num_gpus=ex.num_gpus_per_worker, max_restarts=2,
                    max_task_retries=0, max_concurrency=max(64, ex.concurrency * 4))
        need = {"CPU": ex.num_cpus_per_worker * ex.workers, "GPU": ex.num_gpus_per_worker * ex.workers}
        check_placeable(need, ex.workers)
        workers = [Worker.options(**opts, runtime_env={"env_vars": worker_env(ex, i)}).remote()
                   for i in range(ex.workers)]
        # An actor is ready once placed and constructed (cheap: engines start later, in setup), so
        # waiting on that separates "no room on the cluster" from a slow engine start.
        import ray

        ready, pending = ray.wait([w.__ray_ready__.remote() for w in workers], num_returns=len(workers),
                                  timeout=ex.placement_timeout_s)
        if pending:
            for w in workers:
                ray.kill(w)
            raise PlacementError(
                f"{len(pending)} of {ex.workers} workers could not be placed within {ex.placement_timeout_s:g} s: "
                f"{describe_resources(need)}")
        self.workers = workers

    def run(self, job: Job, items: Iterable[dict[str, Any]], run_dir: str,
            on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
            execution: ExecutionConfig | None = None) -> PoolStats:
        """Run `job` over `items`, writing rows into `run_dir`. Returns counters."""
        ex = execution or self.execution
        stats = PoolStats(calls_per_item=getattr(job, "calls_per_item", None))

        def note(summary: dict[str, Any]) -> None:
            if summary is not LIVE:  # LIVE: nothing finished, only the live counters in `stats` moved
                stats.add(summary)
            if on_summary:
                on_summary(summary, stats)

        job_id = f"job-{next(self._jobs)}-{os.getpid()}"
        if ex.executor == "local":
            if ex.dtype != "auto":  # the local worker is this process: its engines read our env
                os.environ[DTYPE_ENV] = ex.dtype
            if self._local is None:
                self._local = _Worker()
            asyncio.run(_run_local(self._local, job_id, job, items, run_dir, ex, note, stats))
        else:
            self._ensure_workers()
            lost = _run_ray(self.workers, job_id, job, items, run_dir, ex, note, stats)
            self._drop_workers(lost)
        # Every worker has flushed: one row per key from here on, whatever was re-run on the way.
        before, after = RunFolder(run_dir).compact(job.kind)
        if before != after:
            log.info("compacted %s: %d rows -> %d (re-run items kept once)", job.kind, before, after)
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
        if self.workers:
            import ray

            try:
                ray.get([w.close.remote() for w in self.workers], timeout=120)
            except Exception as e:  # noqa: BLE001 - a dead worker has nothing left to close
                log.warning("closing workers: %s", e)
            for w in self.workers:
                ray.kill(w)
            self.workers = []


def run_pool(job: Job, items: Iterable[dict[str, Any]], run_dir: str, execution: ExecutionConfig,
             on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
             pool: WorkerPool | None = None) -> PoolStats:
    """Run one job on `pool`, or on a pool made for it and closed after."""
    if pool is not None:
        return pool.run(job, items, run_dir, on_summary, execution)
    with WorkerPool(execution) as own:
        return own.run(job, items, run_dir, on_summary)


async def _run_local(worker: _Worker, job_id, job, items, run_dir, execution, note, stats: PoolStats) -> None:
    worker.start_job(job_id, job, run_dir, execution)
    await worker.setup(job_id)
    core = worker.jobs[job_id]
    pending: set[asyncio.Future] = set()
    limit = execution.concurrency * 2
    last_live = time.monotonic()

    async def drain(until: int) -> None:
        nonlocal pending, last_live
        while len(pending) > until:
            done, pending = await asyncio.wait(pending, timeout=LIVE_PROGRESS_S, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                note(t.result())
            if time.monotonic() - last_live >= LIVE_PROGRESS_S:
                last_live = time.monotonic()
                add_live(stats, job.kind, [worker.progress(job_id)])
                note(LIVE)

    try:
        for item in items:
            await drain(limit - 1)
            pending.add(asyncio.ensure_future(core.run_one(item)))
        await drain(0)
    finally:
        for t in pending:
            t.cancel()
        await worker.finish_job(job_id)


class WorkersLostError(RuntimeError):
    """Every worker of the pool was lost (dead, or on a lost node with no room to restart) for too long."""


# Re-sending a chunk whose worker was lost: at most this many times per chunk (a chunk that kills
# every worker it reaches is a bug to report, not to retry forever).
MAX_CHUNK_RESENDS = 3


def _run_ray(workers, job_id, job, items, run_dir, execution: ExecutionConfig, note,
             stats: PoolStats) -> set[int]:
    """Run the job's items on the workers. Returns the indices of workers lost on the way.

    A worker that dies (its process, its engine's host, its node) fails the chunks it holds with a
    RayActorError. Those chunks are re-sent, with their items' checkpoints, to the live workers
    (Ray's own task retries are off: they would wait for the lost actor to be restarted, forever
    when its node is gone and no other node has room for it). A lost worker is probed; when Ray has
    restarted it (elsewhere) it takes chunks again."""
    import ray
    from ray.exceptions import ActorDiedError, RayActorError

    ray.get([w.start_job.remote(job_id, job, run_dir, execution) for w in workers])
    spec = ray.put((job, run_dir, execution))  # once in the object store, not once per chunk
    setups = [w.setup.remote(job_id) for w in workers]
    ready, not_ready = ray.wait(setups, num_returns=len(setups), timeout=execution.worker_start_timeout_s)
    if not_ready:
        raise TimeoutError(
            f"{len(not_ready)} of {len(workers)} workers did not set up their models within "
            f"{execution.worker_start_timeout_s:g} s (engine not starting? see the Ray logs)"
        )
    ray.get(ready)  # surface setup errors (bad model name, missing weights) here
    chunks = chunked(items, execution.chunk_size)
    # Each worker holds at most `concurrency` running items plus one chunk queued behind them, so it
    # never idles between chunks; a new chunk goes to the least-loaded worker. Items sent beyond a
    # worker's concurrency wait there for a whole dialogue, so the fill must be balanced.
    cap = max(execution.concurrency + execution.chunk_size, 2 * execution.chunk_size)
    load = [0] * len(workers)
    in_flight: dict[Any, tuple[int, list[dict[str, Any]], int]] = {}  # ref -> (worker, chunk, resends)
    resend: list[tuple[list[dict[str, Any]], int]] = []  # chunks of lost workers, sent first
    probes: dict[Any, int] = {}  # ref of a lost worker's readiness probe -> worker
    lost: set[int] = set()  # lost, not back (yet)
    dead: set[int] = set()  # lost for good (Ray gave up restarting it)
    exhausted = False
    all_lost_since: float | None = None
    polls: dict[int, Any] = {}  # worker -> its pending live-progress call (one at a time)
    live_parts: dict[int, dict[str, int]] = {}  # worker -> its last answer
    last_poll = time.monotonic()

    def next_chunk() -> tuple[list[dict[str, Any]], int] | None:
        nonlocal exhausted
        if resend:
            return resend.pop(0)
        chunk = None if exhausted else next(chunks, None)
        if chunk is None:
            exhausted = True
            return None
        return chunk, 0

    def fill() -> None:
        live = [w for w in range(len(workers)) if w not in lost]
        while live:
            w = min(live, key=load.__getitem__)
            if load[w] + execution.chunk_size > cap and load[w] > 0:
                return
            nxt = next_chunk()
            if nxt is None:
                return
            chunk, resends = nxt
            ref = workers[w].run_chunk.remote(job_id, chunk, spec, resends > 0)
            in_flight[ref] = (w, chunk, resends)
            load[w] += len(chunk)

    def lose(w: int, why: BaseException) -> None:
        if w in lost:
            return
        lost.add(w)
        log.warning("worker %d lost (%s); its chunks go to the other workers", w, str(why).splitlines()[0][:200])
        probes[workers[w].__ray_ready__.remote()] = w  # resolves once Ray has restarted it

    try:
        fill()
        while in_flight or resend or not exhausted:
            refs = [*in_flight, *probes]
            ready = ray.wait(refs, num_returns=1, timeout=1.0)[0] if refs else time.sleep(1.0) or []
            for ref in ready:
                if ref in probes:
                    w = probes.pop(ref)
                    try:
                        ray.get(ref)
                        lost.discard(w)  # restarted (its job state rebuilds from the chunk's spec)
                        log.warning("worker %d is back", w)
                    except ActorDiedError:
                        dead.add(w)  # restarts used up, or its node is gone for good
                    except RayActorError:
                        probes[workers[w].__ray_ready__.remote()] = w  # unavailable for now: ask again
                    continue
                w, chunk, resends = in_flight.pop(ref)
                load[w] -= len(chunk)
                try:
                    summaries = ray.get(ref)
                except RayActorError as e:
                    if resends >= MAX_CHUNK_RESENDS:
                        raise WorkersLostError(
                            f"a chunk of {len(chunk)} items lost its worker {resends + 1} times (last: {e}); "
                            f"the run folder is resumable") from e
                    lose(w, e)
                    resend.append((chunk, resends + 1))
                    continue
                for summary in summaries:
                    note(summary)
            if len(lost) == len(workers) and (in_flight or resend or not exhausted):
                all_lost_since = all_lost_since or time.monotonic()
                if len(dead) == len(workers) or time.monotonic() - all_lost_since > execution.worker_start_timeout_s:
                    raise WorkersLostError(
                        f"all {len(workers)} workers were lost and none came back within "
                        f"{execution.worker_start_timeout_s:g} s (nodes gone? no room to restart them); "
                        f"the run folder is resumable")
            else:
                all_lost_since = None
            fill()
            # Live progress, polled per worker: one that is lost or restarting does not hold up the others.
            if polls:
                answered = set(ray.wait(list(polls.values()), num_returns=len(polls), timeout=0)[0])
                for w in [w for w, ref in polls.items() if ref in answered]:
                    try:
                        live_parts[w] = ray.get(polls.pop(w))
                    except RayActorError:
                        pass
                if answered:
                    add_live(stats, job.kind, live_parts.values())
                    note(LIVE)
            if time.monotonic() - last_poll >= LIVE_PROGRESS_S:
                last_poll = time.monotonic()
                for w in range(len(workers)):
                    if w not in lost and w not in polls:
                        polls[w] = workers[w].progress.remote(job_id)
    finally:
        live = [workers[w] for w in range(len(workers)) if w not in lost]
        try:
            ray.get([w.finish_job.remote(job_id) for w in live], timeout=120)
        except Exception as e:  # noqa: BLE001 - a dead worker has nothing left to flush
            log.warning("flushing workers: %s", e)
    return lost
