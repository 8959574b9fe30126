"""The local multi-LoRA loader (resolves 'base:adapter' to a folder) - no Ray cluster needed."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases  # noqa: E402

ray_serve_llm_aliases()  # as serve/ does before importing Ray Serve LLM (an older vLLM: serve/engines/vllm_compat.py)
pytest.importorskip("ray.serve.llm")

from esc_eval.serve.app.lora import (  # noqa: E402
    ADAPTERS_ENV,
    LocalLoraLoader,
    UnknownAdapterError,
    resolve_adapter_path,
    split_lora_model_id,
)


class _Cfg:
    engine_kwargs = {"max_model_len": 2048}


async def test_loader_maps_adapter_to_local_folder(tmp_path, monkeypatch):
    ad = tmp_path / "fluency_en"
    ad.mkdir()
    (ad / "adapter_config.json").write_text("{}")
    monkeypatch.setenv(ADAPTERS_ENV, json.dumps({"esc-rank": {"fluency_en": str(ad)}}))
    loader = LocalLoraLoader()
    cfg = await loader.load_model_from_config("esc-rank:fluency_en", _Cfg())
    assert cfg.local_path == str(ad) and cfg.model_id == "esc-rank:fluency_en" and cfg.max_total_tokens == 2048
    again = await loader.load_model_from_config("esc-rank:fluency_en", _Cfg())
    assert again.lora_assigned_int_id == cfg.lora_assigned_int_id
    with pytest.raises(UnknownAdapterError, match="No adapter found: 'tech'.*known: fluency_en"):
        await loader.load_model_from_config("esc-rank:tech", _Cfg())


def test_adapter_path_checks(tmp_path):
    with pytest.raises(UnknownAdapterError, match="no adapter_config.json"):
        resolve_adapter_path(str(tmp_path))
    with pytest.raises(UnknownAdapterError, match="does not exist"):
        resolve_adapter_path(str(tmp_path / "missing"))
    with pytest.raises(UnknownAdapterError, match="base:adapter"):
        split_lora_model_id("no-adapter")
    assert split_lora_model_id("org/model:a") == ("org/model", "a")
