"""Serve replicas sharing a GPU check the KV cache their engine sized against the plan's figure
(serve/engines/kv_budget.py, serve/app/server.py): vLLM profiles the device's free memory while it
starts, and replicas that start together on one card count each other's memory as their own. Tested up
to the hardware boundary: the plan's figures on a described H100, the replica on ray.serve.llm's
LLMServer with a stand-in engine reporting its KV cache as vLLM's does."""
from __future__ import annotations

import asyncio
import types

import pytest

from esc_eval.serve.engines.kv_budget import EXPECTED_KV_ENV, KV_FLOOR_ENV, check_kv


def test_the_verdict_on_numbers():
    ok = check_kv("j7b", {"blocks": 2000, "block_size": 16, "tokens": 32000}, 33000, floor=0.5)
    assert ok.level == "ok" and not ok.line
    warn = check_kv("j7b", {"blocks": 1500, "block_size": 16, "tokens": 24000}, 32000, floor=0.5)
    assert warn.level == "warn" and warn.line.startswith(
        "the vLLM engine for j7b sized its KV cache at 24,000 tokens (1,500 blocks of 16), 75% of the 32,000 the plan "
        "gave it: fewer sequences fit")
    short = check_kv("j7b", {"blocks": 500, "block_size": 16, "tokens": 8000}, 32000, floor=0.5)
    assert short.short and "25% of the 32,000" in short.line and "profiled the GPU's memory at once" in short.line
    assert check_kv("j7b", {"blocks": 500, "block_size": 16, "tokens": 8000}, 32000, floor=0).level == "warn"
    assert check_kv("j7b", {"blocks": None, "block_size": None, "tokens": None}, 32000).level == "unknown"


def test_replicas_sharing_a_gpu_are_told_the_plans_kv_and_the_floor(model_folder):
    """Role (13.1B) and a 7.4B target on one 80 GB H100: two fractional replicas, each told its KV tokens."""
    from esc_eval.serve.app.application import ServeConfig, ServeModelConfig, build_llm_configs
    from esc_eval.serve.plan.planner import ModelUse, hardware_for, plan_run

    uses = [ModelUse(f"vllm/{model_folder('r14b')}", {}, "role"), ModelUse(f"vllm/{model_folder('j7b')}", {}, "target")]
    plan = plan_run(uses, hardware_for(1, None, None, "H100"))
    assert plan.ok and plan.mode == "serve", plan.refusals
    planned = {e.serve["name"]: e for e in plan.engines}
    models = plan.serve_models(kv_floor=0.5)
    assert all(m["gpu_fraction"] and m["kv_floor"] == 0.5 for m in models)
    configs = build_llm_configs(ServeConfig(app_name="run", models=[ServeModelConfig(**m) for m in models]))
    for cfg in configs:
        env = cfg["runtime_env"]["env_vars"]
        name = cfg["model_loading_config"]["model_id"]
        assert env[EXPECTED_KV_ENV] == str(int(planned[name].kv_tokens)) and env[KV_FLOOR_ENV] == "0.5"
        assert int(env[EXPECTED_KV_ENV]) > 10_000  # a real figure: what the plan's max_num_seqs was sized by
    whole = plan_run(uses[:1], hardware_for(1, None, None, "H100"))  # alone on its GPU: no race, a warning at most
    (alone,) = whole.serve_models(kv_floor=0.5)
    assert alone.get("gpu_fraction") is None and alone["kv_floor"] == 0.0 and alone["expected_kv_tokens"] > 0


class _Cache:
    def __init__(self, blocks: int, block_size: int = 16):
        self.num_gpu_blocks, self.block_size = blocks, block_size


def _replica(blocks: int):
    """ray.serve.llm's LLMServer as serve/app/server.py runs it, its engine a stand-in whose engine client
    reports `blocks` KV blocks of 16 tokens as vLLM's AsyncLLM does (vllm_config.cache_config)."""
    from ray.serve.llm import LLMConfig

    from esc_eval.serve.app.server import LLMServer

    class StandInEngine:
        def __init__(self, llm_config):
            self._engine_client = None

        async def start(self):
            self._engine_client = types.SimpleNamespace(vllm_config=types.SimpleNamespace(cache_config=_Cache(blocks)))

    cfg = LLMConfig(model_loading_config={"model_id": "j7b", "model_source": "/models/j7b"},
                    accelerator_config={"kind": "cpu"})
    return LLMServer.sync_init(cfg, engine_cls=StandInEngine)


def test_a_replica_whose_kv_cache_came_out_short_fails_its_start_naming_both(monkeypatch):
    from esc_eval.serve.app import server
    from esc_eval.serve.app.deploy import replica_cause
    from esc_eval.serve.chat.interface import EngineStartError

    monkeypatch.setattr(server, "RETRY_SPREAD_S", 0.0)
    monkeypatch.setenv(EXPECTED_KV_ENV, "32000")
    monkeypatch.setenv(KV_FLOOR_ENV, "0.5")
    with pytest.raises(EngineStartError) as e:
        asyncio.run(_replica(blocks=500).start())  # 8,000 tokens: its neighbour's weights counted as its own
    line = str(e.value)
    assert line.startswith("the vLLM engine for j7b sized its KV cache at 8,000 tokens (500 blocks of 16), 25% of the "
                           "32,000 the plan gave it: replicas sharing its GPU profiled")
    # Serve's DEPLOY_FAILED message after its retries ends with it; the deploy names it in one line
    serve_message = (f"The deployment failed to start 3 times in a row. Error:\nray::ServeReplica:run:LLMServer:j7b\n"
                     f"esc_eval.serve.chat.interface.EngineStartError: {line}\n")
    assert replica_cause(serve_message) == line
    asyncio.run(_replica(blocks=1900).start())  # 30,400 tokens: its share
    monkeypatch.delenv(EXPECTED_KV_ENV)
    asyncio.run(_replica(blocks=10).start())  # a replica not told a figure (CPU, or planned by hand): no check


def test_a_run_in_serve_mode_deploys_its_replicas_with_the_plans_kv_and_floor(fake_gpus, model_folder, monkeypatch):
    """sim/driver/placement.py on a fake H100 node, the deploy itself a stand-in: what the run asks Serve for."""
    import ray.serve

    from esc_eval.serve.app import deploy
    from esc_eval.serve.plan.planner import PlacementConfig
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.launch.placed import placed_simulation
    from esc_eval.sim.pool import on_ray
    from esc_eval.sim.driver import placement
    from esc_eval.sim.pool.config import ExecutionConfig

    fake_gpus(("NVIDIA H100 80GB HBM3", 81559))
    deployed = []

    class Meter:
        def __init__(self, *a, **k):
            pass

        def start(self):
            return self

        def stop(self):
            pass

        def totals(self):
            return {}

    monkeypatch.setattr(deploy, "deploy_app", lambda cfg, timeout_s, app=None: deployed.append(cfg))
    monkeypatch.setattr(on_ray, "ensure_ray", lambda ex: None)
    monkeypatch.setattr(placement, "_serve_running", lambda: True)
    monkeypatch.setattr(placement, "ReplicaMeter", Meter)
    monkeypatch.setattr(ray.serve, "delete", lambda name: None)
    cfg = SimulationConfig(cards="sample", limit=1, role=ModelRef(model=f"vllm/{model_folder('r14b')}"),
                           targets=[ModelRef(model=f"vllm/{model_folder('j7b')}")],
                           execution=ExecutionConfig(placement=PlacementConfig(mode="serve", kv_floor=0.6)))
    with placed_simulation(cfg):
        pass
    (serve_cfg,) = deployed
    assert [(m.gpu_fraction is not None, m.kv_floor) for m in serve_cfg.models] == [(True, 0.6), (True, 0.6)]
    assert all(m.expected_kv_tokens and m.expected_kv_tokens > 10_000 for m in serve_cfg.models)
