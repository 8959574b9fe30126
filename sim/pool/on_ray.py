"""The pool's Ray side: starting Ray, placing the worker actors, and sending them chunks.

Items are pulled lazily from an iterator and sent in chunks (one Ray call per chunk), with at most
a few chunks in flight per worker: backpressure, and flat driver memory for any item count. A
worker that dies (its process, or its whole node) has its chunks re-sent to the live workers, and
Ray restarts it where there is room (a chunk carries the job, so a new actor can take it up).
`ChunkScheduler` holds one job's run, a method a step; `run_on_ray` runs one.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.devices.cpu import DTYPE_ENV
from esc_eval.sim.pool.capacity import MAX_AUTO_CONCURRENCY, worker_cpus
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.ray_start import start_local_ray
from esc_eval.sim.pool.stats import PoolStats, add_live, chunked, LIVE, LIVE_PROGRESS_S, SETUP

log = logging.getLogger("esc_eval.pool")


def worker_env(execution: ExecutionConfig, index: int) -> dict[str, str]:
    """Environment of worker `index`: the configured env, plus its core binding under cpu_bind=per_worker
    or all (vLLM-CPU pins every engine to the first core by default; the front-ends mostly wait)."""
    env = dict(execution.env)
    if execution.dtype != "auto":  # read by the vLLM backend when a model's options leave dtype at auto
        env.setdefault(DTYPE_ENV, execution.dtype)
    if execution.cpu_bind == "per_worker":
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", str(index % (os.cpu_count() or 1)))
    elif execution.cpu_bind == "all":
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", core_ranges(_driver_cores()))
    return env


def _driver_cores() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def core_ranges(cores: set[int]) -> str:
    """Cores as vLLM's binding writes them: {0, 1, 2, 5} -> "0-2,5"."""
    import itertools

    runs = [[c for _, c in g] for _, g in itertools.groupby(enumerate(sorted(cores)), lambda ic: ic[1] - ic[0])]
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


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
    from esc_eval.serve.app.ray_cluster import forget_stale_address, prepare_auth

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
        start_local_ray(include_dashboard=False, **kwargs)


class WorkersLostError(RuntimeError):
    """Every worker of the pool was lost (dead, or on a lost node with no room to restart) for too long."""


# Re-sending a chunk whose worker was lost: at most this many times per chunk (a chunk that kills
# every worker it reaches is a bug to report, not to retry forever).
MAX_CHUNK_RESENDS = 3


Chunk = list[dict[str, Any]]


class ChunkScheduler:
    """One job's run on the pool's workers, one method a step: `start` (the workers take the job and
    set up their engines), `fill` (hand out chunks, least-loaded worker first), `chunk_done` (a chunk's
    summaries, or its worker lost, or the run stopping), `probe_answered` (a lost worker back or gone),
    `check_all_lost`, `poll_live` (live progress), `finish` (every live worker flushes).

    The state is the run's: what each worker holds, the chunks to re-send, the lost and dead workers.
    `ray_api` is the ray module (a stand-in in the unit tests)."""

    def __init__(self, workers: list[Any], job_id: str, job: Any, execution: ExecutionConfig, note: Callable,
                 stats: PoolStats, sent: Callable[[Chunk, int], None] | None = None, ray_api: Any = None):
        if ray_api is None:
            import ray as ray_api
        self.ray = ray_api
        self.workers, self.job_id, self.job, self.execution = workers, job_id, job, execution
        self.note, self.stats, self.sent = note, stats, sent
        self.spec: Any = None  # (job, run folder, execution), once in the object store
        self.chunks: Any = iter(())
        self.caps: list[int] = []
        self.load = [0] * len(workers)
        self.in_flight: dict[Any, tuple[int, Chunk, int]] = {}  # ref -> (worker, chunk, resends)
        self.resend: list[tuple[Chunk, int]] = []  # chunks of lost workers, sent first
        self.probes: dict[Any, int] = {}  # ref of a lost worker's readiness probe -> worker
        self.lost: set[int] = set()  # lost, not back (yet)
        self.dead: set[int] = set()  # lost for good (Ray gave up restarting it)
        self.exhausted = False
        self.stopping: RunStopError | None = None  # the run stopped: nothing new is sent, what runs finishes
        self.all_lost_since: float | None = None
        self.polls: dict[int, Any] = {}  # worker -> its pending live-progress call (one at a time)
        self.live_parts: dict[int, dict[str, int]] = {}  # worker -> its last answer
        self.last_poll = time.monotonic()

    def start(self, items, run_dir, labels: list[str]) -> None:
        """The workers take the job and set up (their engines start now, before any item is sent)."""
        ray, ex, workers = self.ray, self.execution, self.workers
        ways = ray.get([w.start_job.remote(self.job_id, self.job, run_dir, ex) for w in workers])
        self.spec = ray.put((self.job, run_dir, ex))  # once in the object store, not once per chunk
        setups = [w.setup.remote(self.job_id) for w in workers]
        ready, not_ready = ray.wait(setups, num_returns=len(setups), timeout=ex.worker_start_timeout_s)
        if not_ready:
            raise TimeoutError(
                f"{len(not_ready)} of {len(workers)} workers did not set up their models within "
                f"{ex.worker_start_timeout_s:g} s (engine not starting? see the Ray logs)"
            )
        reports = self.setup_reports(setups)
        labels[:] = [f"{r['where']} ({way})" if r else f"lost in setup ({way})" for r, way in zip(reports, ways)]
        self.stats.workers = [r for r in reports if r]
        self.note(SETUP)
        for i, (label, r) in enumerate(zip(labels, reports)):
            log.info("worker %d: %s; %s", i, label, r["concurrency"]["reason"] if r else "set up again when back")
        self.chunks = chunked(items, ex.chunk_size)
        # Each worker holds at most its `concurrency` running items plus one chunk queued behind them, so
        # it never idles between chunks; a new chunk goes to the least-loaded worker. Items sent beyond a
        # worker's concurrency wait there for a whole dialogue, so the fill must be balanced. A worker lost
        # in setup is given the others' concurrency (its own is known once it is back).
        known = [r["concurrency"]["value"] for r in reports if r]
        fallback = max(known) if known else (ex.concurrency or ex.chunk_size)
        self.caps = [max((r["concurrency"]["value"] if r else fallback) + ex.chunk_size, 2 * ex.chunk_size)
                     for r in reports]

    def setup_reports(self, setups: list[Any]) -> list[dict[str, Any] | None]:
        """Each worker's setup report; None for a worker lost while it set up (killed for memory while
        its engines started, its node gone): it is probed like a worker lost mid-run, and once Ray has
        restarted it its first chunk sets it up again from the job's spec, while the others go on (all
        lost: check_all_lost waits for one, up to the start timeout). Setup errors (a model that cannot
        start: its engine's cause; a bad model name) are raised: a restart would meet them again."""
        from ray.exceptions import RayActorError, RayTaskError

        reports: list[dict[str, Any] | None] = []
        errors: list[BaseException] = []
        for w, ref in enumerate(setups):
            try:
                reports.append(self.ray.get(ref))
            except RayTaskError as e:  # noqa: PERF203 - one per worker
                reports.append(None)
                errors.append(e.cause if isinstance(e.cause, RunStopError) else e)
            except RayActorError as e:
                reports.append(None)
                self.lose(w, e)
        if errors:
            raise next((e for e in errors if isinstance(e, RunStopError)), errors[0])
        return reports
        self.last_poll = time.monotonic()  # live progress is first asked for LIVE_PROGRESS_S after setup

    def running(self) -> bool:
        return bool(self.in_flight) or (self.stopping is None and (bool(self.resend) or not self.exhausted))

    def next_chunk(self) -> tuple[Chunk, int] | None:
        """A lost worker's chunk first, else the next fresh one (with how often it was re-sent)."""
        if self.resend:
            return self.resend.pop(0)
        chunk = None if self.exhausted else next(self.chunks, None)
        if chunk is None:
            self.exhausted = True
            return None
        return chunk, 0

    def fill(self) -> None:
        """Send chunks to the least-loaded live workers until each is full or nothing is left."""
        size = self.execution.chunk_size
        live = [w for w in range(len(self.workers)) if w not in self.lost]
        while live and self.stopping is None:
            w = min(live, key=lambda i: self.load[i] / self.caps[i])
            if self.load[w] + size > self.caps[w] and self.load[w] > 0:
                return
            nxt = self.next_chunk()
            if nxt is None:
                return
            chunk, resends = nxt
            ref = self.workers[w].run_chunk.remote(self.job_id, chunk, self.spec, resends > 0)
            self.in_flight[ref] = (w, chunk, resends)
            if self.sent is not None:
                self.sent(chunk, w)
            self.load[w] += len(chunk)

    def lose(self, w: int, why: BaseException) -> None:
        """Take worker w out of the fill and probe it: the probe resolves once Ray has restarted it."""
        if w in self.lost:
            return
        self.lost.add(w)
        log.warning("worker %d lost (%s); its chunks go to the other workers", w, str(why).splitlines()[0][:200])
        self.probes[self.workers[w].__ray_ready__.remote()] = w

    def probe_answered(self, ref: Any) -> None:
        from ray.exceptions import ActorDiedError, RayActorError

        w = self.probes.pop(ref)
        try:
            self.ray.get(ref)
            self.lost.discard(w)  # restarted (its job state rebuilds from the chunk's spec)
            log.warning("worker %d is back", w)
        except ActorDiedError:
            self.dead.add(w)  # restarts used up, or its node is gone for good
        except RayActorError:
            self.probes[self.workers[w].__ray_ready__.remote()] = w  # unavailable for now: ask again

    def stop(self, cause: RunStopError) -> None:
        """The first stop of the run: every live worker stops starting items (what runs finishes)."""
        self.stopping = cause
        log.warning("stopping the job: %s", cause)
        for x in range(len(self.workers)):
            if x not in self.lost:
                self.workers[x].stop_job.remote(self.job_id, str(cause))

    def chunk_done(self, ref: Any) -> None:
        """A chunk answered: its summaries noted; or the run stopping; or its worker lost (the chunk is
        re-sent, at most MAX_CHUNK_RESENDS times)."""
        from ray.exceptions import RayActorError, RayTaskError

        w, chunk, resends = self.in_flight.pop(ref)
        self.load[w] -= len(chunk)
        try:
            summaries = self.ray.get(ref)
        except RayTaskError as e:
            if not isinstance(e.cause, RunStopError):
                raise
            if self.stopping is None:
                self.stop(e.cause)
            return
        except RayActorError as e:
            if self.stopping is not None:
                return  # its items have checkpoints; a resume runs them
            if resends >= MAX_CHUNK_RESENDS:
                raise WorkersLostError(
                    f"a chunk of {len(chunk)} items lost its worker {resends + 1} times (last: {e}); "
                    f"the run folder is resumable") from e
            self.lose(w, e)
            self.resend.append((chunk, resends + 1))
            return
        for summary in summaries:
            self.note(summary)

    def check_all_lost(self) -> None:
        """Every worker lost while work is left: wait for one to come back, up to the start timeout."""
        n, timeout = len(self.workers), self.execution.worker_start_timeout_s
        if self.stopping is None and len(self.lost) == n and (self.in_flight or self.resend or not self.exhausted):
            self.all_lost_since = self.all_lost_since or time.monotonic()
            if len(self.dead) == n or time.monotonic() - self.all_lost_since > timeout:
                raise WorkersLostError(
                    f"all {n} workers were lost and none came back within {timeout:g} s "
                    f"(nodes gone? no room to restart them); the run folder is resumable")
        else:
            self.all_lost_since = None

    def poll_live(self) -> None:
        """Live progress, polled per worker: one that is lost or restarting does not hold up the others."""
        from ray.exceptions import RayActorError

        if self.polls:
            answered = set(self.ray.wait(list(self.polls.values()), num_returns=len(self.polls), timeout=0)[0])
            for w in [w for w, ref in self.polls.items() if ref in answered]:
                try:
                    self.live_parts[w] = self.ray.get(self.polls.pop(w))
                except RayActorError:
                    pass
            if answered:
                add_live(self.stats, self.job.kind, self.live_parts.values())
                self.note(LIVE)
        if time.monotonic() - self.last_poll >= LIVE_PROGRESS_S:
            self.last_poll = time.monotonic()
            for w in range(len(self.workers)):
                if w not in self.lost and w not in self.polls:
                    self.polls[w] = self.workers[w].progress.remote(self.job_id)

    def step(self) -> None:
        """One round: what answered within a second, the all-lost check, a refill, live progress."""
        refs = [*self.in_flight, *self.probes]
        ready = self.ray.wait(refs, num_returns=1, timeout=1.0)[0] if refs else time.sleep(1.0) or []
        for ref in ready:
            if ref in self.probes:
                self.probe_answered(ref)
            else:
                self.chunk_done(ref)
        self.check_all_lost()
        self.fill()
        self.poll_live()

    def finish(self) -> None:
        """Every live worker flushes what it finished (a lost one has nothing left to flush)."""
        live = [self.workers[w] for w in range(len(self.workers)) if w not in self.lost]
        try:
            self.ray.get([w.finish_job.remote(self.job_id) for w in live], timeout=120)
        except Exception as e:  # noqa: BLE001 - a dead worker has nothing left to flush
            log.warning("flushing workers: %s", e)

    def run(self, items, run_dir, labels: list[str]) -> set[int]:
        self.start(items, run_dir, labels)
        try:
            self.fill()
            while self.running():
                self.step()
        finally:
            self.finish()
        if self.stopping is not None:
            raise self.stopping  # after every worker flushed what finished
        return self.lost


def run_on_ray(workers, job_id, job, items, run_dir, execution: ExecutionConfig, note, stats: PoolStats,
               labels: list[str], sent: Callable[[Chunk, int], None] | None = None) -> set[int]:
    """Run the job's items on the workers (a ChunkScheduler). Returns the indices of workers lost on the way.

    labels: filled with each worker's "node:pid" and how it reaches the run folder; sent(chunk, w)
    is told which worker each chunk went to (last one wins for a re-sent chunk).

    A worker that dies (its process, its engine's host, its node) fails the chunks it holds with a
    RayActorError. Those chunks are re-sent, with their items' checkpoints, to the live workers
    (Ray's own task retries are off: they would wait for the lost actor to be restarted, forever
    when its node is gone and no other node has room for it). A lost worker is probed; when Ray has
    restarted it (elsewhere) it takes chunks again."""
    return ChunkScheduler(workers, job_id, job, execution, note, stats, sent).run(items, run_dir, labels)


def start_workers(ex: ExecutionConfig) -> list[Any]:
    """The pool's worker actors, placed (or a PlacementError saying what is missing)."""
    import ray

    from esc_eval.sim.pool.worker import actor_class

    ensure_ray(ex)
    Worker = actor_class()
    cpus = worker_cpus(ex.num_cpus_per_worker, ex.num_gpus_per_worker, ray.cluster_resources().get("CPU"), ex.workers)
    # Ray restarts a dead worker (its node permitting); the pool, not Ray, re-sends its chunks (run_on_ray).
    # max_concurrency bounds the chunk calls a worker holds: enough for the most items a worker may take.
    opts = dict(num_cpus=cpus, num_gpus=ex.num_gpus_per_worker, max_restarts=2, max_task_retries=0,
                max_concurrency=max(64, (ex.concurrency or MAX_AUTO_CONCURRENCY) * 4))
    need = {"CPU": cpus * ex.workers, "GPU": ex.num_gpus_per_worker * ex.workers}
    check_placeable(need, ex.workers)
    workers = [Worker.options(**opts, runtime_env={"env_vars": worker_env(ex, i)}).remote()
               for i in range(ex.workers)]
    # An actor is ready once placed and constructed (cheap: engines start later, in setup), so
    # waiting on that separates "no room on the cluster" from a slow engine start.
    ready, pending = ray.wait([w.__ray_ready__.remote() for w in workers], num_returns=len(workers),
                              timeout=ex.placement_timeout_s)
    if pending:
        for w in workers:
            ray.kill(w)
        raise PlacementError(
            f"{len(pending)} of {ex.workers} workers could not be placed within {ex.placement_timeout_s:g} s: "
            f"{describe_resources(need)}")
    return workers
