"""Sizes the planner works with: one model's engine (its facts and options), the dtype it runs in,
its weights, context length and KV cache, and the tensor-parallel checks."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from esc_eval.serve.registry.size import ModelFacts, dtype_bytes
from esc_eval.serve.plan.model import GB, EnginePlan, PlacementConfig, Plan


@dataclass
class Engine:
    """One engine the run needs: the configured models naming the same weights with the same options."""

    key: str
    facts: ModelFacts
    options: dict[str, Any]
    refs: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    phases: set[str] = field(default_factory=set)
    models: list[str] = field(default_factory=list)  # as configured

    def overrides(self, placement: PlacementConfig) -> dict[str, Any]:
        """placement.models fields for this engine (under any of the names it is configured by)."""
        return next((placement.models[m] for m in self.models if m in placement.models), {})


def display_name(e: Engine) -> str:
    """How a plan names an engine: its registry name, a local folder's name, else the spec."""
    if e.facts.entry is None and e.facts.weights and e.facts.weights != "embedded":
        from pathlib import Path

        p = Path(e.facts.weights).expanduser()
        if p.is_dir():
            return p.name
    return e.facts.name


def engine_key(facts: ModelFacts, model: str, options: dict[str, Any]) -> str:
    # Models naming the same weights with the same options share one engine (sim/pool/participants.py does the same).
    return (facts.weights or facts.name if facts.backend == "vllm" else model) + "|" + json.dumps(
        options, sort_keys=True, default=str)


def tensor_parallel(options: dict[str, Any], overrides: dict[str, Any]) -> int:
    return int(overrides.get("tensor_parallel_size") or options.get("tensor_parallel_size") or 1)


def resolved_dtype(options: dict[str, Any], gpu: bool, cpu_dtype: str) -> str:
    requested = str(options.get("dtype") or "auto")
    return ("bfloat16" if gpu else cpu_dtype) if requested == "auto" else requested


def weights_bytes(e: Engine, dtype: str) -> float | None:
    f = e.facts
    if f.weights_bytes_stored and f.stored_dtype_bytes:
        return f.weights_bytes_stored * (dtype_bytes(dtype) or 2) / f.stored_dtype_bytes
    if f.size is not None:
        return f.size.params_b * 1e9 * (dtype_bytes(dtype) or 2)
    return None


def max_model_len(e: Engine, overrides: dict[str, Any], default: int) -> int:
    """The context an engine runs with: configured, else the registry's, else `default`, never over
    what the model's own config.json allows (vLLM refuses a longer one)."""
    entry = e.facts.entry
    value = int(overrides.get("max_model_len") or e.options.get("max_model_len") or (entry.max_model_len if entry else None)
                or default)
    configured = overrides.get("max_model_len") or e.options.get("max_model_len")
    if e.facts.max_position_embeddings and not configured:
        value = min(value, e.facts.max_position_embeddings)
    return value


def kv_rate(e: Engine, dtype: str | None) -> float | None:
    """KV-cache bytes one token takes (all GPUs of the engine together); None when the shape is unknown."""
    return float(e.facts.size.kv_bytes_per_token(dtype_bytes(dtype) or 2)) if e.facts.size else None


def set_sizes(p: EnginePlan, f: ModelFacts, weights: float | None, dtype: str) -> None:
    p.size_source, p.dtype = f.size_source, dtype
    p.params_b = f.size.params_b if f.size else None
    p.weights_gb = round(weights / GB, 2) if weights is not None else None


def set_kv(p: EnginePlan, f: ModelFacts, kv_bytes: float, dtype: str | None) -> None:
    p.kv_gb = round(kv_bytes / GB, 2)
    if f.size is not None:
        p.kv_tokens = int(kv_bytes // f.size.kv_bytes_per_token(dtype_bytes(dtype) or 2))
        if p.max_model_len:
            p.kv_sequences = round(p.kv_tokens / p.max_model_len, 1)


def gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def describe(e: Engine, weights: float | None, dtype: str) -> str:
    size = f"{e.facts.size.params_b:g}B parameters, " if e.facts.size else ""
    return f"{e.facts.name} ({size}{gb(weights)} in {dtype})" if weights is not None else e.facts.name


def tp_refusal(e: Engine, tp: int, holder: str, holder_gpus: float) -> str | None:
    """Why the GPUs (or the model's heads) cannot take this tensor-parallel size; None when they can."""
    size = e.facts.size
    if tp > holder_gpus:
        return f"model {e.facts.name}: tensor_parallel_size {tp} needs {tp} GPUs; {holder} has {holder_gpus:g}"
    if size is not None and size.attention_heads % tp:
        return (f"model {e.facts.name}: tensor_parallel_size {tp} does not divide its {size.attention_heads} "
                f"attention heads (vLLM refuses it); use a divisor of {size.attention_heads}")
    return None


def refuse_tp(plan: Plan, e: Engine, tp: int, holder: str, holder_gpus: float) -> bool:
    """Refuse a tensor-parallel size the GPUs cannot hold; True when refused."""
    why = tp_refusal(e, tp, holder, holder_gpus)
    if why:
        plan.refusals.append(why)
    return why is not None


def fewest_gpus(e: Engine, fits: Any, most: int) -> int | None:
    """The smallest tensor-parallel size (a divisor of the model's heads, at most `most`) for which
    `fits(tp)` holds; None when none does."""
    heads = e.facts.size.attention_heads if e.facts.size else 1
    for tp in range(1, max(most, 1) + 1):
        if heads % tp == 0 and fits(tp):
            return tp
    return None
