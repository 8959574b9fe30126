"""What a model in a run is actually called with: its adapter and its effective generation
parameters, from the registry entry, the run's profile and the config's explicit fields.

Precedence, field by field: registry `generation` (the model's defaults, e.g. 512 new tokens,
Llama-3 256) -> the profile -> the fields the config sets explicitly (pydantic `model_fields_set`).

Profiles:
  greedy   temperature 0 for every call (the paper: "the temperature for all models was set to 0").
  release  what the released evaluate.py did: the registry's caps (512 new tokens; Llama-3 256),
           and for entries with release_decoding 'generation_config' (Qwen, ESC-Role) the
           sampling defaults of the model folder's generation_config.json where it samples
           (do_sample true), as HF `generate()` applied them; 'greedy' entries (Llama-3:
           do_sample=False) decode greedily. generation_config.json is only readable for local
           folders; other models keep the registry's values (recorded in the manifest).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.entry import ModelEntry, default_adapter
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import default_registry, is_spec

Profile = Literal["release", "greedy"]
PROFILES: tuple[str, ...] = ("release", "greedy")


def registry_entry(ref: ModelRef) -> ModelEntry | None:
    """The registry entry behind a model reference (None for a backend spec)."""
    return None if is_spec(ref.model) else default_registry().get(ref.model)


def effective_adapter(ref: ModelRef) -> str | None:
    """The adapter every call of `ref` uses: the one the config names, else the registry entry's
    own (ESC-Role's LoRA), so naming the entry is enough to get the published model."""
    if ref.adapter:
        return ref.adapter
    entry = registry_entry(ref)
    return default_adapter(entry) if entry is not None else None


def hf_sampling_defaults(folder: str | Path | None) -> dict[str, Any]:
    """The sampling fields of a local model folder's generation_config.json when it samples
    (do_sample true): what HF generate() used by default. {} when greedy, absent or not local."""
    if not folder:
        return {}
    path = Path(folder).expanduser() / "generation_config.json"
    try:
        gc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(gc, dict) or not gc.get("do_sample"):
        return {}
    out: dict[str, Any] = {"temperature": float(gc.get("temperature", 1.0))}
    for key, cast in (("top_p", float), ("top_k", int), ("repetition_penalty", float)):
        if gc.get(key) is not None:
            out[key] = cast(gc[key])
    return out


def effective_params(ref: ModelRef, profile: Profile = "greedy") -> GenerationParams:
    """The parameters every call of `ref` uses (the seed is set per dialogue by the caller)."""
    entry = registry_entry(ref)
    base = entry.generation if entry is not None else GenerationParams()
    fields: dict[str, Any] = base.model_dump()
    if profile == "greedy":
        fields.update(temperature=0.0, top_p=1.0, top_k=None, repetition_penalty=None)
    elif profile == "release":
        if entry is not None and entry.release_decoding == "greedy":
            fields.update(temperature=0.0, top_p=1.0, top_k=None, repetition_penalty=None)
        elif entry is not None:
            fields.update(hf_sampling_defaults(entry.weights))
    else:
        raise ValueError(f"unknown generation profile {profile!r}; known: {', '.join(PROFILES)}")
    fields.update({k: getattr(ref.params, k) for k in ref.params.model_fields_set})
    return GenerationParams(**fields)


def samples(params: GenerationParams) -> bool:
    """True when calls with these parameters draw samples (a seed changes their answers)."""
    return params.temperature > 0
