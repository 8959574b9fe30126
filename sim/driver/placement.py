"""A run's models placed before it starts, and the plan followed (serve/plan/planner.py decides).

    with placed(cfg.execution, uses, run_dir=run_dir) as (execution, plan):   # jobs/placed.py
        ...   # the job runs with `execution`

The GPUs are found the same way `esc-eval plan` finds them: on this machine through the one decision the
engines follow too (serve/devices/accelerator.py: the GPUs NVML or nvidia-smi list, CUDA_VISIBLE_DEVICES
respected, when torch can use them; a machine that contradicts itself, e.g. a CPU build of torch beside
GPUs, stops the run before anything starts with that one line); the Ray cluster's resources when joining
one by address (its nodes' engines decide for themselves at start). In-process engines the plan puts on
the CPU of a machine with GPUs are given none (CUDA_VISIBLE_DEVICES=''), so they run where the plan says.
- in_process (the CPU default, and `auto`'s fallback when the models do not fit side by side): the
  workers build their engines as configured; on GPUs each engine gets the plan's share of its
  worker's GPUs (ESC_EVAL_PLACEMENT in the workers' environment).
- serve (the default when the run has GPUs): the run's vLLM models are deployed as one Ray Serve
  app, packed onto the GPUs by the plan (several on a GPU, or whole GPUs); the pool's workers become
  CPU actors (num_gpus_per_worker 0) whose models are `serve/<model>` handles, sticky per dialogue
  (the dialogue id is the session id). The app is deleted when the run ends, failed or not, unless
  `placement.keep_serving`.
The console says first what the plan changed of the config, and warns of a model put on the CPU
while GPUs are there. The models' configured names and options never change, so dialogue ids,
fingerprints and resume work the same wherever a model ran; the manifest records the plan
(`placement`) and, per run of a job, the GPU time it held (`gpu_charges`: Serve replicas metered
from serve.status(), in-process engines their share of the workers' GPUs).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from typing import Any, Callable, Iterator

from esc_eval.serve.devices.accelerator import check_accelerator, decide_accelerator
from esc_eval.serve.devices.cpu import DEFAULT_KV_CACHE_GIB, KV_CACHE_ENV, resolve_dtype
from esc_eval.serve.devices.gpus import GpuInventory, ray_inventory
from esc_eval.serve.registry.size import model_facts
from esc_eval.serve.plan.planner import PLACEMENT_ENV, Hardware, ModelUse, Plan, hardware_for, model_of, plan_run
from esc_eval.serve.registry.registry import default_registry
from esc_eval.serve.app.replica_meter import ReplicaMeter
from esc_eval.sim.pool.capacity import serve_worker_shares, size_serve_replicas
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.env import temporary_env

log = logging.getLogger("esc_eval.placement")


def self_hosted(uses: list[ModelUse]) -> bool:
    """Whether any model runs in a vLLM engine (something to place); False as well when a model is not
    in the registry: the job's own checks report that, as they always have. A vLLM model with a bad
    local folder is placed, so the plan refuses it before anything starts."""
    reg = default_registry()
    facts = [model_facts(u.model, reg) for u in uses]
    return not any(f.backend == "?" for f in facts) and any(f.backend == "vllm" for f in facts)


def local_gpus() -> tuple[int, str | None]:
    """(count, Ray accelerator type) of the GPUs this machine's engines use (serve/devices/accelerator.py)."""
    found = engine_gpus()
    return found.count, found.accelerator_type


def engine_gpus() -> GpuInventory:
    """This machine's GPUs as its engines will use them: those found when the accelerator decision is
    "cuda", else none (with why, when GPUs were seen)."""
    decision = decide_accelerator()
    if decision.kind == "cuda":
        return decision.gpus
    seen = decision.gpus
    notes = seen.notes + ((decision.problem or decision.reason,) if seen.count else ())
    return GpuInventory((), seen.source, seen.where, notes=notes)


def remote_cluster(execution: ExecutionConfig) -> bool:
    """Whether the run joins a Ray cluster by address (its engines may run on other machines)."""
    address = execution.ray_address or os.environ.get("RAY_ADDRESS")
    return bool(address) and address not in ("auto", "local")


def _joins_a_cluster(execution: ExecutionConfig) -> bool:
    """Whether the run joins a running Ray cluster (an address, or one started on this machine)."""
    if execution.ray_address or os.environ.get("RAY_ADDRESS"):
        return True
    from esc_eval.serve.app.ray_cluster import StaleRayAddressError, live_local_address

    try:
        return live_local_address() is not None
    except (StaleRayAddressError, ImportError):
        return False


def found_gpus(execution: ExecutionConfig) -> GpuInventory:
    """The GPUs the run can use as found: this machine's (NVML, nvidia-smi or the driver;
    CUDA_VISIBLE_DEVICES respected) when the run starts its own Ray here or runs locally, else the
    Ray cluster's it joins."""
    if execution.executor == "local" or not _joins_a_cluster(execution):
        return engine_gpus()
    import ray

    from esc_eval.sim.pool.on_ray import ensure_ray

    ensure_ray(execution)
    return ray_inventory(ray.cluster_resources(), ray.nodes())


def cluster_hardware(execution: ExecutionConfig) -> Hardware:
    """The run's GPUs: the config's `placement.gpus` when given, else those found (found_gpus); none
    for in-process engines without GPUs in the workers (what was found is kept for the warning)."""
    p = execution.placement
    found = found_gpus(execution)
    if p.gpus is not None:
        gpus, source = p.gpus, "described"
    elif p.mode == "in_process" and not execution.num_gpus_per_worker:
        gpus, source = 0, "described"  # engines on the workers' CPUs, as configured
    else:
        gpus, source = found.count, found.source
    memory = p.gpu_memory_gb or (found.memory_gb if found.count else None)
    # this machine contradicting itself: a refusal of `esc-eval plan` (a run stops on it before planning)
    problem = None if remote_cluster(execution) or found.where != "this machine" else decide_accelerator().problem
    return hardware_for(gpus, memory, p.gpus_per_node or found.per_node, p.accelerator_type or found.accelerator_type,
                        source=source, seen=found.count, seen_where=found.where, seen_text=found.describe(),
                        notes=found.notes, problem=problem)


def make_plan(execution: ExecutionConfig, uses: list[ModelUse], hardware: Hardware, *, at_run_time: bool = False) -> Plan:
    """The plan for `uses` under `execution` on `hardware` (pure, given the hardware). At run time,
    GPUs the config asks for that this machine does not have are refused; `esc-eval plan` warns."""
    kv = float(execution.env.get(KV_CACHE_ENV) or os.environ.get(KV_CACHE_ENV) or DEFAULT_KV_CACHE_GIB)
    plan = plan_run(uses, hardware, execution.placement, workers=execution.workers,
                    gpus_per_worker=execution.num_gpus_per_worker, cpu_kv_cache_gib=kv,
                    cpu_dtype=resolve_dtype(execution.dtype, gpu=False),
                    workers_set="workers" in execution.model_fields_set)
    plan.warnings += [n for n in hardware.notes if n not in plan.warnings and n != hardware.problem]
    if hardware.problem:
        plan.refusals.insert(0, hardware.problem)
    seen = hardware.seen or 0
    on_cpu = [e.name for e in plan.engines if e.device == "cpu"]
    if not hardware.gpus and seen and on_cpu:
        plan.warnings.append(f"{hardware.seen_text}, but the plan puts {', '.join(on_cpu)} on the CPU "
                             f"(placement.mode {execution.placement.mode} with execution.num_gpus_per_worker "
                             f"{execution.num_gpus_per_worker:g}): set num_gpus_per_worker, or placement mode auto")
    asked = execution.placement.gpus
    if asked and hardware.seen is not None and hardware.seen_where == "this machine" and asked > seen:
        why = (f"execution.placement.gpus {asked}: {hardware.seen_text}; a run started here (no --address) has "
               f"only those")
        (plan.refusals if at_run_time else plan.warnings).append(why)
    return plan


HIDE_GPUS = ("CUDA_VISIBLE_DEVICES", "")


def cpu_engines_beside_gpus(plan: Plan) -> bool:
    """Whether the plan runs in-process engines on the CPU while GPUs are there: their workers must be
    given none, or each engine would find them and decide "cuda" on its own."""
    return (plan.mode == "in_process" and not plan.hardware.gpus and bool(plan.hardware.seen)
            and any(e.device == "cpu" for e in plan.engines))


def plan_messages(plan: Plan) -> list[str]:
    """What the run's console says about its plan before anything starts: warnings, then what the
    placement changed of the config."""
    out = [f"warning: {w}" for w in plan.warnings]
    out += [f"placement: {n}" for n in plan.notes]
    out += [f"placement: {e.name}: {n}" for e in plan.engines for n in e.notes]
    return out


def _serve_running() -> bool:
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        return True
    except ValueError:
        return False


@contextlib.contextmanager
def _deployed(plan: Plan, execution: ExecutionConfig, say: Callable[[str], None],
              meters: list[ReplicaMeter]) -> Iterator[None]:
    """The plan's Serve app, up for the block and deleted after (unless keep_serving); its replicas'
    GPU time metered from before the deploy until they are gone (the meter goes into `meters`, so a
    deploy that fails is charged as well)."""
    from ray import serve

    from esc_eval.serve.app.deploy import deploy_app
    from esc_eval.serve.app.application import ServeConfig, ServeModelConfig
    from esc_eval.sim.pool.on_ray import ensure_ray

    placement = execution.placement
    ensure_ray(execution)
    if not _serve_running():
        serve.start(proxy_location="Disabled")  # the workers call deployment handles: no HTTP needed
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # Serve's deploy chatter, unless --verbose
    cfg = ServeConfig(app_name=plan.app_name, route_prefix=f"/{plan.app_name}", kv_cache_gib=plan.kv_cache_gib,
                      env_vars=dict(placement.replica_env), health_timeout_s=placement.health_timeout_s,
                      models=[ServeModelConfig(**m) for m in plan.serve_models(placement.kv_floor)])
    say(f"deploying {', '.join(m.name for m in cfg.models)} as Serve app {cfg.app_name!r} "
        f"({plan.hardware.describe()})")
    meter = ReplicaMeter(cfg.app_name, {e.serve["name"]: e.gpus_per_replica for e in plan.engines
                                        if e.where == "serve deployment"}, interval_s=placement.usage_interval_s).start()
    meters.append(meter)
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
        meter.stop()  # kept serving: charged up to here, what runs after is no longer the run's


def engine_usage(plan: Plan, execution: ExecutionConfig, meter: ReplicaMeter | None) -> dict[str, Any]:
    """What held the GPUs in one run of a job (the manifest's `gpu_charges`, read by sim/runs/usage.py):
    Serve replicas as metered; in-process engines their share of the workers' GPUs."""
    if plan.mode == "serve":
        totals = meter.totals() if meter is not None else {}
        models: dict[str, Any] = {}
        for e in plan.engines:
            if e.where == "serve deployment":
                for ref in e.refs:
                    models[model_of(ref)] = {"deployment": e.serve["name"], **totals.get(e.serve["name"], {})}
        return {"mode": "serve", "app": plan.app_name, "models": models}
    budget = execution.placement.gpu_memory_utilization * min(execution.num_gpus_per_worker or 1.0, 1.0)
    models = {}
    role_refs = {r for e in plan.engines if "role" in e.uses for r in e.refs}
    for e in plan.engines:
        if e.where != "in-process":
            continue
        share = min(e.gpu_memory_utilization / budget, 1.0) if e.gpu_memory_utilization else 1.0
        for ref in e.refs:
            # a target's engine lives only while its dialogues run (sim/pool/participants.py TargetEngines)
            models[model_of(ref)] = {"gpu_share": round(share, 4),
                                     "one_at_a_time": "target" in e.uses and not (set(e.refs) & role_refs)}
    return {"mode": "in_process", "workers": execution.workers, "gpus_per_worker": execution.num_gpus_per_worker,
            "models": models}


def _record(run_dir: str, plan: Plan, job: str, usage: dict[str, Any]) -> None:
    """The plan and its GPU charge in the run's manifest, and the usage recomputed with them."""
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.runs.storage import RunFolderError
    from esc_eval.sim.runs.usage import refresh_usage

    try:
        run = RunFolder(str(run_dir), create=False)  # a local folder or a storage URI
    except RunFolderError:
        return  # the job refused before writing anything: neither does the plan
    if not run.read_manifest():
        return
    manifest = run.read_manifest()
    ends = [e for e in manifest.get("events", []) if e.get("kind") in (f"{job}_start", f"{job}_end")]
    # the run this charge belongs to: its end event (none when the job stopped before writing one)
    end_at = ends[-1]["at"] if ends and ends[-1]["kind"] == f"{job}_end" else None
    charges = list(manifest.get("gpu_charges") or [])
    if any(c.get("end_at") == end_at for c in charges):
        end_at = None  # that end is an earlier run's: this one stopped before writing its own
    charges.append({"job": job, "end_at": end_at, **usage})
    run.update_manifest(placement=plan.as_dict(), gpu_charges=charges)
    refresh_usage(run)


@contextlib.contextmanager
def placed(execution: ExecutionConfig, uses: list[ModelUse], *, run_dir: str | None = None, job: str = "simulation",
           say: Callable[[str], None] = log.info,
           seq_tokens: Callable[[], dict[str, int]] = dict) -> Iterator[tuple[ExecutionConfig, Plan | None]]:
    """The execution to run with, once the plan for `uses` is made (a refusal raises PlanError, one
    line, before any engine starts) and followed; the plan and the GPU time it held are recorded in
    `run_dir`'s manifest, failed run or not."""
    if not self_hosted(uses):
        yield execution, None
        return
    if not remote_cluster(execution):
        check_accelerator()  # AcceleratorMismatch: this machine contradicts itself (one line), nothing started
    plan = make_plan(execution, uses, cluster_hardware(execution), at_run_time=True).check()
    size_serve_replicas(plan, seq_tokens, execution.placement)  # GPU replicas: what their KV cache holds
    for line in plan_messages(plan):
        say(line)
    mapping = plan.placement_map()
    if plan.mode == "serve":  # each worker's share of the sized GPU deployments: its items in flight follow it
        workers = int(plan.execution.get("workers", execution.workers))
        targets = len({u.ref_key for u in uses if u.use == "target"})
        for ref, share in serve_worker_shares(plan, workers, targets).items():
            mapping[ref]["serve"]["options"]["capacity"] = share
    env = {**execution.env, PLACEMENT_ENV: json.dumps(mapping, sort_keys=True)} if mapping else dict(execution.env)
    hide = cpu_engines_beside_gpus(plan)
    if hide:  # Ray leaves a zero-GPU worker every GPU of its node: the engines would decide "cuda" there
        env[HIDE_GPUS[0]] = HIDE_GPUS[1]
    ex = execution.model_copy(update={"env": env, **plan.execution})
    meters: list[ReplicaMeter] = []
    try:
        with temporary_env(PLACEMENT_ENV, env.get(PLACEMENT_ENV)), \
                temporary_env(HIDE_GPUS[0], HIDE_GPUS[1]) if hide else contextlib.nullcontext():
            # the local executor's worker is this process
            with _deployed(plan, ex, say, meters) if plan.mode == "serve" else contextlib.nullcontext():
                yield ex, plan
    finally:
        if run_dir is not None:
            try:
                _record(str(run_dir), plan, job, engine_usage(plan, ex, meters[0] if meters else None))
            except Exception as e:  # noqa: BLE001 - never hide the job's own outcome behind the bookkeeping
                log.warning("could not record the placement's usage in %s: %s", run_dir, e)


__all__ = ["cluster_hardware", "cpu_engines_beside_gpus", "engine_gpus", "engine_usage", "found_gpus", "local_gpus", "make_plan", "placed", "plan_messages",
           "remote_cluster", "self_hosted"]
