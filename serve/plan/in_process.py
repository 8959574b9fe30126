"""In-process mode: the engines live in the pool's workers (the CPU default, as measured; on GPUs
what `auto` falls back to when a phase's models do not fit side by side). A worker holds the role's
engine with one target's at a time (sim/pool/participants.py releases a target's engine before the next
starts), and during scoring the judge's; on GPUs each gets a `gpu_memory_utilization` share of the
worker's GPUs, so the second engine can start beside the first."""
from __future__ import annotations

from esc_eval.serve.engines.args import COMMON_ENGINE
from esc_eval.serve.plan.model import GB, EnginePlan, PlacementConfig, Plan
from esc_eval.serve.plan.sizes import (Engine, display_name, gb, kv_rate, max_model_len, refuse_tp, resolved_dtype, set_kv,
                                       set_sizes, tensor_parallel, weights_bytes)


def plan_in_process(plan: Plan, engines: list[Engine], placement: PlacementConfig, workers: int,
                    gpus_per_worker: float, cpu_kv_cache_gib: float, cpu_dtype: str, phase: str) -> None:
    hw = plan.hardware
    gpu = hw.gpus > 0
    if gpu and gpus_per_worker <= 0:
        plan.refusals.append(f"in-process engines on {hw.describe()} need GPUs in the workers: set "
                             f"execution.num_gpus_per_worker (or placement mode serve)")
        return
    if gpu and gpus_per_worker > 1 and gpus_per_worker != int(gpus_per_worker):
        plan.refusals.append(f"execution.num_gpus_per_worker {gpus_per_worker:g}: above 1 it must be a whole number")
        return
    if gpu and workers * gpus_per_worker > hw.gpus:
        plan.refusals.append(f"execution.workers {workers} x num_gpus_per_worker {gpus_per_worker:g} need "
                             f"{workers * gpus_per_worker:g} GPUs; the run has {hw.gpus}")
    plans: dict[str, EnginePlan] = {}
    for e in engines:
        overrides = e.overrides(placement)
        dtype = resolved_dtype(e.options, gpu, cpu_dtype)
        tp = tensor_parallel(e.options, overrides)
        ep = EnginePlan(name=display_name(e), refs=e.refs, uses=e.uses, where="in-process", device="gpu" if gpu else "cpu",
                        phase=phase, tensor_parallel_size=tp, gpus=tp if gpu else 0,
                        max_model_len=max_model_len(e, overrides, COMMON_ENGINE["max_model_len"]))
        set_sizes(ep, e.facts, weights_bytes(e, dtype), dtype)
        plans[e.key] = ep
        plan.engines.append(ep)
        if not gpu:
            if tp != 1:
                plan.refusals.append(f"model {e.facts.name}: tensor_parallel_size {tp} needs GPUs; this run has none")
            set_kv(ep, e.facts, cpu_kv_cache_gib * 2**30, dtype)
            if ep.kv_tokens is not None and ep.kv_tokens < ep.max_model_len:
                ep.notes.append(f"VLLM_CPU_KVCACHE_SPACE {cpu_kv_cache_gib:g} GiB holds {ep.kv_tokens:,} tokens, less than "
                                f"one {ep.max_model_len:,}-token sequence: raise it (execution.env) or lower max_model_len")
            continue
        if tp > 1 or "tensor_parallel_size" in overrides:
            ep.engine["tensor_parallel_size"] = tp
    if not gpu or any(p.weights_gb is None for p in plans.values()):
        for p in plans.values():
            if gpu and p.weights_gb is None:
                plan.refusals.append(f"model {p.name}: size unknown (no registry `size`, no local config.json); cannot "
                                     f"plan its GPU memory")
        return
    for e in engines:
        refuse_tp(plan, e, plans[e.key].tensor_parallel_size, "a worker", max(gpus_per_worker, 1) if gpus_per_worker >= 1 else 1)
    share_worker_gpus(plan, engines, plans, placement, gpus_per_worker)


def share_worker_gpus(plan: Plan, engines: list[Engine], plans: dict[str, EnginePlan], placement: PlacementConfig,
                      gpus_per_worker: float) -> None:
    """gpu_memory_utilization for each engine of a worker (see the module doc). Every engine spreads
    over its tensor-parallel GPUs starting at the worker's first, so that GPU holds a share of each:
    the budget below is per GPU."""
    hw = plan.hardware
    mem = hw.gpu_memory_gb * GB
    budget = placement.gpu_memory_utilization * mem * min(gpus_per_worker, 1.0)

    def fixed(key: str) -> float:  # weights + overhead on the first GPU
        p = plans[key]
        return p.weights_gb * GB / p.tensor_parallel_size + placement.engine_overhead_gb * GB

    def rate(key: str) -> float:  # KV bytes per token on one GPU
        e = next(x for x in engines if x.key == key)
        return (kv_rate(e, plans[key].dtype) or 1.0) / plans[key].tensor_parallel_size

    role = next((e.key for e in engines if "role" in e.uses), None)
    targets = [e.key for e in engines if "target" in e.uses and e.key != role]
    share: dict[str, float] = {}
    if role is not None:
        # The role stays while targets change: its share is what it gets beside the most demanding target.
        splits = []
        for t in targets:
            rest = budget - fixed(role) - fixed(t)
            splits.append(fixed(role) + max(rest, 0) * rate(role) / (rate(role) + rate(t)))
        share[role] = min(min(splits), budget) if splits else budget
    for t in targets:
        share[t] = budget - share.get(role, 0.0)
    for e in engines:
        share.setdefault(e.key, budget)  # the judge alone (or a model used by nothing above)
    for e in engines:
        p, s = plans[e.key], share[e.key]
        kv_per_gpu = s - fixed(e.key)
        if s > 0:
            p.gpu_memory_utilization = round(s / mem, 3)
            p.engine["gpu_memory_utilization"] = p.gpu_memory_utilization
            given = e.options.get("gpu_memory_utilization")
            if given is not None and float(given) != p.gpu_memory_utilization:
                p.notes.append(f"options.gpu_memory_utilization {float(given):g} replaced by the plan's "
                               f"{p.gpu_memory_utilization:g} (its share of the worker's GPU)")
        set_kv(p, e.facts, max(kv_per_gpu, 0) * p.tensor_parallel_size, p.dtype)
        if kv_per_gpu > 0 and (p.kv_tokens is None or p.kv_tokens >= p.max_model_len):
            continue
        # the engines this one shares the worker with when it is short: the role with a target
        if e.key == role:
            together = [p] + ([max((plans[t] for t in targets), key=lambda x: x.weights_gb)] if targets else [])
        elif e.key in targets and role is not None:
            together = [plans[role], p]
        else:
            together = [p]
        names = " and ".join(f"{q.name} ({q.weights_gb:.1f} GB weights on {q.tensor_parallel_size} GPU"
                             f"{'s' if q.tensor_parallel_size > 1 else ''})" for q in together)
        held = (f"{gpus_per_worker:g} x {hw.gpu_memory_gb:g} GB GPU" if gpus_per_worker >= 1
                else f"{gpus_per_worker:g} of a {hw.gpu_memory_gb:g} GB GPU")
        refusal = (f"{'models ' + names + ' do' if len(together) > 1 else 'model ' + names + ' does'} not fit "
                   f"{'together ' if len(together) > 1 else ''}with one {p.max_model_len:,}-token sequence of KV cache "
                   f"each on a worker's {held} ({gb(budget)} usable per GPU, {placement.engine_overhead_gb:g} GB overhead per "
                   f"engine): use placement mode serve (each model on its own GPUs) or give each worker more GPUs")
        if refusal not in plan.refusals:
            plan.refusals.append(refusal)
