"""A run's models placed before it starts, and the plan followed (serve/plan.py decides).

    with placed_simulation(cfg, run_dir) as cfg:    # what `esc-eval simulate` does
        run_simulation(cfg, run_dir)

- in_process (the CPU default): the workers build their engines as configured; on GPUs each engine
  gets the plan's share of its worker's GPUs (ESC_EVAL_PLACEMENT in the workers' environment).
- serve (the default when the run has GPUs): the run's vLLM models are deployed as one Ray Serve
  app, a deployment per model with its own GPUs and autoscaling; the pool's workers become CPU
  actors (num_gpus_per_worker 0) whose models are `serve/<model>` handles, sticky per dialogue
  (the dialogue id is the session id). The app is deleted when the run ends, failed or not, unless
  `placement.keep_serving`.
The models' configured names and options never change, so dialogue ids, fingerprints and resume
work the same wherever a model ran; the manifest records the plan (`placement`).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from esc_eval.serve.cpu import resolve_dtype
from esc_eval.serve.model_size import model_facts
from esc_eval.serve.plan import GPU_MEMORY_GB, PLACEMENT_ENV, Hardware, ModelUse, Plan, hardware_for, plan_run
from esc_eval.serve.registry import default_registry
from esc_eval.sim.bench.env import temporary_env
from esc_eval.sim.capacity import size_serve_replicas
from esc_eval.sim.config import ExecutionConfig, ScoringConfig, SimulationConfig

log = logging.getLogger("esc_eval.placement")
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the driver sees (Linux)


def model_uses(sim: SimulationConfig | None = None, scoring: ScoringConfig | None = None) -> list[ModelUse]:
    """The models a simulation and/or scoring config names, with what each is used for."""
    out: list[ModelUse] = []
    if sim is not None:
        out.append(ModelUse(sim.role.model, dict(sim.role.options), "role"))
        out += [ModelUse(t.model, dict(t.options), "target") for t in sim.targets]
    if scoring is not None:
        ref = scoring.judge.model
        out.append(ModelUse(ref.model, dict(ref.options), "judge", "scoring"))
    return out


def self_hosted(uses: list[ModelUse]) -> bool:
    """Whether any model runs in a vLLM engine (something to place); False as well when a model is
    unknown: the job's own checks report that, as they always have."""
    reg = default_registry()
    facts = [model_facts(u.model, reg) for u in uses]
    return not any(f.error for f in facts) and any(f.backend == "vllm" for f in facts)


def local_gpus() -> tuple[int, str | None]:
    """(count, Ray accelerator type) of the GPUs this machine's NVIDIA driver sees (no torch, no CUDA
    context); the type from the driver's model name, e.g. "NVIDIA A10G" -> A10G."""
    try:
        folders = sorted(p for p in NVIDIA_PROC.iterdir() if p.is_dir())
    except OSError:
        return 0, None
    model = ""
    for folder in folders[:1]:
        with contextlib.suppress(OSError):
            for line in (folder / "information").read_text(errors="replace").splitlines():
                if line.lower().startswith("model:"):
                    model = line.split(":", 1)[1].strip()
    # the longest name first: "L40S" before "L4"
    kind = next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True) if k.lower() in model.lower()), None)
    return len(folders), kind


def _joins_a_cluster(execution: ExecutionConfig) -> bool:
    """Whether the run joins a running Ray cluster (an address, or one started on this machine)."""
    if execution.ray_address or os.environ.get("RAY_ADDRESS"):
        return True
    from esc_eval.serve.ray_cluster import StaleRayAddressError, live_local_address

    try:
        return live_local_address() is not None
    except (StaleRayAddressError, ImportError):
        return False


def cluster_hardware(execution: ExecutionConfig) -> Hardware:
    """The run's GPUs: the config's `placement.gpus` when given, else those of the Ray cluster the
    run uses (joined or started here), or of this machine for the local executor."""
    p = execution.placement
    accelerator = p.accelerator_type
    if p.gpus is not None:
        gpus = p.gpus
    elif p.mode == "in_process" and not execution.num_gpus_per_worker:
        gpus = 0  # engines on the workers' CPUs, as configured
    elif execution.executor == "local" or not _joins_a_cluster(execution):
        gpus, kind = local_gpus()  # the run starts its own Ray here: this machine's GPUs (Ray not started yet)
        accelerator = accelerator or kind
    else:
        import ray

        from esc_eval.sim.pool_ray import ensure_ray

        ensure_ray(execution)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if accelerator is None:
            accelerator = next((k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), None)
    return hardware_for(gpus, p.gpu_memory_gb, p.gpus_per_node, accelerator)


def make_plan(execution: ExecutionConfig, uses: list[ModelUse], hardware: Hardware) -> Plan:
    """The plan for `uses` under `execution` on `hardware` (pure, given the hardware)."""
    kv = float(execution.env.get("VLLM_CPU_KVCACHE_SPACE") or os.environ.get("VLLM_CPU_KVCACHE_SPACE") or 2)
    return plan_run(uses, hardware, execution.placement, workers=execution.workers,
                    gpus_per_worker=execution.num_gpus_per_worker, cpu_kv_cache_gib=kv,
                    cpu_dtype=resolve_dtype(execution.dtype, gpu=False))


def _serve_running() -> bool:
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        return True
    except ValueError:
        return False


@contextlib.contextmanager
def _deployed(plan: Plan, execution: ExecutionConfig, say: Callable[[str], None]) -> Iterator[None]:
    """The plan's Serve app, up for the block and deleted after (unless keep_serving)."""
    from ray import serve

    from esc_eval.serve.deploy import deploy_app
    from esc_eval.serve.serve_app import ServeConfig, ServeModelConfig
    from esc_eval.sim.pool_ray import ensure_ray

    placement = execution.placement
    ensure_ray(execution)
    if not _serve_running():
        serve.start(proxy_location="Disabled")  # the workers call deployment handles: no HTTP needed
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # Serve's deploy chatter, unless --verbose
    cfg = ServeConfig(app_name=plan.app_name, route_prefix=f"/{plan.app_name}", kv_cache_gib=plan.kv_cache_gib,
                      env_vars=dict(placement.replica_env), health_timeout_s=placement.health_timeout_s,
                      models=[ServeModelConfig(**m) for m in plan.serve_models()])
    say(f"deploying {', '.join(m.name for m in cfg.models)} as Serve app {cfg.app_name!r} "
        f"({plan.hardware.describe()})")
    t0 = time.monotonic()
    try:
        deploy_app(cfg, placement.health_timeout_s)
        say(f"Serve app {cfg.app_name!r} healthy in {time.monotonic() - t0:.0f} s")
        yield
    finally:
        if placement.keep_serving:
            say(f"Serve app {cfg.app_name!r} left running (placement.keep_serving); `esc-eval serve down "
                f"--app-name {cfg.app_name}` removes it")
        else:
            try:
                serve.delete(cfg.app_name)  # its replicas and their GPUs; Serve's controller stays for others
                say(f"Serve app {cfg.app_name!r} deleted")
            except Exception as e:  # noqa: BLE001 - the run's result stands; say what is left behind
                log.warning("could not delete Serve app %r: %s", cfg.app_name, e)


@contextlib.contextmanager
def placed(execution: ExecutionConfig, uses: list[ModelUse], *, run_dir: str | None = None,
           say: Callable[[str], None] = log.info,
           seq_tokens: Callable[[], dict[str, int]] = dict) -> Iterator[tuple[ExecutionConfig, Plan | None]]:
    """The execution to run with, once the plan for `uses` is made (a refusal raises PlanError, one
    line, before any engine starts) and followed; the plan is recorded in `run_dir`'s manifest."""
    if not self_hosted(uses):
        yield execution, None
        return
    plan = make_plan(execution, uses, cluster_hardware(execution)).check()
    size_serve_replicas(plan, seq_tokens, execution.placement)  # GPU replicas: what their KV cache holds
    mapping = plan.placement_map()
    env = {**execution.env, PLACEMENT_ENV: json.dumps(mapping, sort_keys=True)} if mapping else dict(execution.env)
    update: dict[str, Any] = {"env": env}
    if plan.mode == "serve":
        update["num_gpus_per_worker"] = 0.0  # the workers only call the deployments
    ex = execution.model_copy(update=update)
    with temporary_env(PLACEMENT_ENV, env.get(PLACEMENT_ENV)):  # the local executor's worker is this process
        with _deployed(plan, ex, say) if plan.mode == "serve" else contextlib.nullcontext():
            yield ex, plan
    if run_dir is not None:
        from esc_eval.sim.runfolder import RunFolder, RunFolderError

        try:
            run = RunFolder(str(run_dir), create=False)  # a local folder or a storage URI
        except RunFolderError:
            return  # the job refused before writing anything: neither does the plan
        if run.read_manifest():
            run.update_manifest(placement=plan.as_dict())


@contextlib.contextmanager
def placed_simulation(cfg: SimulationConfig, run_dir: str | None = None,
                      say: Callable[[str], None] = log.info) -> Iterator[SimulationConfig]:
    from esc_eval.sim.simulation import expected_seq_tokens

    with placed(cfg.execution, model_uses(cfg), run_dir=run_dir, say=say,
                seq_tokens=lambda: expected_seq_tokens(cfg)) as (ex, _plan):
        yield cfg.model_copy(update={"execution": ex})


@contextlib.contextmanager
def placed_scoring(cfg: ScoringConfig, run_dir: str | None = None,
                   say: Callable[[str], None] = log.info) -> Iterator[ScoringConfig]:
    from esc_eval.sim.scoring import expected_seq_tokens

    with placed(cfg.execution, model_uses(scoring=cfg), run_dir=run_dir, say=say,
                seq_tokens=lambda: expected_seq_tokens(cfg, run_dir)) as (ex, _plan):
        yield cfg.model_copy(update={"execution": ex})


__all__ = ["cluster_hardware", "local_gpus", "make_plan", "model_uses", "placed", "placed_scoring",
           "placed_simulation", "self_hosted"]
