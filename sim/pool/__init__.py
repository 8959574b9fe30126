"""pool: the batch layer, which knows nothing of dialogues: a pool of Ray actors (or this process)
running a job's items with concurrency, checkpoints and retries (pool.py; the worker side worker.py,
the Ray side on_ray.py: ChunkScheduler, counters stats.py), the models a worker builds and shares
(participants.py), how much is in flight (capacity.py), and its config (config.py: ExecutionConfig);
what it runs: job.py (Job).

Layer: machinery above runs/ (the run folder it writes); imports serve: nothing of cards, dialogue,
judging or jobs (a job is what it runs: job.py `Job`, every hook declared with a default). What the
driver does around it (calls, placement, progress, outcome) is sim/driver/."""
from esc_eval.sim.pool.capacity import (Concurrency, Demand, choose_concurrency, estimate_tokens, items_in_flight,
                                        serve_capacity_fields, serve_worker_shares, size_serve_replicas, worker_cpus)
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.env import temporary_env
from esc_eval.sim.pool.job import Job, check_job
from esc_eval.sim.pool.on_ray import (ChunkScheduler, PlacementError, WorkersLostError, check_placeable,
                                      describe_resources, ensure_ray, worker_env)
from esc_eval.sim.pool.participants import ModelPool, TargetEngines
from esc_eval.sim.pool.pool import MissingRowsError, WorkerPool, run_pool
from esc_eval.sim.pool.ray_start import start_local_ray
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.pool.worker import Worker, WorkerCore

__all__ = [
    "ChunkScheduler", "Concurrency", "Demand", "ExecutionConfig", "Job", "MissingRowsError", "ModelPool",
    "PlacementError", "PoolStats", "TargetEngines", "Worker", "WorkerCore", "WorkerPool", "WorkersLostError",
    "check_job", "check_placeable", "choose_concurrency", "describe_resources", "ensure_ray", "estimate_tokens",
    "items_in_flight", "run_pool", "serve_capacity_fields", "serve_worker_shares", "size_serve_replicas",
    "start_local_ray", "temporary_env", "worker_cpus", "worker_env",
]
