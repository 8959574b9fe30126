"""How a batch job runs (`ExecutionConfig`): the Ray actor pool's shape, retries, checkpoints, the
call cache and limits, where the run's models are placed."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from esc_eval.serve.calls.retry import CALL_TIMEOUT_S, INITIAL_WAIT_S, MAX_ATTEMPTS, MAX_WAIT_S
from esc_eval.serve.config import ConfigModel
from esc_eval.serve.devices.cpu import DEFAULT_DTYPE, KV_CACHE_ENV, cpu_kv_cache_gib
from esc_eval.serve.plan.model import POOL_WORKERS
from esc_eval.serve.plan.planner import PlacementConfig

DEFAULT_EXECUTOR = "ray"  # a pool of Ray actors, as production runs; 'local' is for debugging and tests
# Workers write the run folder directly where they can see it, else through the driver's node (checked per job).
DEFAULT_WORKER_WRITES = "auto"


class ExecutionConfig(ConfigModel):
    """How a batch job runs: Ray actor pool shape, retries, checkpoints."""

    executor: Literal["ray", "local"] = Field(DEFAULT_EXECUTOR, description="'ray': a pool of Ray actors; 'local': the same job in this process (debugging, tests).")
    ray_address: str | None = Field(None, description="Join an existing Ray cluster at this address; default starts a local one.")
    workers: int = Field(POOL_WORKERS, ge=1, description="Number of worker actors (each holds its own engines).")
    concurrency: int | None = Field(
        None, ge=1, description="Dialogues (or dialogues to score) in flight per worker; None = auto: with GPU engines "
        "in the worker, what their KV cache holds at the run's expected sequence length (capped by max_num_seqs; "
        "sim/pool/capacity.py), else the CPU defaults as measured (simulation 32, scoring 8). The manifest says what was "
        "chosen and why.")
    chunk_size: int = Field(8, ge=1, description="Work items sent to a worker per Ray call (amortises call overhead).")
    num_cpus_per_worker: float | None = Field(
        None, ge=0, description="Ray CPUs reserved per worker actor; None = auto: 1 (as measured on CPUs), 8 for "
        "workers holding GPUs (their engine loops; within the cluster's CPUs per worker).")
    num_gpus_per_worker: float = Field(0.0, ge=0, description="Ray GPUs reserved per worker actor (GPU clusters).")
    max_attempts: int = Field(MAX_ATTEMPTS, ge=1, description="Attempts per model call before the item is recorded as failed.")
    retry_initial_wait_s: float = Field(INITIAL_WAIT_S, ge=0, description="First backoff wait between attempts (exponential, jittered).")
    retry_max_wait_s: float = Field(MAX_WAIT_S, ge=0, description="Longest backoff wait between attempts.")
    call_timeout_s: float = Field(CALL_TIMEOUT_S, gt=0, description="Timeout of one model call; a timeout counts as a failed attempt.")
    flush_rows: int = Field(512, ge=1, description="Write a Parquet part when this many rows are buffered (real models "
                            "mostly flush on flush_seconds; a crash loses no finished dialogue: its turn checkpoints stay "
                            "until its row is written).")
    flush_seconds: float = Field(10.0, gt=0, description="... or when this many seconds passed since the last part.")
    turn_checkpoints: bool = Field(True, description="Checkpoint every turn so a resumed run continues half-finished dialogues.")
    retry_failed: bool = Field(True, description="On resume, run again the items recorded as failed.")
    worker_start_timeout_s: float = Field(900.0, gt=0, description="Give up if a worker has not set up its models in this time.")
    placement_timeout_s: float = Field(20.0, gt=0, description="Fail (saying what is needed and what the cluster has) if the worker actors cannot be placed on the cluster in this time.")
    log_to_driver: bool = Field(True, description="Show worker logs (engines, retries) on the driver's console.")
    env: dict[str, str] = Field(default_factory=lambda: {KV_CACHE_ENV: str(cpu_kv_cache_gib())}, description=(
        "Environment of the worker actors (Ray runtime_env env_vars). Default: VLLM_CPU_KVCACHE_SPACE (GiB of KV cache "
        "per CPU engine) as the driver has it, else 2."))
    cpu_bind: Literal["auto", "per_worker", "all"] = Field(
        "auto", description="vLLM-CPU thread binding of the workers' engines: 'auto' = vLLM's default (every engine on "
        "the first core); 'per_worker' = worker i's engine on core i (mod the cores): several CPU engines on one "
        "machine use all its cores; 'all' = each worker's engine on every core the driver may use, one thread per "
        "core (one worker per machine: latency-bound work such as a few dialogues, where one engine on both cores "
        "of a 2-core CPU started sooner and decoded faster than two on one core each). Ignored by GPU engines.")
    worker_writes: Literal["auto", "direct", "via_driver"] = Field(
        DEFAULT_WORKER_WRITES, description="How Ray workers reach a run folder on the driver's disk (a local path; URIs such as "
        "s3:// are written by every worker directly): 'auto' = directly when the worker sees the folder (same node, "
        "or a file system shared by every node: checked with a marker file per job), else through a writer actor on "
        "the driver's node; 'direct' = require a shared file system (a worker that cannot see the folder fails); "
        "'via_driver' = always through the driver's node.")
    budget_usd: float | None = Field(
        None, gt=0, description="Spend cap of this job (one simulate or score command) on priced API models, in US dollars: "
        "a call that could pass it (its prompt estimate plus max_tokens at the model's price) is not made; the job stops "
        "feeding work, writes what finished and exits non-zero, resumable (a re-run spends up to the cap again).")
    call_cache: Literal["auto", "on", "off"] = Field(
        "auto", description="Cache deterministic calls (temperature 0 or a fixed seed), keyed by model, adapter, messages "
        "and every parameter: 'auto' = for API models (openai/, litellm/), 'on' = every model, 'off' = none.")
    cache_dir: str | None = Field(
        None, description="Where the call cache lives: a folder or a URI pyarrow reads (s3://...) that every worker can "
        "reach; None = the run folder's `cache/`. Point two runs at one folder to share answers.")
    max_failure_rate: float = Field(
        0.5, ge=0, le=1, description="The command exits non-zero (one line saying why; the rows stay for a resume) when "
        "more than this share of the job's items failed (dialogues: failed rows; scores: judge calls that failed, not "
        "answers that did not parse), or "
        "every one did.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        DEFAULT_DTYPE, description="Model dtype of the workers' in-process vLLM engines: 'auto' = bfloat16 on GPUs and on CPUs "
        "with AVX512-BF16 or AMX, float32 on other CPUs (bf16 is emulated there, 4-6x slower); a model's "
        "`options: {dtype: ...}` overrides it.")

    placement: PlacementConfig = Field(
        default_factory=PlacementConfig, description="Where the run's self-hosted models run: engines in the workers "
        "(the default on CPU) or Ray Serve deployments with their own GPUs and autoscaling (the default when the run "
        "has GPUs); planned before any engine starts (serve/plan/planner.py, `esc-eval plan`).")

    def retry_policy(self):
        """The one retry policy (serve/calls/retry.py) with this job's attempts, backoff and timeout."""
        from esc_eval.serve.calls.retry import RetryPolicy

        return RetryPolicy(max_attempts=self.max_attempts, initial_wait_s=self.retry_initial_wait_s,
                           max_wait_s=self.retry_max_wait_s, timeout_s=self.call_timeout_s)
