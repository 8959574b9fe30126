"""Multi-LoRA from local folders (or hub subfolders) for ray.serve.llm.

ray.serve.llm's `lora_config.dynamic_lora_loading_path` only accepts cloud URIs (s3://, gs://, ...).
For local adapters (ESC-RANK's 7/14 judges, ESC-Role) we inject our own model downloader into
`LLMServer` (its documented dependency-injection hook). The downloader subclasses Ray's internal
`LoraModelLoader` and returns a `DiskMultiplexConfig` - internal APIs, so Ray is pinned (2.60.0).

Adapters reach the replica through the env var ESC_EVAL_LORA_ADAPTERS (JSON: base model id ->
{adapter name: local path | '<owner>/<repo>[/<subfolder>]'}), set in the deployment's runtime_env.
A request for model "base:adapter" selects the adapter.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ADAPTERS_ENV = "ESC_EVAL_LORA_ADAPTERS"


class UnknownAdapterError(KeyError):
    pass


def adapters_from_env(env: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    raw = (os.environ if env is None else env).get(ADAPTERS_ENV, "")
    return json.loads(raw) if raw else {}


def split_lora_model_id(lora_model_id: str) -> tuple[str, str]:
    base, sep, adapter = lora_model_id.rpartition(":")
    if not sep or not base or not adapter:
        raise UnknownAdapterError(f"LoRA model id {lora_model_id!r} must look like 'base:adapter'")
    return base, adapter


def resolve_adapter_path(source: str, cache_dir: str | None = None) -> str:
    """A local folder as is; otherwise '<owner>/<repo>[/<subfolder>]' fetched from the hub."""
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "adapter_config.json").is_file():
            raise UnknownAdapterError(f"{p} is not a PEFT adapter folder (no adapter_config.json)")
        return str(p)
    parts = source.strip("/").split("/")
    if source.startswith(("/", ".", "~")) or len(parts) < 2:
        raise UnknownAdapterError(f"adapter folder {source} does not exist")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover
        raise ImportError("fetching adapters from the hub needs huggingface_hub (pip install huggingface_hub)") from exc
    repo, sub = "/".join(parts[:2]), "/".join(parts[2:])
    root = snapshot_download(repo, allow_patterns=[f"{sub}/*"] if sub else None, cache_dir=cache_dir)
    return str(Path(root) / sub) if sub else root


def _loader_base():
    from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases

    ray_serve_llm_aliases()  # this module is the first to import Ray Serve LLM in a LoRA replica
    from ray.llm._internal.serve.utils.lora_serve_utils import LoraModelLoader

    return LoraModelLoader


class LocalLoraLoader(_loader_base()):  # type: ignore[misc]
    """LoraModelLoader that resolves 'base:adapter' to a local folder instead of a cloud bucket."""

    async def load_model_from_config(self, lora_model_id: str, llm_config):
        from ray.llm._internal.serve.core.configs.llm_config import DiskMultiplexConfig
        from ray.llm._internal.serve.utils.lora_serve_utils import global_id_manager

        if lora_model_id in self.disk_cache:
            return self.disk_cache[lora_model_id]
        base, adapter = split_lora_model_id(lora_model_id)
        known = adapters_from_env().get(base, {})
        if adapter not in known:
            raise UnknownAdapterError(
                f"No adapter found: {adapter!r} for model {base!r}; known: {', '.join(sorted(known)) or 'none'}")
        path = resolve_adapter_path(known[adapter])
        max_len = (llm_config.engine_kwargs or {}).get("max_model_len")
        cfg = DiskMultiplexConfig.model_validate({
            "model_id": lora_model_id, "max_total_tokens": max_len, "local_path": path,
            "lora_assigned_int_id": global_id_manager.next(),
        })
        self.disk_cache[lora_model_id] = cfg
        return cfg


def _server_base():
    from esc_eval.serve.app.server import LLMServer  # ray.serve.llm's, naming its engine's cause on a failed start

    return LLMServer


class LocalLoraLLMServer(_server_base()):  # type: ignore[misc]
    """LLMServer whose LoRA adapters come from local folders (see module docstring)."""

    async def __init__(self, llm_config, *, engine_cls=None, model_downloader=None):
        await super().__init__(llm_config, engine_cls=engine_cls, model_downloader=model_downloader or LocalLoraLoader)
