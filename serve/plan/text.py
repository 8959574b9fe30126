"""A placement plan as the lines `esc-eval plan` prints (and the run's console shows)."""
from __future__ import annotations

from esc_eval.serve.plan.model import EnginePlan, Plan

PHASE_TITLES = {"simulation": "simulation: the role and the targets",
                "scoring": "scoring: the judge, after the simulation (its engines or deployments gone)",
                "served": "served"}


def plan_lines(plan: Plan) -> list[str]:
    """The plan as text: one line per model (by phase when there are two), then refusals and notes."""
    out = [f"plan: {plan.mode.replace('_', '-')} on {plan.hardware.describe()}"]
    phases = list(dict.fromkeys(e.phase for e in plan.engines))
    for phase in phases:
        if len(phases) > 1:
            out.append(PHASE_TITLES.get(phase, phase) + ":")
        for e in (x for x in plan.engines if x.phase == phase):
            out.append(f"- {e.name} [{', '.join(e.uses)}]: {_where(e)}")
            mem = _memory(e)
            if mem:
                out.append(f"    {mem}")
            out.extend(f"    note: {n}" for n in e.notes)
        gpus = plan.layout.get(phase)
        if gpus:
            out.append("  GPUs as Ray's best fit fills them (Ray picks the GPU of each replica itself):")
            out.extend(f"    GPU {i}: {' + '.join(held) or 'idle'}" for i, held in enumerate(gpus))
    out.extend(f"refused: {r}" for r in plan.refusals)
    out.extend(f"note: {n}" for n in plan.notes)
    out.extend(f"warning: {w}" for w in plan.warnings)
    out.append("ok: nothing refused" if plan.ok else f"{len(plan.refusals)} refused: nothing was started")
    return out


def plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'s' if n != 1 else ''}"


def tokens_k(n: float) -> str:
    """A token count as people say it: 400000 -> '400K', 4100 -> '4.1K', 950 -> '950'."""
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}K" if n >= 1e3 else f"{n:.0f}"


def _where(e: EnginePlan) -> str:
    if e.where.startswith("external"):
        return e.where
    if e.where == "serve deployment":
        lo, hi = e.replicas or (1, 1)
        count = plural(lo, "replica") if lo == hi else f"{lo}-{hi} replicas"
        if e.device != "gpu":
            on = "CPU"
        elif e.gpu_fraction is not None:
            on = f"{e.gpu_fraction:g} of a GPU per replica"
        else:
            on = f"{plural(e.gpus, 'GPU')} per replica"
        return f"Serve deployment {e.serve.get('name')}, {count}, {on}"
    on = f"{plural(e.gpus, 'GPU')} of each worker" if e.device == "gpu" else "CPU"
    return f"in-process engine in each worker, {on}"


def _memory(e: EnginePlan) -> str:
    parts = []
    if e.params_b is not None:
        parts.append(f"{e.params_b:g}B parameters ({e.size_source})")
    if e.weights_gb is not None:
        parts.append(f"weights {e.weights_gb:.1f} GB {e.dtype}" + (f" ({e.weights_gb / e.tensor_parallel_size:.1f} per GPU, "
                                                                    f"tensor_parallel_size {e.tensor_parallel_size})"
                                                                    if e.tensor_parallel_size > 1 else ""))
    if e.kv_gb is not None:
        per = "replica" if e.where == "serve deployment" else "engine"
        seqs = f" = {e.kv_sequences:.1f} x {e.max_model_len:,}-token sequences" if e.kv_sequences is not None else ""
        tokens = f"{e.kv_tokens:,} tokens{seqs}" if e.kv_tokens is not None else "tokens unknown"
        parts.append(f"KV cache {e.kv_gb:.1f} GB per {per} ({tokens})")
    if e.gpu_memory_utilization is not None:
        parts.append(f"gpu_memory_utilization {e.gpu_memory_utilization:g}")
    return "; ".join(parts)
