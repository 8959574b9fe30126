"""Where each model of a run runs, on what and with how much memory, decided before any engine starts.

`esc-eval plan CONFIG` prints a plan (on the GPUs it finds, or those given with --gpus N --gpu-mem GB);
`esc-eval simulate` and `score` make the same plan at run time (sim/driver/placement.py) and follow it.
Pure: the GPUs are described (serve/devices/gpus.py finds them; nothing here probes).

Each phase of a run is planned on its own (the simulation's role and targets; the scoring's judge,
which starts after the simulation's engines or deployments are gone). Two ways to place its
self-hosted (vLLM) models:
- serve: each distinct model is a deployment of one Ray Serve app, packed onto the GPUs by memory
  (serve/plan/pack.py: several replicas on one GPU with fractional GPUs and a gpu_memory_utilization
  share each, whole GPUs or tensor parallelism where a model needs them, replicas and GPUs following
  each model's work: the role, answering every dialogue, gets the most); the pool's workers are CPU actors calling it through `serve/<model>`
  handles, sticky per dialogue. What `auto` picks when the run has GPUs and the models fit side by side.
- in_process: the engines live in the pool's workers (the default on CPU, as measured, and what
  `auto` falls back to when the models do not fit side by side: each worker holds the role with one
  target at a time, the targets one after another; serve/plan/in_process.py).
API and fake models are external: nothing to place.

Memory is estimated from the model's size (serve/registry/data/registry.yaml `size`, or a local folder's
config.json and weight files): weights = parameters x dtype bytes, split over the tensor-parallel
GPUs; ENGINE_OVERHEAD_GB per GPU for activations, CUDA graphs and the CUDA context (an estimate:
vLLM measures its own at start); the rest of the engine's share is KV cache, reported as tokens
and as full `max_model_len` sequences. Refused, one line each: a model whose weights do not fit
its GPUs, a tensor-parallel size the GPUs (or a node, or a worker) cannot hold, models that do not
fit together, replicas the run's GPUs cannot start, an adapter rank over max_lora_rank, a local
folder without config.json or weights.
"""
from __future__ import annotations

from pathlib import Path

from esc_eval.serve.devices.cpu import DEFAULT_KV_CACHE_GIB
from esc_eval.serve.devices.gpus import GPU_MEMORY_GB
from esc_eval.serve.registry.size import model_facts
from esc_eval.serve.plan.in_process import plan_in_process
from esc_eval.serve.plan.model import (DEFAULT_GPU_MEMORY_UTILIZATION, ENGINE_OVERHEAD_GB, GB, PLACEMENT_ENV, POOL_WORKERS,
                                       SERVE_MODEL_FIELDS_SET_BY_PLAN, EnginePlan, Hardware, Mode, ModelUse,
                                       PlacementConfig, Plan, PlanError, hardware_for, model_of, placement_from_env,
                                       ref_key)
from esc_eval.serve.plan.serve_mode import plan_serve
from esc_eval.serve.plan.sizes import Engine, engine_key
from esc_eval.serve.registry.entry import VLLM_LORA_RANKS, lora_rank
from esc_eval.serve.registry.registry import Registry, default_registry


def plan_run(uses: list[ModelUse], hardware: Hardware, placement: PlacementConfig | None = None, *,
             workers: int = POOL_WORKERS, gpus_per_worker: float = 0.0, cpu_kv_cache_gib: float = DEFAULT_KV_CACHE_GIB,
             cpu_dtype: str = "float32", registry: Registry | None = None, workers_set: bool = True) -> Plan:
    """The plan for a run's models (see the module doc). `workers` and `gpus_per_worker` are the pool's
    (execution.workers, execution.num_gpus_per_worker; `workers_set` False when the config left workers
    at its default, which an in-process fallback may then raise); `cpu_dtype` the dtype CPU engines resolve to."""
    placement = placement or PlacementConfig()
    registry = registry or default_registry()
    phases = list(dict.fromkeys(u.phase for u in uses)) or ["simulation"]
    plans = [_plan_phase([u for u in uses if u.phase == ph], ph, hardware, placement, workers, gpus_per_worker,
                         cpu_kv_cache_gib, cpu_dtype, registry, workers_set) for ph in phases]
    if len(plans) == 1:
        return plans[0]
    merged = Plan(mode=plans[0].mode, hardware=hardware, engines=[], app_name=placement.app_name,
                  kv_cache_gib=plans[0].kv_cache_gib)
    for ph, p in zip(phases, plans):
        merged.engines += p.engines
        merged.refusals += [r for r in p.refusals if r not in merged.refusals]
        merged.notes += [n if len(phases) == 1 else f"{ph}: {n}" for n in p.notes]
        merged.warnings += [w for w in p.warnings if w not in merged.warnings]
        merged.layout.update(p.layout)
        merged.execution.update(p.execution)
        if p.mode != merged.mode:
            merged.notes.append(f"{ph}: runs {p.mode.replace('_', '-')} (the plan's first line is the {phases[0]}'s)")
    return merged


def _plan_phase(uses: list[ModelUse], phase: str, hardware: Hardware, placement: PlacementConfig, workers: int,
                gpus_per_worker: float, cpu_kv_cache_gib: float, cpu_dtype: str, registry: Registry,
                workers_set: bool) -> Plan:
    mode: Mode = ("serve" if hardware.gpus else "in_process") if placement.mode == "auto" else placement.mode  # type: ignore[assignment]
    plan = Plan(mode=mode, hardware=hardware, engines=[], app_name=placement.app_name)
    engines: dict[str, Engine] = {}
    for u in uses:
        facts = model_facts(u.model, registry)
        if facts.error:
            plan.refusals.append(f"{u.use} {u.model}: {facts.error}")
            continue
        key = engine_key(facts, u.model, u.options)
        eng = engines.setdefault(key, Engine(key, facts, dict(u.options)))
        if u.ref_key not in eng.refs:
            eng.refs.append(u.ref_key)
            eng.models.append(u.model)
        if u.use not in eng.uses:
            eng.uses.append(u.use)
        eng.phases.add(u.phase)
    if hardware.gpus and not hardware.gpu_memory_gb:
        plan.refusals.append(f"the run has {hardware.gpus} GPUs of unknown memory: set execution.placement.gpu_memory_gb "
                             f"(or --gpu-mem), or an accelerator_type Ray knows ({', '.join(GPU_MEMORY_GB)})")
        return plan
    hosted = [e for e in engines.values() if e.facts.backend == "vllm"]
    for e in engines.values():
        if e.facts.backend != "vllm":
            plan.engines.append(EnginePlan(name=e.facts.name, refs=e.refs, uses=e.uses, where=f"external ({e.facts.backend})",
                                           device="-", phase=phase))
    targets = sum(1 for u in uses if u.use == "target")
    if mode == "serve":
        plan_serve(plan, hosted, placement, cpu_kv_cache_gib, cpu_dtype, registry, phase, targets)
        if placement.mode == "auto" and not plan.fits_at_once:
            return _one_after_another(plan, uses, phase, hardware, placement, workers, gpus_per_worker,
                                      cpu_kv_cache_gib, cpu_dtype, registry, workers_set)
        elif hosted and hardware.gpus:
            if gpus_per_worker:
                plan.notes.append(f"execution.num_gpus_per_worker {gpus_per_worker:g} set to 0: the workers only call "
                                  f"the deployments")
            plan.execution["num_gpus_per_worker"] = 0.0
            if placement.mode == "auto" and plan.ok:
                plan.notes.append("the vLLM models run as Serve deployments (placement mode auto on GPUs), not in the "
                                  "workers" + ("; the dialogues go to the targets in turn, so every target's replicas "
                                               "work at once" if targets > 1 else ""))
        elif hosted:
            plan.execution["num_gpus_per_worker"] = 0.0
    else:
        plan_in_process(plan, hosted, placement, workers, gpus_per_worker, cpu_kv_cache_gib, cpu_dtype, phase)
    for e in hosted:
        _check_adapters(plan, e, placement, plan.mode)
    return plan


def _one_after_another(serve: Plan, uses: list[ModelUse], phase: str, hardware: Hardware, placement: PlacementConfig,
                       workers: int, gpus_per_worker: float, cpu_kv_cache_gib: float, cpu_dtype: str,
                       registry: Registry, workers_set: bool) -> Plan:
    """`auto` when the models do not fit side by side: in-process, each worker holding the role and
    one target at a time on its own GPUs (one per worker unless configured)."""
    why = next(r for r in serve.refusals if r.startswith("serve: "))
    gpw = gpus_per_worker or 1.0
    n = workers if workers_set else max(1, int(hardware.gpus // gpw))
    in_process = placement.model_copy(update={"mode": "in_process"})
    plan = _plan_phase(uses, phase, hardware, in_process, n, gpw, cpu_kv_cache_gib, cpu_dtype, registry, True)
    plan.notes.insert(0, why.removeprefix("serve: ").split("; use placement mode")[0]
                      + ": running in-process instead, each worker holding the role and one target at a time "
                        "(the targets one after another)")
    if not gpus_per_worker:
        plan.notes.append(f"execution.num_gpus_per_worker set to {gpw:g} (the workers hold the engines)")
        plan.execution["num_gpus_per_worker"] = gpw
    if n != workers:
        plan.notes.append(f"execution.workers set to {n} (one per {gpw:g} GPU{'s' if gpw != 1 else ''})")
        plan.execution["workers"] = n
    return plan


def _check_adapters(plan: Plan, e: Engine, placement: PlacementConfig, mode: Mode) -> None:
    """An adapter rank over max_lora_rank is refused; an explicit max_lora_rank is what is checked
    (left unset, it is sized from the adapters themselves)."""
    entry = e.facts.entry
    adapters = dict(entry.adapters) if entry else {}
    adapters.update({k: str(v) for k, v in (e.options.get("adapters") or {}).items()})
    if not adapters:
        return
    overrides = next((placement.models[m] for m in e.models if m in placement.models), {})
    explicit = overrides.get("max_lora_rank") if mode == "serve" else e.options.get("max_lora_rank")
    ranks: dict[str, int] = {}
    for name, path in adapters.items():
        p = Path(path).expanduser()
        if not p.is_dir():
            if mode == "in_process":
                plan.refusals.append(f"model {e.facts.name}: adapter {name!r} folder {path} does not exist (the base "
                                     f"model is never used instead)")
                return
            continue
        r = lora_rank(p)
        if r:
            ranks[name] = r
    unknown = sorted(set(adapters) - set(ranks))
    ep = next((x for x in plan.engines if set(x.refs) == set(e.refs)), None)
    if ep is None:
        return  # refused already (e.g. not deployable)
    if unknown:
        ep.notes.append(f"LoRA rank unknown for {len(unknown)} adapter(s) not in a local folder ({', '.join(unknown[:3])}"
                        f"{', ...' if len(unknown) > 3 else ''}): checked when the replica loads them")
    if not ranks:
        return
    top_name, top = max(ranks.items(), key=lambda kv: kv[1])
    if top > VLLM_LORA_RANKS[-1]:
        plan.refusals.append(f"model {e.facts.name}: adapter {top_name!r} has LoRA rank {top}, over vLLM's largest "
                             f"max_lora_rank {VLLM_LORA_RANKS[-1]}")
        return
    where = f"placement.models.{e.models[0]}.max_lora_rank" if mode == "serve" else "options.max_lora_rank"
    if explicit is not None and top > int(explicit):
        plan.refusals.append(f"model {e.facts.name}: adapter {top_name!r} has LoRA rank {top}, over max_lora_rank "
                             f"{explicit} ({where}); raise it to {next(r for r in VLLM_LORA_RANKS if r >= top)}")
    elif explicit is None and mode == "serve":
        ep.serve["max_lora_rank"] = next(r for r in VLLM_LORA_RANKS if r >= top)



__all__ = ["DEFAULT_GPU_MEMORY_UTILIZATION", "ENGINE_OVERHEAD_GB", "GB", "GPU_MEMORY_GB", "PLACEMENT_ENV",
           "SERVE_MODEL_FIELDS_SET_BY_PLAN", "EnginePlan", "Hardware", "ModelUse", "PlacementConfig", "Plan", "PlanError",
           "hardware_for", "model_of", "placement_from_env", "plan_run", "ref_key"]
