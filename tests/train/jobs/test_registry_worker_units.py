"""Registry entries serve/ can load, and the pure parts of the worker loop (batches, data order)."""
from __future__ import annotations

import pytest

from esc_eval.serve.registry.entry import VLLM_LORA_RANKS, vllm_lora_rank
from esc_eval.train.adapter_registry import AdapterRegistryEntry, load_registry_entry, write_registry_entry
from esc_eval.train.jobs.worker import collate, micro_batch


def test_registry_entry_roundtrip_and_serve_override_format(tmp_path):
    from esc_eval.serve.registry.registry import load_registry

    entry = AdapterRegistryEntry(name="esc-rank", kind="judge", base="/models/base",
                                 adapters={"fluency_en": "/out/fluency_en/adapter", "empathic": "/out/empathic/adapter"},
                                 layout="per_dimension", max_lora_rank=8)
    path = write_registry_entry(tmp_path, entry)
    assert load_registry_entry(tmp_path) == entry == load_registry_entry(path)
    assert entry.chat_model_spec() == "vllm//models/base"
    # model_paths.yaml is the override file of serve.registry.registry (ESC_EVAL_MODEL_PATHS_FILE)
    reg = load_registry(paths_file=tmp_path / "model_paths.yaml", env={})
    rank = reg.get("esc-rank")
    assert rank.adapters["fluency_en"] == "/out/fluency_en/adapter"
    assert rank.adapters["empathic"] == "/out/empathic/adapter"
    assert rank.local_path == "/models/base"


def test_vllm_lora_rank_is_one_rule_with_vllms_table():
    """One home (serve/registry/entry.py) for the trained adapters and the registry's alike."""
    import typing

    from vllm.config.lora import MaxLoRARanks

    assert VLLM_LORA_RANKS == typing.get_args(MaxLoRARanks)
    assert vllm_lora_rank([4]) == 8 and vllm_lora_rank([16]) == 16 and vllm_lora_rank([17, 4]) == 32
    assert vllm_lora_rank([1]) == 1
    with pytest.raises(ValueError, match="exceeds vLLM's largest max_lora_rank 512"):
        vllm_lora_rank([1000])


def test_collate_pads_right_with_ignored_labels():
    batch = collate([{"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}, {"input_ids": [8], "labels": [8]}], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 6, 7], [8, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_micro_batches_are_a_pure_function_of_the_index():
    shard = list(range(5))
    first_pass = [micro_batch(shard, i, 1, seed=3)[0] for i in range(5)]
    assert sorted(first_pass) == shard  # each pass visits every example once
    passes = [[micro_batch(shard, i, 1, seed=3)[0] for i in range(5 * k, 5 * k + 5)] for k in range(4)]
    assert passes[0] == first_pass and all(sorted(p) == shard for p in passes)
    assert len({tuple(p) for p in passes}) > 1  # reshuffled between passes
    assert micro_batch(shard, 7, 2, seed=3) == micro_batch(shard, 7, 2, seed=3)  # resume sees the same data
