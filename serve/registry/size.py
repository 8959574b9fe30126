"""What the planner knows about a configured model without loading it: its backend, registry
entry, weights and size (parameters and attention shape) from the registry's `size` or a local
weights folder's config.json and weight files (serve/plan/planner.py sizes GPU memory from these)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from esc_eval.serve.chat.interface import UnknownModelError
from esc_eval.serve.registry.entry import ModelEntry, ModelSize
from esc_eval.serve.registry.registry import Registry, is_spec


@dataclass
class ModelFacts:
    """What the planner knows about one configured model."""

    name: str  # registry name, or the spec when not in the registry
    backend: str
    entry: ModelEntry | None = None
    weights: str | None = None  # local folder or hub id (vllm/)
    size: ModelSize | None = None
    size_source: str = "unknown"
    weights_bytes_stored: int | None = None  # sum of a local folder's weight files
    stored_dtype_bytes: int | None = None
    max_position_embeddings: int | None = None  # a local folder's context limit (vLLM refuses a longer max_model_len)
    error: str | None = None


def registry_entry_for_spec(spec: str, registry: Registry) -> ModelEntry | None:
    for entry in registry.models.values():
        if entry.spec == spec and "{" not in entry.spec:
            return entry
    return None


def dtype_bytes(name: str | None) -> int | None:
    return {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}.get(str(name or "").replace("torch.", ""))


WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
PATH_PREFIXES = ("/", "~", "./", "../")  # a vllm/ spec naming a folder, not a hub id


def read_config_json(folder: str | Path) -> dict | None:
    """A model folder's config.json (its text_config for multimodal wrappers); None when unreadable."""
    try:
        cfg = json.loads((Path(folder).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    return cfg.get("text_config", cfg) if isinstance(cfg.get("text_config"), dict) else cfg


def folder_problem(folder: str | Path) -> str | None:
    """Why a local weights folder cannot be served (one line), or None."""
    p = Path(folder).expanduser()
    if not p.is_dir():
        return f"local folder {folder} does not exist"
    if not (p / "config.json").is_file():
        return f"local folder {folder} has no config.json (not a model folder)"
    if read_config_json(p) is None:
        return f"local folder {folder}: config.json is not a JSON object"
    if not any(next(p.glob(pat), None) for pat in WEIGHT_PATTERNS):
        return f"local folder {folder} has no weight files ({' or '.join(WEIGHT_PATTERNS)})"
    return None


def size_from_config_json(folder: str | Path) -> tuple[ModelSize | None, int | None, int | None]:
    """(size, bytes of the weight files, bytes per stored parameter) from a local model folder."""
    folder = Path(folder).expanduser()
    cfg = read_config_json(folder)
    if cfg is None:
        return None, None, None
    layers = cfg.get("num_hidden_layers") or cfg.get("num_layers") or cfg.get("n_layer")
    heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    hidden = cfg.get("hidden_size") or cfg.get("n_embd")
    kv = cfg.get("num_key_value_heads") or (cfg.get("multi_query_group_num") if cfg.get("multi_query_attention") else None) or heads
    head_dim = cfg.get("head_dim") or cfg.get("kv_channels") or (hidden // heads if hidden and heads else None)
    files = [p for pat in WEIGHT_PATTERNS for p in folder.glob(pat)]
    stored = sum(p.stat().st_size for p in files) or None
    stored_dtype = dtype_bytes(cfg.get("dtype") or cfg.get("torch_dtype"))
    if not (layers and heads and kv and head_dim):
        return None, stored, stored_dtype
    params = round((stored / (stored_dtype or 2)) / 1e9, 6) if stored else None
    if not params:
        return None, stored, stored_dtype
    return (ModelSize(params_b=params, layers=int(layers), attention_heads=int(heads), kv_heads=int(kv),
                      head_dim=int(head_dim)), stored, stored_dtype)


def model_facts(model: str, registry: Registry) -> ModelFacts:
    """Backend, registry entry, weights and size of a configured model (never loads anything)."""
    if is_spec(model):
        backend, _, rest = model.partition("/")
        if backend != "vllm":
            return ModelFacts(name=model, backend=backend)
        entry = registry_entry_for_spec(model, registry)
        facts = ModelFacts(name=entry.name if entry else model, backend="vllm", entry=entry,
                           weights=(entry.weights if entry else rest))
    else:
        try:
            entry = registry.get(model)
        except UnknownModelError as e:
            return ModelFacts(name=model, backend="?", error=str(e))
        backend = entry.spec.partition("/")[0]
        facts = ModelFacts(name=entry.name, backend=backend, entry=entry, weights=entry.weights)
        if backend == "vllm" and entry.weights is None:
            facts.error = f"model {entry.name!r} has no public weights ({entry.note or 'source is unset'}); give a local folder"
    if facts.backend != "vllm" or facts.error:
        return facts
    w = facts.weights
    # a folder given in the config must be here; a registry entry's local_path may be on the cluster's
    # nodes only (planned from the registry's size until then)
    named = facts.entry is None and str(w).startswith(PATH_PREFIXES)
    local = bool(w) and w != "embedded" and (Path(w).expanduser().is_dir() or named)
    if local:
        facts.error = folder_problem(w)
        if facts.error:
            return facts
        size, stored, stored_dtype = size_from_config_json(w)
        facts.weights_bytes_stored, facts.stored_dtype_bytes = stored, stored_dtype
        cfg = read_config_json(w) or {}
        limit = cfg.get("max_position_embeddings") or cfg.get("seq_length") or cfg.get("n_positions")
        facts.max_position_embeddings = int(limit) if isinstance(limit, int) and limit > 0 else None
        if size is not None:
            facts.size, facts.size_source = size, "config.json"
    if facts.size is None and facts.entry is not None and facts.entry.size is not None:
        facts.size, facts.size_source = facts.entry.size, "registry"
    return facts
