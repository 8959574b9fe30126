"""The planner (serve/plan/planner.py): pure, so every GPU case is planned here on a CPU machine."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.registry.size import size_from_config_json
from esc_eval.serve.plan.planner import GB, Hardware, ModelUse, PlacementConfig, Plan, PlanError, hardware_for, plan_run, ref_key
from esc_eval.serve.registry.registry import load_registry
from esc_eval.serve.plan.text import plan_lines

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
    sim, score = plan.engines  # one engine per phase: role and target share one, the judge's job has its own
    assert (sim.uses, sim.phase, score.uses, score.phase) == (["role", "target"], "simulation", ["judge"], "scoring")
    e = sim
    assert e.device == "cpu" and e.engine == {} and score.engine == {}
    assert plan.placement_map() == {}  # the workers build it exactly as before
    assert e.kv_tokens == 2 * 2**30 // (2 * 30 * 3 * 64 * 4)  # float32 on this plan's CPU


ROLE_TP1 = PlacementConfig(models={"esc-role": {"tensor_parallel_size": 1}})


@pytest.mark.parametrize("hardware, placement, refusal", [
    # a model too large for the GPUs given, its tensor-parallel size configured
    (hardware_for(8, 24, 4), ROLE_TP1, r"^model esc-role \(14\.17B parameters, 28\.3 GB in bfloat16\) does not "
     r"fit on 1 x 24 GB GPU with one 8,192-token sequence of KV cache \(22\.1 GB usable per GPU .*\): raise "
     r"placement\.models\.esc-role\.tensor_parallel_size \(now 1\)$"),
    # too large even for a node's GPUs together
    (hardware_for(1, 24, 1), PlacementConfig(), r"^model esc-role .* does not fit on 1 x 24 GB GPU .*: a node's 1 GPUs are "
     r"too few even together$"),
    # a tensor-parallel size a node cannot hold
    (hardware_for(8, 24, 1), ROLE_TP2, r"^model esc-role: tensor_parallel_size 2 needs 2 GPUs; a node has 1$"),
    # one the model's heads cannot take
    (hardware_for(8, 80, 8), PlacementConfig(models={"esc-role": {"tensor_parallel_size": 3}}),
     r"^model esc-role: tensor_parallel_size 3 does not divide its 40 attention heads"),
    # replicas the run's GPUs cannot start side by side (serve asked for: no fallback)
    (hardware_for(2, 24, 2), ROLE_TP2.model_copy(update={"mode": "serve"}),
     r"^serve: the simulation's 3 models do not fit side by side on 2 x 24 GB GPUs: at their least KV cache \(1 x "
     r"max_model_len tokens each\) they need 3\.9 GPUs \(esc-role 1 x 2\.00, qwen1\.5-7b-chat 1 x 0\.98, "
     r"llama-3-8b-instruct 1 x 0\.87\); use placement mode in_process"),
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
    assert serve.ok and serve.mode == "serve", serve.refusals  # a local folder deploys like a registry model
    (d,) = serve.engines
    assert d.serve["name"] == "tiny" and d.serve["model_source"] == str(folder.resolve()) and d.size_source == "config.json"


def test_placement_config_rejects_what_the_plan_sets():
    with pytest.raises(ValueError, match="accelerator_type are set by the plan"):
        PlacementConfig(models={"esc-role": {"accelerator_type": "A10G"}})
    with pytest.raises(ValueError):
        PlacementConfig(models={"esc-role": {"min_replicas": 3, "max_replicas": 1}})  # ServeModelConfig's own check


def test_plan_prints_one_line_per_model_and_refusal():
    lines = plan_lines(plan_run(SIM, hardware_for(8, 24, 1), ROLE_TP2))
    assert lines[0] == "plan: serve on 8 x A10G 24 GB GPUs, 1 per node" or lines[0].startswith("plan: serve on 8 x")
    assert any(line.startswith("- esc-role [role]: Serve deployment esc-role, 1 replica, 2 GPUs per replica") for line in lines)
    assert lines[-1] == "1 refused: nothing was started"


H100 = hardware_for(1, None, None, "H100")


def _layout_fits(plan: Plan, phase: str = "simulation"):
    """Each GPU of the plan's layout holds at most the whole GPU; returns the layout's shares per GPU."""
    gpus = [[float(x.rsplit(" ", 1)[1]) for x in gpu] for gpu in plan.layout[phase]]
    assert all(sum(g) <= 1 + 1e-9 for g in gpus), plan.layout
    return gpus


def test_role_and_a_7b_target_share_one_h100():
    plan = plan_run([ModelUse("esc-role", {}, "role"), ModelUse("qwen1.5-7b-chat", {}, "target")], H100)
    assert plan.ok and plan.mode == "serve", plan.refusals
    e = _by_name(plan)
    role, target = e["esc-role"], e["qwen1.5-7b-chat"]
    (gpu,) = _layout_fits(plan)
    assert gpu == [role.gpu_fraction, target.gpu_fraction] and 0.99 < sum(gpu) <= 1  # the whole GPU, split
    for d in (role, target):
        assert d.replicas == (1, 1) and d.gpus == 1 and d.serve["gpu_fraction"] == d.gpu_fraction
        assert d.gpu_memory_utilization == pytest.approx(d.gpu_fraction * 0.92, abs=1e-4)
        # weights + 2 GB overhead + KV cache = its share of the GPU's 0.92 x 80 GB
        assert d.weights_gb + 2 + d.kv_gb == pytest.approx(d.gpu_fraction * 0.92 * 80, abs=0.05)
        assert d.kv_tokens >= 2 * 8192
    assert any(n.startswith("replicas sharing a GPU split placement.gpu_memory_utilization 0.92") for n in plan.notes)
    assert role.kv_tokens == pytest.approx(target.kv_tokens, rel=0.01)  # the same KV tokens each
    assert plan.execution == {"num_gpus_per_worker": 0.0}
    assert any(line == "    GPU 0: esc-role 0.6261 + qwen1.5-7b-chat 0.3739" for line in plan_lines(plan)), plan_lines(plan)


def _paper_run_registry(tmp_path):
    """The registry with ESC-Role's and ESC-RANK's adapters in local folders and the two targets
    without public weights given a folder on the cluster's volume (not on this machine)."""
    reg = _local_adapters(tmp_path)
    return load_registry(env={"ESC_EVAL_MODEL_PATHS": ",".join(
        [f"{m}:{a}={p}" for m in ("esc-role", "esc-rank") for a, p in reg.get(m).adapters.items()]
        + ["extes-llama=/cluster/models/extes-llama", "emollm=/cluster/models/emollm"])})


def test_the_papers_run_side_by_side_on_one_8_h100_node_then_the_judge(tmp_path):
    reg = _paper_run_registry(tmp_path)
    targets = [e.name for e in reg.targets()]
    assert len(targets) == 14
    uses = ([ModelUse("esc-role", {}, "role")] + [ModelUse(t, {}, "target") for t in targets]
            + [ModelUse("esc-rank", {}, "judge", "scoring")])
    plan = plan_run(uses, hardware_for(8, None, 8, "H100"), registry=reg)
    assert plan.ok and plan.mode == "serve", plan.refusals
    sim = [e for e in plan.engines if e.phase == "simulation" and e.where == "serve deployment"]
    assert len(sim) == 13 and {e.name for e in plan.engines if e.where.startswith("external")} == {"gpt-4", "chatgpt"}
    gpus = _layout_fits(plan)
    assert len(gpus) == 8 and all(gpus)  # every GPU busy
    placed = sum(len(g) for g in gpus)
    assert placed == sum(e.replicas[0] for e in sim) and all(e.kv_tokens >= e.max_model_len for e in sim)
    role = _by_name(plan)["esc-role"]
    assert role.replicas[0] >= 2 and role.gpu_fraction is None  # idle GPUs went to the role, whole GPUs each
    (judge,) = [e for e in plan.engines if e.phase == "scoring"]
    assert judge.replicas == (8, 8) and judge.gpus == 1 and judge.gpu_fraction is None  # then the judge, one per GPU
    assert _layout_fits(plan, "scoring") == [[1.0]] * 8
    text = plan_lines(plan)
    assert "simulation: the role and the targets:" in text and text[-1] == "ok: nothing refused"


def test_gpus_follow_the_work_on_the_papers_run(tmp_path, monkeypatch):
    """ESC-Role answers all 14 targets' dialogues, a 14B model: its replicas are decided before any KV
    cache grows, so it gets the GPUs the targets' KV growth took before (2 then). It stays the slowest
    because the 12 targets' weights at their least KV cache need 3 GPUs, which Ray's best fit, in
    any start order, only packs onto 4: one more role replica does not fit."""
    from esc_eval.serve.plan import serve_mode as plan_serve
    from esc_eval.serve.registry.size import model_facts
    from esc_eval.serve.plan.sizes import Engine
    from esc_eval.serve.plan.projection import Workload, project

    reg = _paper_run_registry(tmp_path)
    targets = [e.name for e in reg.targets()]
    # the role's work is every target's dialogues: 14 x its 512-token turns at 14.17B; a target its own
    loads = {n: plan_serve._load(Engine(n, model_facts(n, reg), {}, uses=[u]), len(targets))
             for n, u in [("esc-role", "role"), ("qwen1.5-7b-chat", "target")]}
    assert loads == {"esc-role": pytest.approx(14.17 * 512 * 14), "qwen1.5-7b-chat": pytest.approx(7.72 * 512)}
    packers = []
    monkeypatch.setattr(plan_serve, "pack", lambda *a: packers.append(plan_serve.Packer(*a)) or packers[-1].pack())
    uses = [ModelUse("esc-role", {}, "role")] + [ModelUse(t, {}, "target") for t in targets]
    plan = plan_run(uses, hardware_for(8, None, 8, "H100"), registry=reg)
    role = _by_name(plan)["esc-role"]
    assert role.replicas == (4, 4) and role.gpu_fraction is None  # 2 before: GPUs follow the work
    assert _layout_fits(plan)[:4] == [[1.0]] * 4
    hosted = [x for x in plan.engines if x.where == "serve deployment" and x.phase == "simulation"]
    assert all(x.kv_tokens >= x.max_model_len for x in hosted)  # never below a replica's minimum
    replicas = {x.name: x.replicas[0] for x in hosted}
    least = {x.name: 0 for x in hosted}
    assert packers[0].fits({**replicas, "esc-role": 5}, {**least, "esc-role": 10**9}) is None
    # projected at the caps: the role's time halves and is within twice the slowest target's
    work = Workload(tokens={x.refs[0]: 655 * 5 * 512 * (len(targets) if x.name == "esc-role" else 1) for x in hosted})
    sim = project(plan, work).phases[0]
    times = {p.name: p.seconds for p in sim.parts}
    assert sim.slowest.name == "esc-role"
    assert times["esc-role"] == pytest.approx(655 * 14 * 5 * 512 / (2052 * 13.1 / 14.17 * 4))
    assert times["esc-role"] < 2 * max(t for n, t in times.items() if n != "esc-role")


def test_replicas_the_plan_adds_never_share_a_gpu():
    from esc_eval.serve.plan.pack import Demand, pack

    # 10 GB usable per GPU; "big" does 3 times "small"'s work: 3 whole GPUs to 1
    big, small = Demand("big", 3.0, 0.001, 1000, load=3.0), Demand("small", 2.0, 0.001, 1000, load=1.0)
    p = pack([big, small], [4], 10.0)
    assert p.ok and p.replicas == {"big": 3, "small": 1} and p.fraction == {"big": 1.0, "small": 1.0}
    # on 3 GPUs big's 2.5 GPUs of work cannot be three replicas next to small: as many whole ones as fit
    p = pack([Demand("big", 3.0, 0.001, 1000, load=2.5), Demand("small", 2.0, 0.001, 1000, load=0.5)], [3], 10.0)
    assert p.ok and p.replicas["big"] >= 2
    for gpu in p.layout:
        names = [n for n, _ in gpu]
        assert len(names) == len(set(names)) and sum(f for _, f in gpu) <= 1 + 1e-9
    assert all(p.fraction[n] > 0.5 for n, r in p.replicas.items() if r > 1)


def test_replicas_and_tensor_parallelism_set_in_the_config_are_kept():
    uses = [ModelUse("esc-role", {}, "role"), ModelUse("qwen1.5-7b-chat", {}, "target")]
    pinned = plan_run(uses, hardware_for(4, None, 4, "H100"),
                      PlacementConfig(models={"esc-role": {"min_replicas": 1, "max_replicas": 3}}))
    e = _by_name(pinned)
    assert e["esc-role"].replicas == (1, 3) and e["qwen1.5-7b-chat"].replicas == (1, 1)
    assert _layout_fits(pinned) == [[1.0], [1.0], [1.0], [1.0]]  # room for the role's 3, the target on the 4th
    assert "the simulation's GPU layout holds the configured max_replicas: room kept for autoscaling" in pinned.notes
    assert not any("set by the plan" in n for n in e["esc-role"].notes)
    fixed = plan_run(uses, hardware_for(4, None, 4, "H100"), PlacementConfig(models={"esc-role": {"min_replicas": 2,
                                                                                                  "max_replicas": 2}}))
    assert _by_name(fixed)["qwen1.5-7b-chat"].replicas == (2, 2)  # the idle GPUs: the unconfigured target's
    a10g = plan_run(uses, hardware_for(8, None, 4, "A10G"))  # 28.3 GB of ESC-Role weights on 24 GB GPUs
    role = _by_name(a10g)["esc-role"]
    assert a10g.ok and role.tensor_parallel_size == 2 and role.serve["tensor_parallel_size"] == 2
    assert any(n.startswith("tensor_parallel_size 2 set by the plan") for n in role.notes)


def test_auto_runs_targets_one_after_another_when_they_do_not_fit_side_by_side(tmp_path):
    reg = _paper_run_registry(tmp_path)
    uses = [ModelUse("esc-role", {}, "role")] + [ModelUse(t.name, {}, "target") for t in reg.targets()]
    plan = plan_run(uses, hardware_for(2, None, 2, "H100"), registry=reg, workers_set=False)
    assert plan.ok and plan.mode == "in_process", plan.refusals
    assert plan.notes[0].startswith("the simulation's 13 models do not fit side by side on 2 x H100 80 GB GPUs")
    assert "running in-process instead, each worker holding the role and one target at a time" in plan.notes[0]
    assert plan.execution == {"num_gpus_per_worker": 1.0, "workers": 2}
    role = _by_name(plan)["esc-role"]
    assert role.where == "in-process" and role.gpu_memory_utilization < 0.92
    served = plan_run(uses, hardware_for(2, None, 2, "H100"), PlacementConfig(mode="serve"), registry=reg)
    assert served.refusals[0].startswith("serve: the simulation's 13 models do not fit side by side")


def test_a_packing_must_survive_the_order_ray_starts_replicas_in():
    from esc_eval.serve.plan.pack import Demand, Packer

    # 0.6 + 0.4 per GPU fits largest-first; started 0.4, 0.4, 0.6, 0.6, Ray's best fit puts both 0.4s on one GPU
    demands = [Demand("a", 0.6, 0.0, 0, replicas=2), Demand("b", 0.4, 0.0, 0, replicas=2)]
    packer = Packer(demands, [2], 1.0)
    items = [("b", 0.4, 1), ("b", 0.4, 1), ("a", 0.6, 1), ("a", 0.6, 1)]
    assert packer.place(sorted(items, key=lambda x: -x[1]), None) is not None
    assert packer.place(items, None) is None
    assert packer.fits({"a": 2, "b": 2}, 0) is None  # refused: some start order strands a replica


@pytest.mark.parametrize("make, why", [
    (lambda root: root / "missing", "does not exist"),
    (lambda root: root, "has no config.json (not a model folder)"),
    (lambda root: (root / "config.json").write_text("{}") and root, "has no weight files (*.safetensors or *.bin)"),
])
def test_a_bad_local_folder_is_refused_in_one_line(tmp_path, make, why):
    folder = make(tmp_path)
    for hardware in (H100, Hardware()):
        plan = plan_run([ModelUse(f"vllm/{folder}", {}, "judge", "scoring")], hardware)
        assert plan.refusals == [f"judge vllm/{folder}: local folder {folder} {why}"]


def _demand_sets():
    from hypothesis import strategies as st

    from esc_eval.serve.plan.pack import Demand

    one = st.builds(lambda i, fixed, kv, n, fill, load, tp: Demand(f"m{i}", fixed, kv, 1000, tp=tp, replicas=n, fill=fill,
                                                                   load=load),
                    st.just(0), st.floats(1.0, 9.0), st.sampled_from([0.0, 0.0005, 0.002]), st.integers(1, 2),
                    st.booleans(), st.floats(0.1, 50.0), st.sampled_from([1, 1, 1, 2]))
    return st.lists(one, min_size=1, max_size=6).map(lambda ds: [Demand(**{**d.__dict__, "name": f"m{i}"})
                                                                 for i, d in enumerate(ds)])


@pytest.mark.parametrize("nodes", [[4], [2, 2], [8]])
def test_what_the_packing_guarantees_holds_for_any_demands(nodes):
    """Whatever the work, a packing that says ok fits Ray's best fit in every tried start order, keeps
    configured replicas, never goes below a replica's least KV cache, and never puts two replicas the
    plan added of one model on one GPU."""
    from hypothesis import HealthCheck, given, settings

    from esc_eval.serve.plan.pack import Packer

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_demand_sets())
    def check(demands):
        packer = Packer(demands, nodes, 10.0)
        p = packer.pack()
        if not p.ok:
            assert packer.fits({d.name: d.replicas for d in demands}, 0) is None
            return
        assert packer.fits(p.replicas, {d.name: p.tokens[d.name] for d in demands}) is not None
        assert len(p.layout) == sum(nodes) and sum(len(g) for g in p.layout) == sum(p.replicas[d.name] * d.tp for d in demands)
        for d in demands:
            assert p.replicas[d.name] == d.replicas if not d.fill else p.replicas[d.name] >= d.replicas
            assert p.tokens[d.name] >= d.min_tokens
            if d.fill and p.replicas[d.name] > d.replicas and d.kv_gb_per_token and d.tp == 1:
                assert p.fraction[d.name] > 0.5
        for gpu in p.layout:
            assert sum(f for _, f in gpu) <= 1 + 1e-9

    check()
