"""Items in flight sized by the engine (sim/pool/capacity.py): the arithmetic, and the pool following it."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esc_eval.serve.engines.args import EngineCapacity
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import judge_demand
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.jobs.simulation_items import dialogue_demand, dialogue_demands, select_cards
from esc_eval.sim.pool.capacity import (GPU_WORKER_CPUS, MAX_AUTO_CONCURRENCY, Demand, choose_concurrency,
                                        estimate_tokens, items_in_flight, serve_capacity_fields, worker_cpus)
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

H100_ROLE = EngineCapacity("r14b", "gpu", kv_tokens=400_000, max_num_seqs=256, max_model_len=8192)


def test_a_dialogue_holds_its_mean_context_on_each_engine():
    # opener 10, role system 100, target system 5; 2 rounds; role answers 50, target answers 200:
    # calls: role 100+10+50=160, target 5+250=255, role 110+300=410, target 5+500=505
    role, (target,) = dialogue_demands("role", ["t"], role_system=100, opener=10, rounds=2, role_cap=50,
                                       target_systems=[5], target_caps=[200])
    assert role == Demand("role", 1, (160 + 410) // 2) and target == Demand("t", 1, (255 + 505) // 2)


def test_the_role_is_sized_for_its_longest_target():
    role, targets = dialogue_demands("role", ["short", "long"], role_system=0, opener=0, rounds=1, role_cap=10,
                                     target_systems=[0, 0], target_caps=[10, 1000])
    assert role.tokens_per_seq == 10 and [t.tokens_per_seq for t in targets] == [20, 1010]


def test_the_kv_cache_sizes_a_gpu_worker_and_max_num_seqs_caps_it():
    c = choose_concurrency(None, 32, [(H100_ROLE, Demand("r14b", 1, 4100))])
    assert c.value == 97 and c.source == "kv_cache"  # 400,000 // 4,100
    assert c.reason == "concurrency 97 per worker: r14b's KV cache 400K tokens / ~4.1K tokens per dialogue"
    capped = choose_concurrency(None, 32, [(H100_ROLE, Demand("r14b", 1, 1000))])
    assert capped.value == 256 and capped.reason.endswith("capped by max_num_seqs 256")


def test_the_smallest_engine_of_the_worker_decides():
    target = EngineCapacity("t7b", "gpu", kv_tokens=90_000, max_num_seqs=256)
    c = choose_concurrency(None, 32, [(H100_ROLE, Demand("r14b", 1, 4000)), (target, Demand("t7b", 1, 3000))])
    assert c.value == 30 and "t7b's KV cache 90K" in c.reason


def test_a_judge_item_is_its_seven_prompts():
    judge = EngineCapacity("j7b", "gpu", kv_tokens=430_000, max_num_seqs=1024)
    c = choose_concurrency(None, 8, [(judge, judge_demand("j7b", 1500, 1, 7))], "dialogue scored")
    assert c.value == 430_000 // (7 * 1501) and "7 x ~1.5K tokens per dialogue scored" in c.reason
    assert items_in_flight(EngineCapacity("j", "gpu", 10**9, 1024), judge_demand("j", 10, 1, 7)) == (146, True)


def test_cpu_engines_and_explicit_settings_keep_their_figures():
    cpu = EngineCapacity("embedded", "cpu", kv_tokens=93_000, max_num_seqs=128)
    assert choose_concurrency(None, 32, [(cpu, Demand("embedded", 1, 500))]).value == 32  # CPU default, as measured
    assert choose_concurrency(None, 8, []).value == 8
    explicit = choose_concurrency(12, 32, [(H100_ROLE, Demand("r14b", 1, 100))])
    assert explicit.value == 12 and explicit.source == "explicit"


def test_a_sequence_is_at_most_max_model_len():
    short = EngineCapacity("m", "gpu", kv_tokens=8192 * 10, max_num_seqs=None, max_model_len=8192)
    assert items_in_flight(short, Demand("m", 1, 100_000)) == (10, False)


@given(kv=st.integers(0, 10**7), seqs=st.integers(1, 2048), per=st.integers(1, 16), tokens=st.integers(1, 50_000))
def test_items_in_flight_never_overfill_the_engine(kv, seqs, per, tokens):
    cap = EngineCapacity("m", "gpu", kv_tokens=kv, max_num_seqs=seqs)
    n, _ = items_in_flight(cap, Demand("m", per, tokens))
    assert 1 <= n <= MAX_AUTO_CONCURRENCY
    assert n == 1 or (n * per <= seqs and n * per * tokens <= kv)


def test_worker_cpus():
    assert worker_cpus(None, 0, 64, 1) == 1.0  # CPU workers: as measured
    assert worker_cpus(None, 1, 16, 1) == GPU_WORKER_CPUS == 8
    assert worker_cpus(None, 1, 16, 4) == 4 and worker_cpus(None, 1, 2, 4) == 1
    assert worker_cpus(0.5, 1, 16, 1) == 0.5


def test_serve_fields_follow_the_planned_kv_cache():
    assert serve_capacity_fields(433_000, 4000) == {"max_num_seqs": 108, "target_ongoing_requests": 108,
                                                    "max_ongoing_requests": 216}
    assert serve_capacity_fields(433_000, 4000, set_fields={"max_num_seqs"}) == {"target_ongoing_requests": 108,
                                                                                 "max_ongoing_requests": 216}
    assert serve_capacity_fields(None, 4000) == {}


def test_the_config_defaults_are_auto():
    assert ExecutionConfig().concurrency is None and ScoringConfig().execution.concurrency is None
    assert ExecutionConfig().num_cpus_per_worker is None
    assert estimate_tokens("abc" * 10) == 10 and estimate_tokens("情" * 5) == 5


def sim_cfg(role_options=None, **execution):
    return SimulationConfig(cards="sample", limit=2, role=ModelRef(model="fake/seeker", options=role_options or {}),
                            targets=[ModelRef(model="fake/echo")],
                            execution=ExecutionConfig(executor="local", flush_rows=1, **execution))


def test_the_demand_of_the_shipped_cards_at_the_release_caps():
    cfg = sim_cfg()
    role, (target,) = dialogue_demand(cfg, select_cards(cfg))
    # 5 rounds of 512-token answers: the contexts grow to ~5K tokens, ~3K on average
    assert 2500 < role.tokens_per_seq < 4500 and 2500 < target.tokens_per_seq < 4000


@pytest.mark.parametrize("described, expected", [
    (None, (32, "default")),  # no engine capacity (the CPU path): the measured default
    ({"kv_tokens": 60_000, "max_num_seqs": 256, "device": "gpu"}, (None, "kv_cache")),
])
def test_the_worker_follows_what_its_engine_reports(tmp_path, described, expected):
    cfg = sim_cfg(described)
    res = run_simulation(cfg, tmp_path)
    (worker,) = res["workers"]
    want, source = expected
    if want is None:  # sized by the described GPU engine: 60,000 tokens over the role's demand
        want = 60_000 // dialogue_demand(cfg, select_cards(cfg))[0].tokens_per_seq
        assert worker["engines"][0]["kv_tokens"] == 60_000
    assert worker["concurrency"]["value"] == want and worker["concurrency"]["source"] == source
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["simulation"]["last"]["workers"][0]["concurrency"]["reason"].startswith(f"concurrency {want} ")
    assert len(list(RunFolder(tmp_path).iter_rows("dialogues"))) == 2


def test_gpu_serve_deployments_are_sized_by_their_planned_kv_cache():
    """The hook into the plan (sim/driver/placement.py calls it): a described 8 x H100 node, the paper's models."""
    from esc_eval.serve.plan.planner import ModelUse, PlacementConfig, hardware_for, plan_run, ref_key
    from esc_eval.sim.pool.capacity import size_serve_replicas

    uses = [ModelUse("esc-role", {}, "role"), ModelUse("qwen1.5-7b-chat", {"max_num_seqs": 48}, "target"),
            ModelUse("llama-3-8b-instruct", {}, "target")]
    placement = PlacementConfig(models={"esc-role": {"tensor_parallel_size": 2, "target_ongoing_requests": 20}})
    plan = plan_run(uses, hardware_for(8, 80, 8, "H100"), placement)
    asked = []

    def seq_tokens():
        asked.append(1)
        return {ref_key("esc-role", {}): 3000, ref_key("qwen1.5-7b-chat", {"max_num_seqs": 48}): 3100,
                ref_key("llama-3-8b-instruct", {}): 2500}

    size_serve_replicas(plan, seq_tokens, placement)
    e = {x.name: x for x in plan.engines}
    llama = e["llama-3-8b-instruct"]
    n = llama.kv_tokens // 2500
    assert llama.serve["max_num_seqs"] == n == llama.serve["target_ongoing_requests"] and n > 100  # not 32
    assert llama.serve["max_ongoing_requests"] == 2 * n and f"max_num_seqs {n}" in llama.notes[-1]
    role = e["esc-role"]  # the user's target_ongoing_requests stays
    assert role.serve["target_ongoing_requests"] == 20 and role.serve["max_num_seqs"] == role.kv_tokens // 3000
    assert e["qwen1.5-7b-chat"].serve["max_num_seqs"] == 48  # the model's own option stays
    from esc_eval.serve.app.application import ServeModelConfig

    assert all(ServeModelConfig(**m) for m in plan.serve_models())  # still valid deployments
    cpu = plan_run(uses[:1], hardware_for(0), PlacementConfig(mode="serve"))
    size_serve_replicas(cpu, seq_tokens, PlacementConfig())
    assert len(asked) == 1 and "max_num_seqs" not in cpu.engines[0].serve  # CPU replicas: nothing moves


def test_workers_calling_gpu_deployments_are_sized_by_their_share(monkeypatch):
    """Serve mode on a described 1 x H100 node: role and target side by side, sized by their planned
    KV cache; each of 2 workers gets half of each deployment (the target counted once per target of
    the run), its serve/ handle reports that share, and the worker's concurrency follows it."""
    from esc_eval.serve.plan.planner import PLACEMENT_ENV, ModelUse, PlacementConfig, hardware_for, plan_run, ref_key
    from esc_eval.sim.pool.capacity import serve_worker_shares, size_serve_replicas
    from esc_eval.sim.pool.participants import ModelPool

    uses = [ModelUse("esc-role", {}, "role"), ModelUse("qwen1.5-7b-chat", {}, "target"),
            ModelUse("openai/gpt-4", {}, "target")]
    plan = plan_run(uses, hardware_for(1, 80, 1, "H100"), PlacementConfig(mode="serve"))
    assert plan.ok, plan.refusals
    seq = {ref_key("esc-role", {}): 3000, ref_key("qwen1.5-7b-chat", {}): 3100}
    size_serve_replicas(plan, lambda: seq, PlacementConfig())
    e = {x.name: x for x in plan.engines}
    shares = serve_worker_shares(plan, workers=2, targets=2)
    role, target = shares[ref_key("esc-role", {})], shares[ref_key("qwen1.5-7b-chat", {})]
    assert role["kv_tokens"] == e["esc-role"].kv_tokens // 2 and role["device"] == "gpu"
    assert role["max_num_seqs"] == e["esc-role"].serve["max_num_seqs"] // 2
    assert target["kv_tokens"] == e["qwen1.5-7b-chat"].kv_tokens  # half of it, twice: it sees 1 dialogue in 2
    assert ref_key("openai/gpt-4", {}) not in shares  # an API target: nothing to share
    mapping = plan.placement_map()
    for ref, share in shares.items():
        mapping[ref]["serve"]["options"]["capacity"] = share
    monkeypatch.setenv(PLACEMENT_ENV, json.dumps(mapping))
    pool = ModelPool()
    role_cap = pool.capacity(ModelRef(model="esc-role"))
    assert role_cap == EngineCapacity(**role)  # the handle is built, not connected
    demand = Demand("esc-role", 1, 3000)
    c = choose_concurrency(None, 32, [(role_cap, demand), (pool.capacity(ModelRef(model="qwen1.5-7b-chat")),
                                                           Demand("qwen1.5-7b-chat", 1, 3100))])
    # the 14B role without GQA holds ~19K tokens beside the 7B on one card: a few of its dialogues per worker
    assert c.source == "kv_cache" and c.value == min(role["kv_tokens"] // 3000, target["kv_tokens"] // 3100) >= 1
    assert "esc-role's KV cache" in c.reason
    assert pool.capacity(ModelRef(model="openai/gpt-4")) is None
