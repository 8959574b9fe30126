"""Serve mode: every vLLM model of a phase becomes a deployment of the run's Serve app, packed onto
the GPUs by serve/plan/pack.py (several on one GPU, whole GPUs or tensor parallelism where a model
needs them). Registry models deploy under their registry name; a local folder (`vllm//path`) under
its folder's name, with its size from config.json and the weight files and its chat template from
its tokenizer files. What the placement changes of what the user configured is said in a note."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from esc_eval.serve.engines.args import COMMON_ENGINE
from esc_eval.serve.plan.model import GB, EnginePlan, PlacementConfig, Plan
from esc_eval.serve.plan.pack import Demand, Packer, nodes_of, pack
from esc_eval.serve.plan.sizes import (Engine, describe, fewest_gpus, gb, kv_rate, max_model_len, refuse_tp,
                                       resolved_dtype, set_kv, set_sizes, tensor_parallel, weights_bytes)
from esc_eval.serve.registry.registry import Registry

CARRIED_OPTIONS = ("max_model_len", "max_num_seqs", "dtype", "tensor_parallel_size", "trust_remote_code",
                   "chat_template")  # in-process options a deployment takes over; the rest is said in a note
PINNED = ("min_replicas", "max_replicas", "initial_replicas")


def deployment_name(e: Engine, registry: Registry, taken: set[str]) -> str | None:
    """The deployment's model id: the registry name, else the local folder's name (made unique and
    never a registry name); None for a model that is neither."""
    if e.facts.entry is not None:
        return e.facts.entry.name
    folder = local_folder(e)
    if folder is None:
        return None
    base = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-.") or "model"
    name, i = base, 1
    while name in taken or name in registry.models:
        i += 1
        name = f"{base}-{i}"
    return name


def local_folder(e: Engine) -> Path | None:
    w = e.facts.weights
    p = Path(w).expanduser() if w and w != "embedded" else None
    return p if p is not None and p.is_dir() else None


def has_chat_template(folder: Path) -> bool:
    """Whether the folder's tokenizer brings a chat template (what vLLM's chat endpoint renders with)."""
    import json

    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    try:
        return bool(json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, ValueError, AttributeError):
        return False


def _fields(e: Engine, name: str, overrides: dict[str, Any], dtype: str, notes: list[str]) -> dict[str, Any]:
    """ServeModelConfig fields from the config: placement.models first, then the model's options."""
    fields: dict[str, Any] = {"name": name, **overrides}
    fields.setdefault("max_model_len", max_model_len(e, overrides, COMMON_ENGINE["max_model_len"]))
    if "max_num_seqs" in e.options:
        fields.setdefault("max_num_seqs", e.options["max_num_seqs"])
    if dtype in ("float32", "bfloat16", "float16") and ("dtype" in e.options or "dtype" in overrides):
        fields["dtype"] = dtype
    folder = local_folder(e) if e.facts.entry is None else None
    if folder is not None:
        fields.setdefault("model_source", str(folder.resolve()))
        extra = dict(fields.get("engine_kwargs") or {})
        if e.options.get("trust_remote_code"):
            extra.setdefault("trust_remote_code", True)
        template = e.options.get("chat_template")
        if template:
            extra.setdefault("chat_template", Path(str(template)).expanduser().read_text(encoding="utf-8"))
        elif not has_chat_template(folder):
            notes.append(f"{folder} has no chat template (tokenizer_config.json chat_template or chat_template.jinja): "
                         f"vLLM's chat endpoint refuses its requests; give options.chat_template")
        if extra:
            fields["engine_kwargs"] = extra
    dropped = sorted(k for k in e.options if k not in CARRIED_OPTIONS and k != "adapters")
    if dropped:
        notes.append(f"options {', '.join(dropped)} are for in-process engines: the deployment runs without them "
                     f"(set them under placement.models.{e.models[0]})")
    return fields


def plan_serve(plan: Plan, engines: list[Engine], placement: PlacementConfig, cpu_kv_cache_gib: float, cpu_dtype: str,
               registry: Registry, phase: str, targets: int) -> None:
    """Deployments for `engines` (one phase's), packed onto plan.hardware (see the module doc)."""
    from esc_eval.serve.app.application import ServeModelConfig

    hw = plan.hardware
    gpu = hw.gpus > 0
    plan.kv_cache_gib = max(1, int(cpu_kv_cache_gib))
    node_gpus = hw.gpus_per_node or hw.gpus
    budget = placement.gpu_memory_utilization * (hw.gpu_memory_gb or 0) * GB  # per GPU
    overhead = placement.engine_overhead_gb * GB
    taken: set[str] = set()
    placed: list[tuple[Engine, EnginePlan, dict[str, Any], float]] = []  # engine, plan, fields, weights
    for e in engines:
        overrides = e.overrides(placement)
        name = deployment_name(e, registry, taken)
        if name is None:
            plan.refusals.append(f"model {e.facts.name}: serve mode deploys registry models and local weight folders; "
                                 f"add it to the registry (or a registry entry's local_path), give a local folder, or use "
                                 f"execution.placement.mode: in_process")
            continue
        if name in taken:
            plan.refusals.append(f"model {name}: configured twice with different options; serve mode deploys one "
                                 f"deployment per model (give both uses the same options)")
            continue
        taken.add(name)
        dtype = resolved_dtype({**e.options, **overrides}, gpu, cpu_dtype)
        notes: list[str] = []
        fields = _fields(e, name, overrides, dtype, notes)
        weights = weights_bytes(e, dtype)
        ep = EnginePlan(name=name, refs=e.refs, uses=e.uses, where="serve deployment", device="gpu" if gpu else "cpu",
                        phase=phase, max_model_len=fields["max_model_len"], notes=notes, serve={"name": name})
        set_sizes(ep, e.facts, weights, dtype)
        plan.engines.append(ep)
        if not gpu:
            cfg = ServeModelConfig(**fields)
            ep.replicas, ep.serve = (cfg.min_replicas, cfg.max_replicas), cfg.model_dump(exclude_defaults=True) | {"name": name}
            set_kv(ep, e.facts, plan.kv_cache_gib * 2**30, dtype)
            continue
        if weights is None:
            plan.refusals.append(f"model {name}: size unknown (no registry `size`, no local config.json); cannot plan "
                                 f"its GPU memory")
            continue
        rate = kv_rate(e, dtype) or 0.0
        floor = int(placement.min_kv_sequences * ep.max_model_len)

        def fits(tp: int) -> bool:
            return weights / tp + overhead + floor * rate / tp <= budget

        pinned_tp = "tensor_parallel_size" in overrides or "tensor_parallel_size" in e.options
        tp = tensor_parallel(e.options, overrides) if pinned_tp else (fewest_gpus(e, fits, node_gpus) or 1)
        ep.tensor_parallel_size, ep.gpus = tp, tp
        if refuse_tp(plan, e, tp, "a node" if hw.gpus_per_node else "the run", node_gpus):
            continue
        if not fits(tp):
            where = f"{tp} x {hw.gpu_memory_gb:g} GB GPU{'s' if tp > 1 else ''}"
            plan.refusals.append(
                f"model {describe(e, weights, dtype)} does not fit on {where} with one {ep.max_model_len:,}-token sequence "
                f"of KV cache ({gb(budget)} usable per GPU at gpu_memory_utilization {placement.gpu_memory_utilization:g}, "
                f"{placement.engine_overhead_gb:g} GB engine overhead): "
                + (f"raise placement.models.{e.models[0]}.tensor_parallel_size (now {tp})" if pinned_tp or tp < node_gpus
                   else f"a node's {node_gpus} GPUs are too few even together"))
            continue
        if tp > 1 and not pinned_tp:
            notes.append(f"tensor_parallel_size {tp} set by the plan: {gb(weights)} of weights need {tp} GPUs")
        fields.update(accelerator="gpu", tensor_parallel_size=tp)
        if placement.accelerator_type or hw.accelerator_type:
            fields["accelerator_type"] = placement.accelerator_type or hw.accelerator_type
        placed.append((e, ep, fields, weights))
    if gpu and placed and len(placed) == len(engines):
        _pack(plan, placed, placement, budget, overhead, phase, targets)


def _load(e: Engine, targets: int) -> float:
    """Relative work of a model, what its GPUs follow (serve/plan/pack.py): parameters (decode reads
    the weights once per step) x its answer cap (the registry's max_tokens; the config's own params
    are not planned by) x its share of the calls (the role answers every target's dialogues)."""
    from esc_eval.serve.chat.interface import GenerationParams

    params = e.facts.size.params_b if e.facts.size else 1.0
    cap = (e.facts.entry.generation if e.facts.entry else GenerationParams()).max_tokens or GenerationParams().max_tokens
    calls = (max(targets, 1) if "role" in e.uses else 0) + (1 if set(e.uses) - {"role"} else 0)
    return params * cap * max(calls, 1)


def _pack(plan: Plan, placed: list[tuple[Engine, EnginePlan, dict[str, Any], float]], placement: PlacementConfig,
          budget: float, overhead: float, phase: str, targets: int) -> None:
    from esc_eval.serve.app.application import ServeModelConfig

    hw = plan.hardware
    demands = []
    for e, ep, fields, weights in placed:
        tp = ep.tensor_parallel_size
        cfg = ServeModelConfig(**fields)
        rate = (kv_rate(e, ep.dtype) or 0.0) / tp
        pinned = any(k in fields for k in ("min_replicas", "max_replicas", "initial_replicas"))
        demands.append(Demand(ep.name, (weights / tp + overhead) / GB, rate / GB,
                              int(placement.min_kv_sequences * ep.max_model_len), tp, cfg.min_replicas,
                              fill=not pinned, load=_load(e, targets)))
    nodes = nodes_of(hw.gpus, hw.gpus_per_node)
    # configured autoscaling keeps room for max_replicas when it can; else it is packed at min_replicas
    at_max = [Demand(**{**d.__dict__, "replicas": int(f.get("max_replicas", 1))}) if not d.fill else d
              for d, (_, _, f, _) in zip(demands, placed)]
    packing = pack(at_max, nodes, budget / GB)
    if at_max != demands:
        if packing.ok:
            plan.notes.append(f"the {phase}'s GPU layout holds the configured max_replicas: room kept for autoscaling")
        else:
            plan.notes.append(f"at max_replicas the {phase}'s deployments do not fit {hw.describe()} in every order Ray "
                              f"may start them in: packed at min_replicas, so autoscaling may stop short of some maxima")
            packing = pack(demands, nodes, budget / GB)
    if not packing.ok:
        plan.fits_at_once = False
        names = ", ".join(f"{d.name} {d.replicas} x {Packer(demands, nodes, budget / GB).need(d):.2f}" for d in demands)
        plan.refusals.append(f"serve: the {phase}'s {len(demands)} models do not fit side by side on {hw.describe()}: "
                             f"at their least KV cache ({placement.min_kv_sequences:g} x max_model_len tokens each) they "
                             f"need {packing.need_gpus:.1f} GPUs ({names}); use placement mode in_process (or auto: targets "
                             f"one after another in each worker), or fewer targets per run")
        return
    plan.layout[phase] = [[f"{n} {f:g}" for n, f in gpu] for gpu in packing.layout]
    for (e, ep, fields, weights), d in zip(placed, demands):
        f = packing.fraction[d.name]
        n = packing.replicas[d.name]
        lo_hi = (n, n) if d.fill else (fields.get("min_replicas", 1), fields.get("max_replicas", 1))
        share = f if f < 1 else 1.0
        util = round(share * placement.gpu_memory_utilization, 4)
        fields.update(gpu_memory_utilization=util, min_replicas=lo_hi[0], max_replicas=max(lo_hi))
        if f < 1:
            fields["gpu_fraction"] = f
            ep.gpu_fraction = f
        ep.replicas, ep.gpu_memory_utilization = (lo_hi[0], max(lo_hi)), util
        per_gpu = share * budget - weights / ep.tensor_parallel_size - overhead
        set_kv(ep, e.facts, per_gpu * ep.tensor_parallel_size, ep.dtype)
        ep.serve = ServeModelConfig(**fields).model_dump(exclude_defaults=True) | {"name": ep.name}
        _change_notes(ep, e, placement, d, n, f)
    if any(f < 1 for f in packing.fraction.values()):
        plan.notes.append(f"replicas sharing a GPU split placement.gpu_memory_utilization "
                          f"{placement.gpu_memory_utilization:g}: each gets its share of the GPU x "
                          f"{placement.gpu_memory_utilization:g} as its own gpu_memory_utilization (vLLM's budget is "
                          f"per process)")


def _change_notes(ep: EnginePlan, e: Engine, placement: PlacementConfig, d: Demand, n: int, f: float) -> None:
    """What the placement changes of the config, said where it happens."""
    if "gpu_memory_utilization" in e.options and float(e.options["gpu_memory_utilization"]) != ep.gpu_memory_utilization:
        ep.notes.append(f"options.gpu_memory_utilization {e.options['gpu_memory_utilization']:g} replaced by the plan's "
                        f"{ep.gpu_memory_utilization:g}")
    if d.fill and n != d.replicas:
        ep.notes.append(f"{n} replicas set by the plan (GPUs follow the work: parameters x answer cap x calls); set "
                        f"placement.models.{e.models[0]}.min_replicas / max_replicas to choose")
