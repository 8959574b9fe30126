"""pool: the batch layer, which knows nothing of dialogues: a pool of Ray actors (or this process)
running a job's items with concurrency, checkpoints and retries (pool.py; the worker side worker.py,
the Ray side on_ray.py: ChunkScheduler, counters stats.py), the models a worker builds and shares (participants.py)
with the job's call settings (calls.py: cache, limits, spend cap), how much is in flight
(capacity.py), where the models run (placement.py), how a job ended (outcome.py), progress
(progress.py), and its config (config.py: ExecutionConfig); what it runs: job.py (Job).

Layer: machinery above runs/ (the run folder it writes); imports serve: nothing of cards, dialogue,
judging or jobs (a job is what it runs: job.py `Job`, every hook declared with a default)."""
from esc_eval.sim.pool.calls import CallSettings, ModelCalls, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import (Concurrency, Demand, choose_concurrency, estimate_tokens, items_in_flight,
                                        serve_capacity_fields, serve_worker_shares, size_serve_replicas, worker_cpus)
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.ray_start import start_local_ray
from esc_eval.sim.pool.env import temporary_env
from esc_eval.sim.pool.job import Job, check_job
from esc_eval.sim.pool.on_ray import (ChunkScheduler, PlacementError, WorkersLostError, check_placeable,
                                      describe_resources, ensure_ray, worker_env)
from esc_eval.sim.pool.outcome import EXIT_BUDGET, EXIT_FAILURES, JobOutcome, outcome_line, run_stopped
from esc_eval.sim.pool.participants import ModelPool, TargetEngines
from esc_eval.sim.pool.placement import cluster_hardware, make_plan, placed, plan_messages
from esc_eval.sim.pool.pool import MissingRowsError, WorkerPool, run_pool
from esc_eval.sim.pool.progress import console, job_progress, progress_line
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.pool.worker import Worker, WorkerCore

__all__ = [
    "start_local_ray",
    "CallSettings", "ChunkScheduler", "Concurrency", "Demand", "EXIT_BUDGET", "EXIT_FAILURES", "ExecutionConfig", "Job", "JobOutcome",
    "MissingRowsError", "ModelCalls", "ModelPool", "PlacementError", "PlannedModel", "PoolStats", "TargetEngines", "Worker",
    "WorkerCore", "WorkerPool", "WorkersLostError", "check_calls", "check_placeable", "choose_concurrency",
    "check_job", "cluster_hardware", "console", "describe_resources", "ensure_ray", "estimate_tokens", "items_in_flight",
    "job_progress", "make_plan", "outcome_line", "placed", "plan_messages", "prepare_calls", "progress_line", "run_pool",
    "run_stopped", "serve_capacity_fields", "serve_worker_shares", "size_serve_replicas", "temporary_env", "worker_cpus",
    "worker_env",
]
