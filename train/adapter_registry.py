"""The registry entry a training job leaves beside its adapters, for serve/ to load.

Two files in the job's output folder:
  registry_entry.json  {name, kind: role|judge, base, adapters: {adapter: path}, layout,
                        max_lora_rank, created_at, ...} (AdapterRegistryEntry)
  model_paths.yaml     {"<name>": base, "<name>:<adapter>": path} — the override format of
                        serve.registry.registry (ESC_EVAL_MODEL_PATHS_FILE=model_paths.yaml points the
                        registry's esc-role / esc-rank entries at the trained weights).
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from esc_eval.serve.registry.entry import vllm_lora_rank

ENTRY_FILE = "registry_entry.json"
PATHS_FILE = "model_paths.yaml"


class AdapterRegistryEntry(BaseModel):
    """Trained LoRA adapters over one base model."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Registry name (esc-role, esc-rank).")
    kind: Literal["role", "judge"] = Field(description="role: the seeker simulator; judge: ESC-RANK.")
    base: str = Field(description="Base model folder the adapters were trained on.")
    adapters: dict[str, str] = Field(description="Adapter name -> PEFT adapter folder.")
    layout: Literal["single", "per_dimension", "multitask"] = Field(description="How adapters map to dimensions.")
    max_lora_rank: int = Field(description="Largest LoRA rank among the adapters (vLLM max_lora_rank).")
    created_at: str = Field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(),
                            description="When the entry was written (UTC).")
    extra: dict[str, Any] = Field(default_factory=dict, description="Training summary (steps, metrics, config).")

    def chat_model_spec(self) -> str:
        return f"vllm/{self.base}"

    def chat_model(self, **engine_kwargs: Any):
        """A vLLM ChatModel serving the base with every adapter (`chat(..., adapter=name)`)."""
        from esc_eval.serve.chat.interface import get_chat_model

        adapters = {k: Path(v) for k, v in self.adapters.items()}
        return get_chat_model(self.chat_model_spec(), adapters=adapters,
                              max_lora_rank=vllm_lora_rank([self.max_lora_rank]), **engine_kwargs)


def write_registry_entry(out_dir: Path, entry: AdapterRegistryEntry) -> Path:
    """Write registry_entry.json and model_paths.yaml into out_dir; returns the entry path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ENTRY_FILE
    path.write_text(json.dumps(entry.model_dump(), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    paths = {entry.name: entry.base, **{f"{entry.name}:{k}": v for k, v in entry.adapters.items()}}
    (out_dir / PATHS_FILE).write_text(yaml.safe_dump(paths, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def load_registry_entry(path: str | Path) -> AdapterRegistryEntry:
    """Read an entry (a registry_entry.json, or the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / ENTRY_FILE
    return AdapterRegistryEntry.model_validate_json(path.read_text(encoding="utf-8"))
