"""Serve app config generation (CPU and GPU, by config only), validated by Ray's own schemas."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.app.application import (
    CONSISTENT_HASH_ROUTER,
    PREFIX_CACHE_ROUTER,
    ServeConfig,
    ServeConfigError,
    ServeModelConfig,
    build_app_args,
    build_llm_configs,
    serve_config_dict,
    write_serve_config,
)

from esc_eval.serve.devices.cpu import best_dtype
from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases

ray_serve_llm_aliases()  # as serve/ does before importing Ray Serve LLM (an older vLLM: serve/engines/vllm_compat.py)
llm = pytest.importorskip("ray.serve.llm")


def _cfg(**kw):
    return ServeConfig(models=[ServeModelConfig(name="embedded", model_source="/models/smol", **kw)])


def test_cpu_llm_config_matches_the_recipe(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)  # the default where the process has none
    (c,) = build_llm_configs(_cfg(min_replicas=1, max_replicas=3, target_ongoing_requests=8))
    lc = llm.LLMConfig.model_validate(c)
    assert lc.accelerator_config.kind == "cpu" and lc.accelerator_type is None
    from esc_eval.serve.devices.cpu import kv_block_size

    block = {"block_size": kv_block_size()} if kv_block_size() else {}  # 32 unless the CPU has AMX
    assert lc.engine_kwargs == {"max_model_len": 2048, "max_num_seqs": 32, "enforce_eager": True, "dtype": best_dtype(), **block}
    assert lc.runtime_env == {"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "2"}}
    assert lc.model_id == "embedded" and lc.model_loading_config.model_source == "/models/smol"
    auto = lc.deployment_config["autoscaling_config"]
    assert (auto["min_replicas"], auto["max_replicas"], auto["target_ongoing_requests"]) == (1, 3, 8)
    router = lc.deployment_config["request_router_config"]
    assert router["request_router_class"] == CONSISTENT_HASH_ROUTER
    assert lc.server_cls.__name__ == "LLMServer" and lc.server_cls.__module__ == "esc_eval.serve.app.server"
    assert lc.lora_config is None


def test_router_classes_import():
    from ray.llm._internal.common.utils.import_utils import load_class

    assert load_class(CONSISTENT_HASH_ROUTER).__name__ == "ConsistentHashRouter"
    assert load_class(PREFIX_CACHE_ROUTER).__name__ == "PrefixCacheAffinityRouter"
    (c,) = build_llm_configs(_cfg(routing="prefix_cache"))
    assert c["deployment_config"]["request_router_config"]["request_router_class"] == PREFIX_CACHE_ROUTER
    (c,) = build_llm_configs(_cfg(routing="default"))
    assert "request_router_config" not in c["deployment_config"]


def test_ingress_gets_zero_cpus_on_cpu_and_default_on_gpu():
    args = build_app_args(_cfg())
    assert args["ingress_deployment_config"] == {"ray_actor_options": {"num_cpus": 0}}
    llm.LLMServingArgs.model_validate(args)
    gpu = ServeConfig(models=[ServeModelConfig(name="qwen1.5-7b-chat", accelerator="gpu", accelerator_type="A10G",
                                               tensor_parallel_size=2)])
    assert "ingress_deployment_config" not in build_app_args(gpu)


def test_gpu_config_only():
    cfg = ServeConfig(models=[ServeModelConfig(name="llama-3-8b-instruct", accelerator="gpu", accelerator_type="L4",
                                               tensor_parallel_size=2, max_replicas=4)])
    (c,) = build_llm_configs(cfg)
    lc = llm.LLMConfig.model_validate(c)
    assert lc.accelerator_type == "L4" and lc.accelerator_config.kind == "gpu"
    assert lc.engine_kwargs["tensor_parallel_size"] == 2
    # compiled (CUDA graphs: no enforce_eager), bfloat16, the tensor-parallel ranks placed by ray.serve.llm
    assert "enforce_eager" not in lc.engine_kwargs and lc.engine_kwargs["dtype"] == "bfloat16"
    assert "distributed_executor_backend" not in lc.engine_kwargs and "block_size" not in lc.engine_kwargs
    assert lc.engine_kwargs["max_model_len"] == 8192  # from the registry
    assert lc.model_loading_config.model_source == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert "runtime_env" not in c  # no VLLM_CPU_KVCACHE_SPACE on GPU
    with pytest.raises(ValueError, match="accelerator: gpu"):
        ServeModelConfig(name="x", accelerator_type="A10G")


def test_lora_models_get_local_loader_and_adapters():
    cfg = ServeConfig(models=[ServeModelConfig(name="esc-rank", model_source="/m/internlm2", max_loras=4)])
    (c,) = build_llm_configs(cfg)
    lc = llm.LLMConfig.model_validate(c)
    assert lc.server_cls.__name__ == "LocalLoraLLMServer"
    assert lc.lora_config.max_num_adapters_per_replica == 14
    assert lc.engine_kwargs["enable_lora"] and lc.engine_kwargs["max_loras"] == 4
    assert lc.engine_kwargs["trust_remote_code"] is True
    adapters = json.loads(lc.runtime_env["env_vars"]["ESC_EVAL_LORA_ADAPTERS"])
    assert adapters["esc-rank"]["empathic_en"] == "haidequanbu/ESC-RANK/empathic_en"


def test_non_vllm_or_weightless_models_are_refused():
    with pytest.raises(ServeConfigError, match="models.gpt-4.*not a vLLM model"):
        build_llm_configs(ServeConfig(models=[ServeModelConfig(name="gpt-4")]))
    with pytest.raises(ServeConfigError, match="models.extes-llama: no public weights"):
        build_llm_configs(ServeConfig(models=[ServeModelConfig(name="extes-llama")]))


def test_serve_config_file_validates_against_serve_schema(tmp_path):
    from ray.serve.schema import ServeDeploySchema

    path = write_serve_config(_cfg(), tmp_path / "serve.yaml")
    import yaml

    data = yaml.safe_load(path.read_text())
    schema = ServeDeploySchema.model_validate(data)
    assert schema.http_options.host == "127.0.0.1" and schema.http_options.port == 8000
    (app,) = schema.applications
    assert app.import_path == "ray.serve.llm:build_openai_app" and app.name == "esc-eval"
    llm.LLMServingArgs.model_validate(app.args)
    assert data == serve_config_dict(_cfg())


def test_serve_config_yaml_errors_name_the_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("models:\n  - name: embedded\n    max_replicas: 0\n")
    with pytest.raises(ServeConfigError, match=r"models\.0\.max_replicas"):
        ServeConfig.from_yaml(p)
    p.write_text("models:\n  - name: embedded\n    replicas: 2\n")
    with pytest.raises(ServeConfigError, match=r"models\.0\.replicas.*Extra inputs"):
        ServeConfig.from_yaml(p)
    p.write_text("modles: []\n")
    with pytest.raises(ServeConfigError, match="modles"):
        ServeConfig.from_yaml(p)


def test_unknown_registry_model_is_named():
    from esc_eval.serve.chat.interface import UnknownModelError

    with pytest.raises(UnknownModelError, match="'qwen-7b'.*did you mean"):
        build_llm_configs(ServeConfig(models=[ServeModelConfig(name="qwen-7b")]))


def test_replica_cpus_sets_the_whole_reservation_in_one_bundle():
    (c,) = build_llm_configs(_cfg(replica_cpus=0.5))
    lc = llm.LLMConfig.model_validate(c)
    # the engine bundle carries it all; the server actor adds nothing (ray.serve.llm merges the two)
    assert lc.placement_group_config == {"bundles": [{"CPU": 0.5}]}
    assert lc.deployment_config["ray_actor_options"] == {"num_cpus": 0}
    (default,) = build_llm_configs(_cfg())
    assert "placement_group_config" not in default and "ray_actor_options" not in default["deployment_config"]


def test_kv_cache_space_is_a_whole_number_of_gib():
    # vLLM parses VLLM_CPU_KVCACHE_SPACE with int(): "0.5" failed every replica at start
    with pytest.raises(ValueError):
        ServeConfig(kv_cache_gib=0.5, models=[ServeModelConfig(name="embedded")])
    (c,) = build_llm_configs(ServeConfig(kv_cache_gib=3, models=[ServeModelConfig(name="embedded", model_source="/m")]))
    assert c["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"] == "3"


def test_kv_cache_space_defaults_to_the_processs_own(monkeypatch):
    """A user who exported VLLM_CPU_KVCACHE_SPACE gets it in the replicas and pool workers, not 2 GiB."""
    from esc_eval.sim.pool.config import ExecutionConfig

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "5")
    (c,) = build_llm_configs(_cfg())
    assert c["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"] == "5"
    assert ExecutionConfig().env == {"VLLM_CPU_KVCACHE_SPACE": "5"}
    assert ServeConfig(kv_cache_gib=3, models=[ServeModelConfig(name="embedded")]).kv_cache_gib == 3  # asked: kept
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
    assert _cfg().kv_cache_gib == 2 and ExecutionConfig().env == {"VLLM_CPU_KVCACHE_SPACE": "2"}
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "5")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "0.5")  # what vLLM would refuse at every engine start
    with pytest.raises(ValueError, match=r"VLLM_CPU_KVCACHE_SPACE='0.5': a whole number of GiB"):
        ExecutionConfig()


def test_a_users_kv_cache_space_reaches_every_kind_of_engine(monkeypatch):
    """Every engine esc-eval starts takes the user's VLLM_CPU_KVCACHE_SPACE (issue 52): the in-process
    engine, pool workers (simulate, score, the demo), Serve replicas (serve up, the plan's Serve mode),
    `bench serve --routing`'s replicas and the card build's Ray task; unset, each takes the one default."""
    import os

    from esc_eval.serve.devices.cpu import DEFAULT_KV_CACHE_GIB
    from esc_eval.serve.engines.args import cpu_kv_cache_env
    from esc_eval.sim.bench.serve.bench import ServeBenchConfig
    from esc_eval.sim.bench.serve.routing import routing_config
    from esc_eval.sim.cardbuild.pipeline import task_env
    from esc_eval.sim.jobs.demo import demo_config

    def sizes() -> dict[str, str]:
        demo = demo_config(2)
        (replica,) = build_llm_configs(_cfg())
        (routed,) = build_llm_configs(routing_config("session", "embedded", 2))
        bench = ServeBenchConfig(model="embedded", routing=["session"])
        (bench_replica,) = build_llm_configs(routing_config("session", "embedded", 2, bench.kv_cache_gib))
        cpu_kv_cache_env()
        return {"in-process": os.environ["VLLM_CPU_KVCACHE_SPACE"],
                "demo simulation": demo.simulation.execution.env["VLLM_CPU_KVCACHE_SPACE"],
                "demo scoring": demo.scoring.execution.env["VLLM_CPU_KVCACHE_SPACE"],
                "serve replica": replica["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"],
                "routing replica": routed["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"],
                "bench serve replica": bench_replica["runtime_env"]["env_vars"]["VLLM_CPU_KVCACHE_SPACE"],
                "card build task": task_env()["VLLM_CPU_KVCACHE_SPACE"]}

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "5")
    assert set(sizes().values()) == {"5"}, sizes()
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
    assert set(sizes().values()) == {str(DEFAULT_KV_CACHE_GIB)}, sizes()


def test_template_override_reaches_vllm_frontend_as_text():
    (c,) = build_llm_configs(ServeConfig(models=[ServeModelConfig(name="vicuna-7b-v1.5", model_source="/models/v")]))
    assert "USER:" in c["engine_kwargs"]["chat_template"]  # the text, so no node needs the package path
    lc = llm.LLMConfig.model_validate(c)
    assert lc.engine_kwargs["chat_template"].startswith("{#- FastChat")
    (plain,) = build_llm_configs(_cfg())
    assert "chat_template" not in plain["engine_kwargs"]


@pytest.mark.filterwarnings("ignore:The `metrics_interval_s`:DeprecationWarning")  # Ray still reads it in 2.60
def test_gpu_replica_memory_share_and_autoscaling_delays_reach_ray():
    from ray.serve.config import AutoscalingConfig

    cfg = ServeConfig(models=[ServeModelConfig(
        name="qwen1.5-7b-chat", accelerator="gpu", tensor_parallel_size=2, gpu_memory_utilization=0.85, min_replicas=1,
        max_replicas=2, upscale_delay_s=0, downscale_delay_s=5, look_back_period_s=2, metrics_interval_s=0.5)])
    (c,) = build_llm_configs(cfg)
    lc = llm.LLMConfig.model_validate(c)
    assert lc.engine_kwargs["gpu_memory_utilization"] == 0.85 and lc.engine_kwargs["tensor_parallel_size"] == 2
    auto = AutoscalingConfig.model_validate(lc.deployment_config["autoscaling_config"])  # Ray's own schema
    assert (auto.min_replicas, auto.max_replicas, auto.upscale_delay_s, auto.downscale_delay_s, auto.look_back_period_s) == (
        1, 2, 0, 5, 2)
    (cpu_cfg,) = build_llm_configs(_cfg())  # unset delays stay Serve's defaults
    assert set(cpu_cfg["deployment_config"]["autoscaling_config"]) == {"min_replicas", "max_replicas", "target_ongoing_requests"}
    with pytest.raises(ValueError, match="gpu_memory_utilization need accelerator: gpu"):
        ServeModelConfig(name="x", gpu_memory_utilization=0.5)


def _planned(model_folder, *targets):
    """ESC-Role's shape (13.1B) beside targets of the judge's (7.4B), planned on one 80 GB H100."""
    from esc_eval.serve.plan.planner import ModelUse, hardware_for, plan_run

    role = model_folder("r14b")
    uses = [ModelUse(f"vllm/{role}", {}, "role")] + [ModelUse(f"vllm/{model_folder(t, 'j7b')}", {}, "target")
                                                     for t in targets]
    plan = plan_run(uses, hardware_for(1, None, None, "H100"))
    assert plan.ok and plan.mode == "serve", plan.refusals
    return ServeConfig(app_name="run", models=[ServeModelConfig(**m) for m in plan.serve_models()])


def test_models_sharing_a_gpu_get_fractional_bundles_ray_accepts(model_folder):
    cfg = _planned(model_folder, "j7b")
    configs = build_llm_configs(cfg)
    fractions, utils = [], []
    for c in configs:
        lc = llm.LLMConfig.model_validate(c)  # Ray's own schema
        (bundle,) = lc.placement_group_config["bundles"]
        assert set(bundle) == {"GPU"} and 0 < bundle["GPU"] < 1 and lc.accelerator_type == "H100"
        assert lc.accelerator_config.kind == "gpu" and lc.engine_kwargs["tensor_parallel_size"] == 1
        # vLLM's budget is per process: each replica's is its share of the GPU's 0.92
        assert lc.engine_kwargs["gpu_memory_utilization"] == pytest.approx(bundle["GPU"] * 0.92, abs=1e-4)
        engine = lc.get_engine_config()  # what the replica's engine starts with
        assert engine.placement_bundles[0]["GPU"] == bundle["GPU"]
        assert engine.get_runtime_env_with_local_env_vars()["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == str(bundle["GPU"])
        fractions.append(bundle["GPU"])
        utils.append(lc.engine_kwargs["gpu_memory_utilization"])
    assert sum(fractions) <= 1 and sum(utils) <= 0.92 + 1e-9 and fractions[0] > fractions[1]  # the 13B gets more
    llm.LLMServingArgs.model_validate(build_app_args(cfg))


def test_a_local_folder_deploys_under_its_name_with_its_own_template(model_folder):
    cfg = _planned(model_folder, "j7b")
    by_id = {c["model_loading_config"]["model_id"]: c for c in build_llm_configs(cfg)}
    assert set(by_id) == {"r14b", "j7b"}  # the folders' names
    c = by_id["j7b"]
    assert c["model_loading_config"]["model_source"].endswith("/models/j7b")
    assert "chat_template" not in c["engine_kwargs"]  # vLLM reads the folder's tokenizer_config.json
    assert c["engine_kwargs"]["max_model_len"] == 8192 and "lora_config" not in c
    assert c["server_cls"] == "esc_eval.serve.app.server:LLMServer"  # ours (start failures say why), not the LoRA one
    with pytest.raises(ValueError, match="gpu_fraction 0.5: set gpu_memory_utilization to at most it"):
        ServeModelConfig(name="j7b", accelerator="gpu", gpu_fraction=0.5, gpu_memory_utilization=0.9)
    with pytest.raises(ValueError, match="gpu_fraction needs accelerator: gpu and tensor_parallel_size 1"):
        ServeModelConfig(name="j7b", accelerator="gpu", tensor_parallel_size=2, gpu_fraction=0.5,
                         gpu_memory_utilization=0.4)
    from esc_eval.serve.chat.interface import UnknownModelError

    with pytest.raises(UnknownModelError, match="'j7b' is not in the registry"):  # no folder: still a registry name
        build_llm_configs(ServeConfig(models=[ServeModelConfig(name="j7b")]))


def test_fractional_bundle_carries_the_replica_cpus_too():
    cfg = ServeConfig(models=[ServeModelConfig(name="qwen1.5-7b-chat", accelerator="gpu", gpu_fraction=0.4,
                                               gpu_memory_utilization=0.368, replica_cpus=2)])
    (c,) = build_llm_configs(cfg)
    lc = llm.LLMConfig.model_validate(c)
    assert lc.placement_group_config["bundles"] == [{"CPU": 2, "GPU": 0.4}]
    assert lc.deployment_config["ray_actor_options"] == {"num_cpus": 0}


def test_fractional_replica_tells_vllms_ray_worker_its_fraction():
    # on an H200 vLLM's Ray executor asked a whole GPU (its default) inside a 0.79 bundle and no engine started
    cfg = ServeConfig(models=[ServeModelConfig(name="qwen1.5-7b-chat", accelerator="gpu", gpu_fraction=0.2141,
                                               gpu_memory_utilization=0.2)])
    (c,) = build_llm_configs(cfg)
    lc = llm.LLMConfig.model_validate(c)
    assert lc.runtime_env["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == "0.2141"
    assert lc.placement_group_config["bundles"] == [{"GPU": 0.2141}]
    whole = build_llm_configs(ServeConfig(models=[ServeModelConfig(name="qwen1.5-7b-chat", accelerator="gpu")]))[0]
    assert "VLLM_RAY_PER_WORKER_GPUS" not in (whole.get("runtime_env") or {}).get("env_vars", {})
    mine = ServeConfig(env_vars={"VLLM_RAY_PER_WORKER_GPUS": "0.1"},
                       models=[ServeModelConfig(name="qwen1.5-7b-chat", accelerator="gpu", gpu_fraction=0.5,
                                                gpu_memory_utilization=0.45)])
    assert build_llm_configs(mine)[0]["runtime_env"]["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == "0.1"
