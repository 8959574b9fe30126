"""Engines released by need (sim/participants.py) and the plan followed at run time (sim/placement.py),
on stand-in engines: what a worker holds when, what it builds where the plan placed a model, and
that a refusal stops the run before anything starts. The real paths: tests/sim/test_sim_autoscale_slow.py."""
from __future__ import annotations

import asyncio
import json

import pytest

from esc_eval.serve.chat import ChatResult
from esc_eval.serve.plan import PLACEMENT_ENV, PlacementConfig, PlanError, ref_key
from esc_eval.sim.config import ExecutionConfig, ModelRef, SimulationConfig


class EngineLog:
    def __init__(self):
        self.live: set[str] = set()
        self.events: list[tuple[str, str]] = []
        self.most_live_targets = 0


class StandInEngine:
    """A `vllm/<name>` model whose "engine" starts at its first call and stops when released."""

    def __init__(self, name: str, log: EngineLog, **options):
        self.name, self.log, self.options = f"vllm/{name}", log, options
        self._released = False

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        assert not self._released, f"{self.name} called after its engine was released"
        if self.name not in self.log.live:
            self.log.live.add(self.name)
            self.log.events.append(("start", self.name))
            targets = {n for n in self.log.live if "/t" in n}
            self.log.most_live_targets = max(self.log.most_live_targets, len(targets))
        await asyncio.sleep(0.005)
        return ChatResult(text="I hear you.", prompt_tokens=5, completion_tokens=3)

    def release(self) -> bool:
        self._released = True
        self.log.live.discard(self.name)
        self.log.events.append(("release", self.name))
        return True

    async def close(self):
        pass


@pytest.fixture
def engines(monkeypatch):
    from esc_eval.serve import vllm_engine

    log = EngineLog()
    monkeypatch.setattr(vllm_engine, "make_vllm_model", lambda name, **o: StandInEngine(name, log, **o))
    return log


def _sim(targets, role="vllm/role", cards=3, **ex):
    return SimulationConfig(cards="sample", languages=["en"], limit=cards, rounds=1, role=ModelRef(model=role),
                            targets=[ModelRef(model=t) for t in targets],
                            execution=ExecutionConfig(executor="local", concurrency=8, chunk_size=4,
                                                      turn_checkpoints=False, **ex))


def test_a_worker_holds_the_role_and_one_target_engine_at_a_time(engines, tmp_path):
    from esc_eval.sim.runfolder import RunFolder
    from esc_eval.sim.simulation import run_simulation

    result = run_simulation(_sim(["vllm/t1", "vllm/t2", "vllm/t3"]), tmp_path / "run")
    rows = list(RunFolder(tmp_path / "run", create=False).iter_rows("dialogues"))
    assert result["items"] == 9 and all(r["status"] == "ok" for r in rows)
    assert engines.most_live_targets == 1  # the next target's engine started only after the previous one went
    order = [e for e in engines.events if e[1] != "vllm/role"]
    assert order == [("start", "vllm/t1"), ("release", "vllm/t1"), ("start", "vllm/t2"), ("release", "vllm/t2"),
                     ("start", "vllm/t3")]
    assert ("release", "vllm/role") not in engines.events  # the role is needed by every dialogue


def test_a_target_sharing_the_roles_engine_never_waits_or_goes(engines, tmp_path):
    from esc_eval.sim.simulation import run_simulation

    result = run_simulation(_sim(["vllm/role", "vllm/t1", "fake/echo"]), tmp_path / "run")
    assert result["items"] == 9 and result["failed"] == 0
    assert [e for e in engines.events if e[0] == "release"] == []  # t1 was the last engine target: kept


def test_a_new_job_releases_the_engines_it_does_not_use(engines):
    from esc_eval.sim.participants import ModelPool

    pool = ModelPool()
    role, target = ModelRef(model="vllm/role"), ModelRef(model="vllm/t1")
    for ref in (role, target):
        asyncio.run(pool.raw(ref).chat([{"role": "user", "content": "hi"}]))
    assert pool.retain([role]) == [pool.key(target)]  # a scoring job whose judge is the role's model
    assert engines.live == {"vllm/role"}
    assert pool.retain([role]) == []


def test_placement_map_in_the_environment_decides_what_the_pool_builds(engines, monkeypatch):
    from esc_eval.serve.serve_handle import ServeHandleChatModel
    from esc_eval.sim.participants import ModelPool

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
    from esc_eval.sim import placement

    monkeypatch.setattr(placement, "cluster_hardware", lambda ex: pytest.fail("probed the cluster"))
    cfg = _sim(["fake/echo"], role="fake/seeker")
    with placement.placed_simulation(cfg, tmp_path) as placed:
        assert placed is cfg or placed.execution == cfg.execution


def test_in_process_gpu_plan_reaches_the_workers_without_changing_the_dialogues(engines, monkeypatch, tmp_path):
    """On described GPUs (placement.gpus): each engine gets its share through the workers' environment;
    the configured models and options, hence dialogue ids and fingerprints, stay as they were."""
    from esc_eval.sim import placement
    from esc_eval.sim.runfolder import RunFolder
    from esc_eval.sim.simulation import iter_items, run_simulation, select_cards

    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4,
                                                    "num_key_value_heads": 2, "hidden_size": 64}))
    (folder / "model.safetensors").write_bytes(b"\0" * 2_000_000)  # 1M parameters
    role = f"vllm/{folder}"
    cfg = _sim([role, "vllm/t1"], role=role, num_gpus_per_worker=1,
               placement=PlacementConfig(mode="in_process", gpus=1, gpu_memory_gb=80))
    cfg.targets[1].options = {}
    with pytest.raises(PlanError, match="vllm/t1: size unknown"):  # no size: its GPU share cannot be planned
        with placement.placed_simulation(cfg, tmp_path / "refused"):
            pass
    assert not (tmp_path / "refused").exists()
    cfg.targets = cfg.targets[:1]
    ids_before = [i["dialogue_id"] for i in iter_items(cfg, select_cards(cfg), set())]
    with placement.placed_simulation(cfg, tmp_path / "run") as placed:
        mapping = json.loads(placed.execution.env[PLACEMENT_ENV])
        assert mapping == {ref_key(role, {}): {"engine": {"gpu_memory_utilization": 0.92}}}
        assert placed.role == cfg.role and placed.targets == cfg.targets
        run_simulation(placed, tmp_path / "run")
    manifest = RunFolder(tmp_path / "run", create=False).read_manifest()
    assert manifest["placement"]["mode"] == "in_process" and manifest["placement"]["hardware"]["gpus"] == 1
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
    assert "- esc-role [role]: Serve deployment esc-role, 1-1 replicas, 2 GPUs per replica" in ok.output
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
