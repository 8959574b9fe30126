"""The pool's Ray side: starting Ray, placing the worker actors, and sending them chunks.

Items are pulled lazily from an iterator and sent in chunks (one Ray call per chunk), with at most
a few chunks in flight per worker: backpressure, and flat driver memory for any item count. A
worker that dies (its process, or its whole node) has its chunks re-sent to the live workers, and
Ray restarts it where there is room (a chunk carries the job, so a new actor can take it up).
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
from esc_eval.sim.pool.stats import PoolStats, add_live, chunked, LIVE, LIVE_PROGRESS_S, SETUP

log = logging.getLogger("esc_eval.pool")


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
        ray.init(include_dashboard=False, **kwargs)


class WorkersLostError(RuntimeError):
    """Every worker of the pool was lost (dead, or on a lost node with no room to restart) for too long."""


# Re-sending a chunk whose worker was lost: at most this many times per chunk (a chunk that kills
# every worker it reaches is a bug to report, not to retry forever).
MAX_CHUNK_RESENDS = 3


def run_on_ray(workers, job_id, job, items, run_dir, execution: ExecutionConfig, note, stats: PoolStats,
               labels: list[str], sent: Callable[[list[dict[str, Any]], int], None] | None = None) -> set[int]:
    """Run the job's items on the workers. Returns the indices of workers lost on the way.

    labels: filled with each worker's "node:pid" and how it reaches the run folder; sent(chunk, w)
    is told which worker each chunk went to (last one wins for a re-sent chunk).

    A worker that dies (its process, its engine's host, its node) fails the chunks it holds with a
    RayActorError. Those chunks are re-sent, with their items' checkpoints, to the live workers
    (Ray's own task retries are off: they would wait for the lost actor to be restarted, forever
    when its node is gone and no other node has room for it). A lost worker is probed; when Ray has
    restarted it (elsewhere) it takes chunks again."""
    import ray
    from ray.exceptions import ActorDiedError, RayActorError, RayTaskError

    ways = ray.get([w.start_job.remote(job_id, job, run_dir, execution) for w in workers])
    spec = ray.put((job, run_dir, execution))  # once in the object store, not once per chunk
    # The workers set up: their engines start now, before any item is sent.
    setups = [w.setup.remote(job_id) for w in workers]
    ready, not_ready = ray.wait(setups, num_returns=len(setups), timeout=execution.worker_start_timeout_s)
    if not_ready:
        raise TimeoutError(
            f"{len(not_ready)} of {len(workers)} workers did not set up their models within "
            f"{execution.worker_start_timeout_s:g} s (engine not starting? see the Ray logs)"
        )
    # Setup errors (a model that cannot start: its engine's cause; a bad model name) surface here.
    reports = _get_all(setups, RayTaskError)
    labels[:] = [f"{r['where']} ({way})" for r, way in zip(reports, ways)]
    stats.workers = reports
    note(SETUP)
    for i, (label, r) in enumerate(zip(labels, reports)):
        log.info("worker %d: %s; %s", i, label, r["concurrency"]["reason"])
    chunks = chunked(items, execution.chunk_size)
    # Each worker holds at most its `concurrency` running items plus one chunk queued behind them, so
    # it never idles between chunks; a new chunk goes to the least-loaded worker. Items sent beyond a
    # worker's concurrency wait there for a whole dialogue, so the fill must be balanced.
    caps = [max(r["concurrency"]["value"] + execution.chunk_size, 2 * execution.chunk_size) for r in reports]
    load = [0] * len(workers)
    in_flight: dict[Any, tuple[int, list[dict[str, Any]], int]] = {}  # ref -> (worker, chunk, resends)
    resend: list[tuple[list[dict[str, Any]], int]] = []  # chunks of lost workers, sent first
    probes: dict[Any, int] = {}  # ref of a lost worker's readiness probe -> worker
    lost: set[int] = set()  # lost, not back (yet)
    dead: set[int] = set()  # lost for good (Ray gave up restarting it)
    exhausted = False
    stopping: RunStopError | None = None  # the run stopped: nothing new is sent, what runs finishes
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
        while live and stopping is None:
            w = min(live, key=lambda i: load[i] / caps[i])
            if load[w] + execution.chunk_size > caps[w] and load[w] > 0:
                return
            nxt = next_chunk()
            if nxt is None:
                return
            chunk, resends = nxt
            ref = workers[w].run_chunk.remote(job_id, chunk, spec, resends > 0)
            in_flight[ref] = (w, chunk, resends)
            if sent is not None:
                sent(chunk, w)
            load[w] += len(chunk)

    def lose(w: int, why: BaseException) -> None:
        if w in lost:
            return
        lost.add(w)
        log.warning("worker %d lost (%s); its chunks go to the other workers", w, str(why).splitlines()[0][:200])
        probes[workers[w].__ray_ready__.remote()] = w  # resolves once Ray has restarted it

    try:
        fill()
        while in_flight or (stopping is None and (resend or not exhausted)):
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
                except RayTaskError as e:
                    if not isinstance(e.cause, RunStopError):
                        raise
                    if stopping is None:  # the first: every worker stops starting items
                        stopping = e.cause
                        log.warning("stopping the job: %s", stopping)
                        for x in range(len(workers)):
                            if x not in lost:
                                workers[x].stop_job.remote(job_id, str(stopping))
                    continue
                except RayActorError as e:
                    if stopping is not None:
                        continue  # its items have checkpoints; a resume runs them
                    if resends >= MAX_CHUNK_RESENDS:
                        raise WorkersLostError(
                            f"a chunk of {len(chunk)} items lost its worker {resends + 1} times (last: {e}); "
                            f"the run folder is resumable") from e
                    lose(w, e)
                    resend.append((chunk, resends + 1))
                    continue
                for summary in summaries:
                    note(summary)
            if stopping is None and len(lost) == len(workers) and (in_flight or resend or not exhausted):
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
    if stopping is not None:
        raise stopping  # after every worker flushed what finished
    return lost


def _get_all(refs: list[Any], task_error: type) -> list[Any]:
    """ray.get of every ref (so none is left as an unhandled error), then the first failure raised:
    a RunStopError as itself (one line, the engine's cause), anything else as Ray raised it."""
    import ray

    out, errors = [], []
    for ref in refs:
        try:
            out.append(ray.get(ref))
        except task_error as e:  # noqa: PERF203 - one per worker
            errors.append(e.cause if isinstance(e.cause, RunStopError) else e)
    if errors:
        raise next((e for e in errors if isinstance(e, RunStopError)), errors[0])
    return out


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
