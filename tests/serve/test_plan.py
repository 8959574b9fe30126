"""The planner (serve/plan.py): pure, so every GPU case is planned here on a CPU machine."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.model_size import size_from_config_json
from esc_eval.serve.plan import GB, Hardware, ModelUse, PlacementConfig, Plan, PlanError, hardware_for, plan_run, ref_key
from esc_eval.serve.registry import load_registry

SIM = [ModelUse("esc-role", {}, "role"), ModelUse("qwen1.5-7b-chat", {}, "target"),
       ModelUse("llama-3-8b-instruct", {}, "target"), ModelUse("gpt-4", {}, "target")]
A10G_NODES = hardware_for(8, None, 4, "A10G")
ROLE_TP2 = PlacementConfig(models={"esc-role": {"tensor_parallel_size": 2}})


def _by_name(plan: Plan):
    return {e.name: e for e in plan.engines}


def test_serve_is_the_default_with_gpus_and_each_model_gets_its_own_gpus():
    plan = plan_run(SIM, A10G_NODES, ROLE_TP2)
    assert plan.ok and plan.mode == "serve", plan.refusals
    e = _by_name(plan)
    assert e["gpt-4"].where == "external (openai)" and e["gpt-4"].gpus == 0
    role = e["esc-role"]
    assert role.where == "serve deployment" and role.gpus == 2 and role.serve["tensor_parallel_size"] == 2
    assert role.weights_gb == pytest.approx(14.17 * 2, abs=0.01)  # bfloat16, from the registry's size
    # per GPU: 0.92 x 24 GB - 28.34/2 GB weights - 2 GB overhead, on 2 GPUs; 40 layers x 40 KV heads x 128 x 2 x 2 B
    kv = (0.92 * 24 - 28.34 / 2 - 2) * 2 * GB
    assert role.kv_gb == pytest.approx(kv / GB, abs=0.01) and role.kv_tokens == int(kv // (2 * 40 * 40 * 128 * 2))
    assert role.kv_sequences == pytest.approx(role.kv_tokens / 8192, abs=0.05)
    assert e["llama-3-8b-instruct"].kv_tokens > 3 * e["qwen1.5-7b-chat"].kv_tokens  # GQA: 8 KV heads against 32
    mapping = plan.placement_map()
    assert mapping[ref_key("esc-role", {})] == {"serve": {"spec": "serve/esc-role", "options": {"app_name": "esc-eval-run"}}}
    assert ref_key("gpt-4", {}) not in mapping  # external: built as configured


def test_cpu_runs_stay_in_process_with_nothing_added():
    plan = plan_run([ModelUse("vllm/embedded", {}, "role"), ModelUse("vllm/embedded", {}, "target"),
                     ModelUse("vllm/embedded", {}, "judge", "scoring")], Hardware(), cpu_kv_cache_gib=2)
    assert plan.ok and plan.mode == "in_process"
    (e,) = plan.engines  # role, target and judge share one engine
    assert e.uses == ["role", "target", "judge"] and e.device == "cpu" and e.engine == {}
    assert plan.placement_map() == {}  # the workers build it exactly as before
    assert e.kv_tokens == 2 * 2**30 // (2 * 30 * 3 * 64 * 4)  # float32 on this plan's CPU


@pytest.mark.parametrize("hardware, placement, refusal", [
    # a model too large for the GPUs given
    (hardware_for(8, 24, 4), PlacementConfig(), r"^model esc-role \(14\.17B parameters, 28\.3 GB in bfloat16\) does not "
     r"fit on 1 x 24 GB GPU \(22\.1 GB usable per GPU .*\): raise placement\.models\.esc-role\.tensor_parallel_size \(now 1\)$"),
    # a tensor-parallel size a node cannot hold
    (hardware_for(8, 24, 1), ROLE_TP2, r"^model esc-role: tensor_parallel_size 2 needs 2 GPUs; a node has 1$"),
    # one the model's heads cannot take
    (hardware_for(8, 80, 8), PlacementConfig(models={"esc-role": {"tensor_parallel_size": 3}}),
     r"^model esc-role: tensor_parallel_size 3 does not divide its 40 attention heads"),
    # replicas the run's GPUs cannot start
    (hardware_for(2, 24, 2), ROLE_TP2, r"^the deployments' min_replicas need 4 GPUs \(esc-role 1 x 2, qwen1\.5-7b-chat 1 x 1, "
     r"llama-3-8b-instruct 1 x 1\); the run has 2$"),
    # GPUs of unknown memory
    (Hardware(gpus=4), PlacementConfig(), r"^the run has 4 GPUs of unknown memory"),
])
def test_refusals_are_one_line_each_before_anything_starts(hardware, placement, refusal):
    plan = plan_run(SIM, hardware, placement)
    assert not plan.ok
    assert any(__import__("re").search(refusal, r) for r in plan.refusals), plan.refusals
    assert all("\n" not in r for r in plan.refusals)
    with pytest.raises(PlanError) as e:
        plan.check()
    assert "\n" not in str(e.value) and str(e.value).startswith(plan.refusals[0])


def _adapter(tmp_path, name, rank):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank}))
    return str(folder)


def _local_adapters(tmp_path, ranks: dict[str, int] | None = None):
    """The registry with every adapter of esc-role and esc-rank in a local folder (rank 8 unless given)."""
    reg = load_registry()
    paths = [f"{m}:{a}={_adapter(tmp_path, f'{m}-{a}', (ranks or {}).get(a, 8))}"
             for m in ("esc-role", "esc-rank") for a in reg.get(m).adapters]
    return load_registry(env={"ESC_EVAL_MODEL_PATHS": ",".join(paths)})


def test_an_adapter_rank_over_max_lora_rank_is_refused(tmp_path):
    reg = _local_adapters(tmp_path, {"fluency": 64})
    judge = [ModelUse("esc-rank", {"max_lora_rank": 16}, "judge", "scoring")]
    plan = plan_run(judge, hardware_for(1, 80), PlacementConfig(mode="in_process"), gpus_per_worker=1, registry=reg)
    assert plan.refusals == ["model esc-rank: adapter 'fluency' has LoRA rank 64, over max_lora_rank 16 "
                             "(options.max_lora_rank); raise it to 64"]
    served = plan_run([ModelUse("esc-rank", {}, "judge", "scoring")], hardware_for(1, 80),
                      PlacementConfig(models={"esc-rank": {"max_lora_rank": 32}}), registry=reg)
    assert served.refusals == ["model esc-rank: adapter 'fluency' has LoRA rank 64, over max_lora_rank 32 "
                               "(placement.models.esc-rank.max_lora_rank); raise it to 64"]
    unset = plan_run([ModelUse("esc-rank", {}, "judge", "scoring")], hardware_for(1, 80), registry=reg)
    assert unset.ok and _by_name(unset)["esc-rank"].serve["max_lora_rank"] == 64  # sized from the adapters


def test_in_process_gpu_engines_share_a_worker_role_with_one_target_at_a_time(tmp_path):
    uses = SIM + [ModelUse("esc-rank", {}, "judge", "scoring")]
    reg = _local_adapters(tmp_path)
    plan = plan_run(uses, hardware_for(8, 80), PlacementConfig(mode="in_process"), workers=8, gpus_per_worker=1,
                    registry=reg)
    assert plan.ok and plan.mode == "in_process", plan.refusals
    e = _by_name(plan)
    role, qwen, llama, judge = (e[n].gpu_memory_utilization for n in ("esc-role", "qwen1.5-7b-chat", "llama-3-8b-instruct", "esc-rank"))
    assert role + qwen == pytest.approx(0.92, abs=0.002) and role + llama == pytest.approx(0.92, abs=0.002)
    assert judge == 0.92  # alone during scoring (the simulation's engines are released first)
    assert all(x.kv_tokens >= x.max_model_len for x in plan.engines if x.device == "gpu")
    assert plan.placement_map()[ref_key("esc-role", {})] == {"engine": {"gpu_memory_utilization": role}}
    # on 24 GB GPUs they cannot share a worker: one line naming both models, their sizes and the GPUs
    small = plan_run(SIM, hardware_for(8, 24), PlacementConfig(mode="in_process"), workers=8, gpus_per_worker=1,
                     registry=reg)
    assert any(r.startswith("models esc-role (28.3 GB weights on 1 GPU) and ") and "do not fit together" in r
               and "worker's 1 x 24 GB GPU" in r and "placement mode serve" in r for r in small.refusals), small.refusals


def test_in_process_tensor_parallelism_must_fit_the_workers_gpus(tmp_path):
    reg = _local_adapters(tmp_path)
    plan = plan_run([ModelUse("esc-role", {"tensor_parallel_size": 2}, "role")], hardware_for(4, 80),
                    PlacementConfig(mode="in_process"), workers=4, gpus_per_worker=1, registry=reg)
    assert "model esc-role: tensor_parallel_size 2 needs 2 GPUs; a worker has 1" in plan.refusals
    ok = plan_run([ModelUse("esc-role", {"tensor_parallel_size": 2}, "role")], hardware_for(4, 24),
                  PlacementConfig(mode="in_process"), workers=2, gpus_per_worker=2, registry=reg)
    assert ok.ok, ok.refusals
    assert ok.placement_map()[ref_key("esc-role", {"tensor_parallel_size": 2})]["engine"]["tensor_parallel_size"] == 2
    short = plan_run([ModelUse("vllm/embedded", {}, "role")], hardware_for(2, 24), PlacementConfig(mode="in_process"),
                     workers=4, gpus_per_worker=1)
    assert "execution.workers 4 x num_gpus_per_worker 1 need 4 GPUs; the run has 2" in short.refusals


def test_size_from_a_local_folder_wins_over_the_registry(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4,
                                                    "num_key_value_heads": 2, "hidden_size": 64, "dtype": "bfloat16"}))
    (folder / "model.safetensors").write_bytes(b"\0" * 20_000_000)  # 10M parameters in bfloat16
    size, stored, per = size_from_config_json(folder)
    assert (size.params_b, size.layers, size.kv_heads, size.head_dim, stored, per) == (0.01, 2, 2, 16, 20_000_000, 2)
    plan = plan_run([ModelUse(f"vllm/{folder}", {}, "target")], hardware_for(1, 24), PlacementConfig(mode="in_process"),
                    gpus_per_worker=1)
    (e,) = plan.engines
    assert e.size_source == "config.json" and e.weights_gb == pytest.approx(0.02)
    serve = plan_run([ModelUse(f"vllm/{folder}", {}, "target")], hardware_for(1, 24))
    assert serve.refusals[0].startswith(f"model vllm/{folder}: serve mode deploys registry models only")


def test_placement_config_rejects_what_the_plan_sets():
    with pytest.raises(ValueError, match="accelerator_type are set by the plan"):
        PlacementConfig(models={"esc-role": {"accelerator_type": "A10G"}})
    with pytest.raises(ValueError):
        PlacementConfig(models={"esc-role": {"min_replicas": 3, "max_replicas": 1}})  # ServeModelConfig's own check


def test_plan_prints_one_line_per_model_and_refusal():
    lines = plan_run(SIM, hardware_for(8, 24, 1), ROLE_TP2).lines()
    assert lines[0] == "plan: serve on 8 x A10G 24 GB GPUs, 1 per node" or lines[0].startswith("plan: serve on 8 x")
    assert any(line.startswith("- esc-role [role]: Serve deployment esc-role, 1-1 replicas, 2 GPUs per replica") for line in lines)
    assert lines[-1] == "1 refused: nothing was started"
