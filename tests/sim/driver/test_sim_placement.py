"""Engines released by need (sim/pool/participants.py) and the plan followed at run time (sim/driver/placement.py),
on stand-in engines: what a worker holds when, what it builds where the plan placed a model, and
that a refusal stops the run before anything starts. The real paths: tests/sim/pool/test_sim_autoscale_slow.py."""
from __future__ import annotations

import asyncio
import json

import pytest

from esc_eval.serve.chat.interface import ChatModel, ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.plan.planner import PLACEMENT_ENV, PlacementConfig, PlanError, ref_key
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.launch.placed import placed_simulation
from esc_eval.sim.pool.config import ExecutionConfig


class EngineLog:
    def __init__(self):
        self.live: set[str] = set()
        self.events: list[tuple[str, str]] = []
        self.most_live_targets = 0


class StandInEngine(ChatModel):
    """A `vllm/<name>` model whose "engine" starts at its first call and stops when released."""

    holds_engine = True

    def __init__(self, name: str, log: EngineLog, **options):
        self.name, self.log, self.options = f"vllm/{name}", log, options

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        assert not self.released, f"{self.name} called after its engine was released"
        if self.name not in self.log.live:
            self.log.live.add(self.name)
            self.log.events.append(("start", self.name))
            targets = {n for n in self.log.live if "/t" in n}
            self.log.most_live_targets = max(self.log.most_live_targets, len(targets))
        await asyncio.sleep(0.005)
        return ChatResult(text="I hear you.", prompt_tokens=5, completion_tokens=3)

    def release(self) -> bool:
        self.released = True
        self.log.live.discard(self.name)
        self.log.events.append(("release", self.name))
        return True

    async def close(self):
        pass


@pytest.fixture
def engines(monkeypatch):
    from esc_eval.serve.backends import vllm_engine
    from esc_eval.sim.jobs import preflight

    log = EngineLog()
    monkeypatch.setattr(vllm_engine, "make_vllm_model", lambda name, **o: StandInEngine(name, log, **o))
    monkeypatch.setattr(preflight, "vllm_config_problem", lambda path, options: None)  # vLLM would start the stand-ins
    return log


def _sim(targets, role="vllm/role", cards=3, **ex):
    return SimulationConfig(cards="sample", languages=["en"], limit=cards, rounds=1, role=ModelRef(model=role),
                            targets=[ModelRef(model=t) for t in targets],
                            execution=ExecutionConfig(executor="local", concurrency=8, chunk_size=4,
                                                      turn_checkpoints=False, **ex))


def test_a_worker_holds_the_role_and_one_target_engine_at_a_time(engines, tmp_path):
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.jobs.simulation import run_simulation

    result = run_simulation(_sim(["vllm/t1", "vllm/t2", "vllm/t3"]), tmp_path / "run")
    rows = list(RunFolder(tmp_path / "run", create=False).iter_rows("dialogues"))
    assert result["items"] == 9 and all(r["status"] == "ok" for r in rows)
    assert engines.most_live_targets == 1  # the next target's engine started only after the previous one went
    order = [e for e in engines.events if e[1] != "vllm/role"]
    assert order == [("start", "vllm/t1"), ("release", "vllm/t1"), ("start", "vllm/t2"), ("release", "vllm/t2"),
                     ("start", "vllm/t3")]
    assert ("release", "vllm/role") not in engines.events  # the role is needed by every dialogue


def test_a_target_sharing_the_roles_engine_never_waits_or_goes(engines, tmp_path):
    from esc_eval.sim.jobs.simulation import run_simulation

    result = run_simulation(_sim(["vllm/role", "vllm/t1", "fake/echo"]), tmp_path / "run")
    assert result["items"] == 9 and result["failed"] == 0
    assert [e for e in engines.events if e[0] == "release"] == []  # t1 was the last engine target: kept


def test_a_new_job_releases_the_engines_it_does_not_use(engines):
    from esc_eval.sim.pool.participants import ModelPool

    pool = ModelPool()
    role, target = ModelRef(model="vllm/role"), ModelRef(model="vllm/t1")
    for ref in (role, target):
        asyncio.run(pool.raw(ref).chat([{"role": "user", "content": "hi"}]))
    assert pool.retain([role]) == [pool.key(target)]  # a scoring job whose judge is the role's model
    assert engines.live == {"vllm/role"}
    assert pool.retain([role]) == []


def test_placement_map_in_the_environment_decides_what_the_pool_builds(engines, monkeypatch):
    from esc_eval.serve.backends.serve_handle import ServeHandleChatModel
    from esc_eval.sim.pool.participants import ModelPool

    role, target = ModelRef(model="vllm/role", options={"max_model_len": 4096}), ModelRef(model="vllm/t1")
    monkeypatch.setenv(PLACEMENT_ENV, json.dumps({
        ref_key(role.model, role.options): {"engine": {"gpu_memory_utilization": 0.5}},
        ref_key(target.model, {}): {"serve": {"spec": "serve/t1", "options": {"app_name": "run-app"}}}}))
    pool = ModelPool()
    assert pool.raw(role).options == {"max_model_len": 4096, "gpu_memory_utilization": 0.5}  # the plan's share added
    handle = pool.raw(target)
    assert isinstance(handle, ServeHandleChatModel) and handle.app_name == "run-app" and handle.model_id == "t1"
    monkeypatch.delenv(PLACEMENT_ENV)
    assert isinstance(pool.raw(target), StandInEngine)  # no plan: as configured


def test_fake_models_are_not_placed_and_nothing_is_probed(monkeypatch, tmp_path):
    from esc_eval.sim.driver import placement

    monkeypatch.setattr(placement, "cluster_hardware", lambda ex: pytest.fail("probed the cluster"))
    cfg = _sim(["fake/echo"], role="fake/seeker")
    with placed_simulation(cfg, tmp_path) as placed:
        assert placed is cfg or placed.execution == cfg.execution


def test_in_process_gpu_plan_reaches_the_workers_without_changing_the_dialogues(engines, fake_gpus, tmp_path):
    """On a machine with one GPU (a fake nvidia-smi): each engine gets its share through the workers'
    environment; the configured models and options, hence dialogue ids and fingerprints, stay as they were."""
    fake_gpus(("NVIDIA H100 80GB HBM3", 81559))
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.jobs.simulation_items import iter_items, select_cards
    from esc_eval.sim.jobs.simulation import run_simulation

    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4,
                                                    "num_key_value_heads": 2, "hidden_size": 64}))
    (folder / "model.safetensors").write_bytes(b"\0" * 2_000_000)  # 1M parameters
    role = f"vllm/{folder}"
    cfg = _sim([role, "vllm/t1"], role=role, num_gpus_per_worker=1,
               placement=PlacementConfig(mode="in_process", gpu_memory_gb=80))
    cfg.targets[1].options = {}
    with pytest.raises(PlanError, match="vllm/t1: size unknown"):  # no size: its GPU share cannot be planned
        with placed_simulation(cfg, tmp_path / "refused"):
            pass
    assert not (tmp_path / "refused").exists()
    cfg.targets = cfg.targets[:1]
    ids_before = [i["dialogue_id"] for i in iter_items(cfg, select_cards(cfg), set())]
    with placed_simulation(cfg, tmp_path / "run") as placed:
        mapping = json.loads(placed.execution.env[PLACEMENT_ENV])
        assert mapping == {ref_key(role, {}): {"engine": {"gpu_memory_utilization": 0.92}}}
        assert placed.role == cfg.role and placed.targets == cfg.targets
        run_simulation(placed, tmp_path / "run")
    manifest = RunFolder(tmp_path / "run", create=False).read_manifest()
    assert manifest["placement"]["mode"] == "in_process" and manifest["placement"]["hardware"]["gpus"] == 1
    assert manifest["placement"]["hardware"]["source"] == "nvidia-smi"
    # its GPU charged once: the one engine (role and target) held the worker's whole share
    (charge,) = manifest["gpu_charges"]
    (end,) = [e for e in manifest["events"] if e["kind"] == "simulation_end"]
    assert charge["job"] == "simulation" and charge["end_at"] == end["at"]
    assert charge["models"][role] == {"gpu_share": 1.0, "one_at_a_time": False}
    (engine,) = manifest["usage"]["engines"]
    assert engine["engine_seconds"] > 0 and engine["gpu_seconds"] == pytest.approx(engine["engine_seconds"], rel=1e-3)
    assert engine["held_as"] == "in-process, 1 of 1 GPU per worker"
    rows = list(RunFolder(tmp_path / "run", create=False).iter_rows("dialogues"))
    assert sorted(r["dialogue_id"] for r in rows) == sorted(ids_before)
    import os

    assert PLACEMENT_ENV not in os.environ  # the plan was for that run only


def test_esc_eval_plan_prints_refusals_one_line_each_and_exits_non_zero(tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    cfg = tmp_path / "sim.yaml"
    cfg.write_text("role: {model: esc-role}\ntargets: [{model: qwen1.5-7b-chat}]\n"
                   "execution: {placement: {models: {esc-role: {tensor_parallel_size: 2}}}}\n")
    runner = CliRunner()
    ok = runner.invoke(app, ["plan", str(cfg), "--gpus", "4", "--gpu-mem", "24", "--gpus-per-node", "4"])
    assert ok.exit_code == 0, ok.output
    assert "- esc-role [role]: Serve deployment esc-role, 1 replica, 2 GPUs per replica" in ok.output
    bad = runner.invoke(app, ["plan", str(cfg), "--gpus", "4", "--gpu-mem", "24", "--gpus-per-node", "1"])
    assert bad.exit_code == 1
    refused = [line for line in bad.output.splitlines() if line.startswith("refused: ")]
    assert refused == ["refused: model esc-role: tensor_parallel_size 2 needs 2 GPUs; a node has 1"]
    js = runner.invoke(app, ["plan", str(cfg), "--json"])  # no GPUs given: the CPU plan, in-process
    plan = json.loads(js.output)
    assert plan["mode"] == "in_process" and js.exit_code == 1
    assert plan["refusals"] == ["model esc-role: tensor_parallel_size 2 needs GPUs; this run has none",
                                "model esc-role: adapter 'esc-role' folder haidequanbu/ESC-Role does not exist "
                                "(the base model is never used instead)"]  # ESC-Role's LoRA is no local folder here


# ---------------------------------------------------------------- GPUs found the same way at plan and run time
H100 = ("NVIDIA H100 80GB HBM3", 81559)


def _write(tmp_path, text: str):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(text)
    return cfg


def test_esc_eval_plan_run_as_a_user_finds_the_gpu_and_puts_role_and_target_on_it(fake_gpus, model_folder, tmp_path):
    """The H100 run's first job (notes/gpu-h100.md): ESC-Role's shape (13.1B) and a 7.4B target as local
    folders on one 80 GB card. `esc-eval plan` printed "in-process on no GPUs (CPU)" there, and serve mode
    refused both the folders and the sharing; here a fake nvidia-smi stands in for the card."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    fake_gpus(H100)
    role, target = model_folder("r14b"), model_folder("j7b")
    cfg = _write(tmp_path, f"role: {{model: vllm/{role}}}\ntargets: [{{model: vllm/{target}}}]\n")
    exe = Path(sys.executable).parent / "esc-eval"
    out = subprocess.run([str(exe), "plan", str(cfg)], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "plan: serve on 1 x H100 85.5 GB GPU (found by nvidia-smi)"
    assert any(line.startswith("- r14b [role]: Serve deployment r14b, 1 replica, 0.") for line in lines), lines
    assert any(line.startswith("- j7b [target]: Serve deployment j7b, 1 replica, 0.") for line in lines), lines
    gpu0 = next(line for line in lines if line.strip().startswith("GPU 0:"))
    shares = [float(x.rsplit(" ", 1)[1]) for x in gpu0.split(":", 1)[1].split(" + ")]
    assert len(shares) == 2 and sum(shares) <= 1
    assert lines[-1] == "ok: nothing refused" and not any("CPU" in line for line in lines)
    # each deployment sized by its KV cache over the run's expected sequence, as the run sizes it
    sized = [line for line in lines if "note: max_num_seqs " in line and "tokens per sequence" in line]
    assert len(sized) == 2, lines


def test_an_in_process_gpu_plan_shows_gpu_memory_and_kv_cache(fake_gpus, model_folder, tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    fake_gpus(H100)
    role, target = model_folder("r14b"), model_folder("j7b")
    base = f"role: {{model: vllm/{role}}}\ntargets: [{{model: vllm/{target}}}]\n"
    gpu = CliRunner().invoke(app, ["plan", str(_write(tmp_path, base + "execution: {num_gpus_per_worker: 1, "
                                                      "placement: {mode: in_process}}\n"))])
    assert gpu.exit_code == 0, gpu.output
    assert "- r14b [role]: in-process engine in each worker, 1 GPU of each worker" in gpu.output
    assert "KV cache" in gpu.output and "gpu_memory_utilization 0." in gpu.output
    assert "VLLM_CPU_KVCACHE_SPACE" not in gpu.output and "warning" not in gpu.output
    cpu = CliRunner().invoke(app, ["plan", str(_write(tmp_path, base + "execution: {placement: {mode: in_process}}\n"))])
    warning = [line for line in cpu.output.splitlines() if line.startswith("warning: ")]
    assert warning == ["warning: 1 x NVIDIA H100 80GB HBM3, 85.5 GB on this machine (nvidia-smi), but the plan puts "
                       "r14b, j7b on the CPU (placement.mode in_process with execution.num_gpus_per_worker 0): set "
                       "num_gpus_per_worker, or placement mode auto"]


def test_a_model_put_on_the_cpu_beside_a_gpu_is_said_first_at_run_time(engines, fake_gpus, tmp_path):

    fake_gpus(H100)
    said: list[str] = []
    cfg = _sim(["vllm/t1"], role="vllm/role", placement=PlacementConfig(mode="in_process"))
    with placed_simulation(cfg, tmp_path / "run", say=said.append):
        pass
    assert said[0].startswith("warning: 1 x NVIDIA H100 80GB HBM3, 85.5 GB on this machine (nvidia-smi), but the plan "
                              "puts vllm/role, vllm/t1 on the CPU")


def test_gpus_asked_for_that_this_machine_lacks(fake_gpus, model_folder, tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    fake_gpus(H100)
    target = model_folder("j7b")
    text = f"role: {{model: vllm/{target}}}\ntargets: [{{model: vllm/{target}}}]\nexecution: {{placement: {{gpus: 4}}}}\n"
    planned = CliRunner().invoke(app, ["plan", str(_write(tmp_path, text))])  # planning for a cluster: a warning
    assert planned.exit_code == 0 and ("warning: execution.placement.gpus 4: 1 x NVIDIA H100 80GB HBM3, 85.5 GB on this "
                                       "machine (nvidia-smi); a run started here (no --address) has only those"
                                       ) in planned.output
    cfg = SimulationConfig.model_validate({**__import__("yaml").safe_load(text), "cards": "sample", "limit": 1})
    with pytest.raises(PlanError, match=r"^execution.placement.gpus 4: 1 x NVIDIA H100"):
        with placed_simulation(cfg, tmp_path / "run"):
            pass
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_cluster_being_joined_is_asked_for_its_gpus(monkeypatch, fake_gpus):
    import ray

    from esc_eval.sim.driver import placement
    from esc_eval.sim.pool import on_ray as pool_ray

    fake_gpus(H100)  # this machine has one; the cluster has eight on two nodes
    monkeypatch.setattr(placement, "_joins_a_cluster", lambda ex: True)
    monkeypatch.setattr(pool_ray, "ensure_ray", lambda ex: None)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"GPU": 8.0, "accelerator_type:A100": 2.0})
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"GPU": 4.0}}] * 2)
    hw = placement.cluster_hardware(ExecutionConfig(ray_address="ray://head:10001"))
    assert (hw.gpus, hw.gpus_per_node, hw.accelerator_type, hw.gpu_memory_gb, hw.source) == (8, 4, "A100", 40.0, "ray")


def test_auto_runs_the_targets_one_after_another_in_the_workers_when_they_do_not_fit(engines, fake_gpus, model_folder,
                                                                                     tmp_path):
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.jobs.simulation import run_simulation

    fake_gpus(H100)
    role = f"vllm/{model_folder('r14b')}"
    targets = [f"vllm/{model_folder(n, 'j7b')}" for n in ("a", "b", "c")]  # 26.2 + 3 x 14.8 GB: not side by side
    cfg = _sim(targets, role=role, cards=2)
    said: list[str] = []
    with placed_simulation(cfg, tmp_path / "run", say=said.append) as placed:
        assert (placed.execution.workers, placed.execution.num_gpus_per_worker) == (1, 1.0)
        mapping = json.loads(placed.execution.env[PLACEMENT_ENV])
        shares = {k.split("|")[0]: v["engine"]["gpu_memory_utilization"] for k, v in mapping.items()}
        assert all(shares[role] + shares[t] <= 0.92 + 1e-6 for t in targets)
        run_simulation(placed, tmp_path / "run")
    assert said[0].startswith("placement: the simulation's 4 models do not fit side by side on 1 x H100 85.5 GB GPU")
    assert "placement: execution.num_gpus_per_worker set to 1 (the workers hold the engines)" in said
    starts = [name for kind, name in engines.events if kind == "start" and name != role]
    assert starts == targets  # one target engine at a time, each started after the previous one was released
    assert all(engines.events.index(("release", a)) < engines.events.index(("start", b)) for a, b in zip(starts, starts[1:]))
    run = RunFolder(tmp_path / "run", create=False)
    assert len(list(run.iter_rows("dialogues"))) == 6
    usage = {e["model"]: e for e in run.read_manifest()["usage"]["engines"]}
    # the role's share plus the targets' (each its part of the job's time) is the one GPU, not four
    total = sum(e["gpu_seconds"] for e in usage.values())
    wall = sum(e["wall_s"] for e in run.read_manifest()["events"] if e["kind"] == "simulation_end")
    assert total == pytest.approx(wall * shares[role] / 0.92 + wall * (1 - shares[role] / 0.92), rel=0.02, abs=0.005)  # each figure rounded to ms
    with pytest.raises(PlanError, match="serve: the simulation's 4 models do not fit side by side"):
        with placed_simulation(cfg.model_copy(update={"execution": cfg.execution.model_copy(
                update={"placement": PlacementConfig(mode="serve")})}), tmp_path / "refused"):
            pass


def test_served_targets_get_their_dialogues_in_turn(tmp_path):
    from esc_eval.sim.jobs.simulation_items import iter_items, select_cards

    cfg = _sim(["vllm/t1", "vllm/t2"], cards=2)
    cards = select_cards(cfg)
    by_target = [i["target_index"] for i in iter_items(cfg, cards, set())]
    assert by_target == [0, 0, 1, 1]  # engines in the workers: target by target
    serve = {ref_key(t, {}): {"serve": {"spec": f"serve/{t[5:]}", "options": {}}} for t in ("vllm/t1", "vllm/t2")}
    cfg.execution.env[PLACEMENT_ENV] = json.dumps(serve)
    in_turn = list(iter_items(cfg, cards, set()))
    assert [i["target_index"] for i in in_turn] == [0, 1, 0, 1]  # side by side: in turn, card by card
    assert sorted(i["dialogue_id"] for i in in_turn) == sorted(i["dialogue_id"] for i in iter_items(
        _sim(["vllm/t1", "vllm/t2"], cards=2), cards, set()))  # the same dialogues
