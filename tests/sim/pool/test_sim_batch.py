"""The batch layer on fake backends: resume by id, failures as rows, turn checkpoints, the pool."""
import gc
import json

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.jobs.simulation_items import iter_items, select_cards
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.worker import GC_GEN1_THRESHOLD
from esc_eval.sim.runs.checkpoints import TurnCheckpoints
from esc_eval.sim.runs.runfolder import RunFolder


def sim_cfg(**kw):
    base = dict(cards="sample", limit=3, role=ModelRef(model="fake/seeker"),
                targets=[ModelRef(model="fake/echo"), ModelRef(model="fake/fixed?reply=ok")],
                execution=ExecutionConfig(executor="local", concurrency=4, flush_rows=2))
    base.update(kw)
    return SimulationConfig(**base)


def test_simulation_writes_one_row_per_item_with_eleven_turns(tmp_path):
    res = run_simulation(sim_cfg(), tmp_path)
    assert res["items"] == 6 and res["failed"] == 0 and res["model_calls"] == 60
    run = RunFolder(tmp_path, create=False)
    rows = list(run.iter_rows("dialogues"))
    assert len(rows) == 6 and len({r["dialogue_id"] for r in rows}) == 6
    assert all(r["n_turns"] == 11 and r["status"] == "ok" for r in rows)
    assert {r["target_model"] for r in rows} == {"fake/echo", "fake/fixed?reply=ok"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["simulation"]["total_items"] == 6 and manifest["run_id"].startswith("run-")
    assert not list((tmp_path / "checkpoints").iterdir())  # dropped once rows are written


def test_rerun_skips_finished_dialogues(tmp_path):
    run_simulation(sim_cfg(), tmp_path)
    again = run_simulation(sim_cfg(limit=4), tmp_path)
    assert again["skipped_done"] == 6 and again["items"] == 2
    ids = [r["dialogue_id"] for r in RunFolder(tmp_path).iter_rows("dialogues")]
    assert len(ids) == len(set(ids)) == 8


def test_dialogue_ids_are_stable_and_distinct():
    cfg = sim_cfg(seeds=[0, 1], strategies=["official", "cot"])
    cards = select_cards(cfg)
    a = [i["dialogue_id"] for i in iter_items(cfg, cards, set())]
    b = [i["dialogue_id"] for i in iter_items(cfg, cards, set())]
    assert a == b and len(set(a)) == 3 * 2 * 2 * 2


def test_fault_injection_every_item_completes_or_is_recorded_failed(tmp_path):
    # 20% errors, 5% timeouts per call; 3 attempts per call
    faulty = "fake/echo?error_rate=0.2&timeout_rate=0.05&timeout=0.001&seed=7"
    cfg = sim_cfg(limit=8, targets=[ModelRef(model=faulty)],
                  execution=ExecutionConfig(executor="local", concurrency=8, max_attempts=3, retry_initial_wait_s=0.0,
                                            retry_max_wait_s=0.0, call_timeout_s=5))
    res = run_simulation(cfg, tmp_path)
    rows = list(RunFolder(tmp_path).iter_rows("dialogues"))
    assert len(rows) == 8 == res["items"]
    failed = [r for r in rows if r["status"] == "failed"]
    assert all(r["n_turns"] == 11 for r in rows if r["status"] == "ok")
    for r in failed:
        assert r["termination_reason"] in {"error", "timeout"} and r["error"]
    assert res["failed"] == len(failed)


def test_exhausted_retries_are_recorded_with_partial_turns(tmp_path):
    cfg = sim_cfg(limit=1, targets=[ModelRef(model="fake/echo?error_rate=1.0")],
                  execution=ExecutionConfig(executor="local", max_attempts=2, retry_initial_wait_s=0, retry_max_wait_s=0))
    run_simulation(cfg, tmp_path)
    (row,) = RunFolder(tmp_path).iter_rows("dialogues")
    assert row["status"] == "failed" and row["termination_reason"] == "error"
    assert row["n_turns"] == 2  # the opener and the first seeker turn survive as data
    assert "injected transient error" in row["error"]


def test_turn_checkpoint_resumes_a_half_finished_dialogue(tmp_path):
    cfg = sim_cfg(limit=1, targets=[ModelRef(model="fake/echo")])
    item = next(iter_items(cfg, select_cards(cfg), set()))
    from esc_eval.sim.dialogue.dialogue import Turn

    done = [Turn(0, "assistant", "opener"), Turn(1, "seeker", "CHECKPOINTED SEEKER TURN")]
    log = TurnCheckpoints(tmp_path / "checkpoints")  # what a killed worker leaves behind
    log.save(item["dialogue_id"], [t.to_row() for t in done])
    log.close()
    run_simulation(cfg, tmp_path)
    (row,) = RunFolder(tmp_path).iter_rows("dialogues")
    assert row["n_turns"] == 11 and row["turns"][1]["text"] == "CHECKPOINTED SEEKER TURN"
    assert row["turns"][2]["text"] == "echo: CHECKPOINTED SEEKER TURN"


def test_scoring_seven_rows_per_dialogue_and_resume(tmp_path):
    run_simulation(sim_cfg(), tmp_path)
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")), execution=ExecutionConfig(executor="local"))
    res = run_scoring(cfg, tmp_path)
    assert res["items"] == 6 and res["model_calls"] == 42
    scores = list(RunFolder(tmp_path).iter_rows("scores"))
    assert len(scores) == 42
    for s in scores:
        assert s["parse_status"] == "ok" and 0 <= s["score"] <= 4
        assert abs(sum(s["probs"]) - 1) < 1e-5 and s["probs"].index(max(s["probs"])) == s["score"]
    assert run_scoring(cfg, tmp_path)["items"] == 0  # everything done: nothing re-scored


def test_generate_method_records_parse_failures_as_null(tmp_path):
    run_simulation(sim_cfg(limit=1), tmp_path)
    judge = JudgeConfig(model=ModelRef(model="fake/fixed?reply=I think it deserves a 3 or 4"), method="generate")
    run_scoring(ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local")), tmp_path)
    scores = list(RunFolder(tmp_path).iter_rows("scores"))
    assert len(scores) == 14
    assert all(s["score"] is None and s["parse_status"] == "parse_failure" for s in scores)
    assert all(s["raw"] == "I think it deserves a 3 or 4" for s in scores)


class CountingJob(Job):
    kind = "dialogues"

    def __init__(self):
        self.calls = 0

    async def setup(self, models):
        pass

    async def run(self, item):
        return [], {"ok": item["n"] % 5 != 0, "calls": 1}


def test_pool_streams_lazily_generated_items(tmp_path):
    produced = []

    def items():
        for n in range(1000):
            produced.append(n)
            yield {"n": n}

    seen = []
    stats = run_pool(CountingJob(), items(), str(tmp_path), ExecutionConfig(executor="local", concurrency=8),
                     on_summary=lambda s, st: seen.append(len(produced) - st.done))
    assert stats.done == 1000 and stats.failed == 200
    assert max(seen) <= 8 * 2 + 1  # backpressure: the generator never runs far ahead


@pytest.mark.slow
def test_ray_pool_with_fake_models(tmp_path, ray_local):
    cfg = sim_cfg(limit=6, execution=ExecutionConfig(executor="ray", workers=2, concurrency=4, chunk_size=2,
                                                      num_cpus_per_worker=0.5, flush_rows=4))
    with WorkerPool(cfg.execution) as pool:
        res = run_simulation(cfg, tmp_path, pool=pool)
        # each worker process tuned its GC when it started (sim/pool/worker.py tune_gc)
        tuned = ray_local.get([w.__ray_call__.remote(lambda self: (gc.get_freeze_count() > 0, gc.get_threshold()[1]))
                               for w in pool.workers])
    assert tuned == [(True, GC_GEN1_THRESHOLD)] * 2
    assert res["items"] == 12 and res["failed"] == 0
    parts = RunFolder(tmp_path).parts("dialogues")
    rows = [r for p in parts for r in RunFolder(tmp_path).open_part(p).read().to_pylist()]
    assert len(rows) == 12 and len({r["dialogue_id"] for r in rows}) == 12


def test_registry_targets_bring_their_system_prompt():
    from esc_eval.serve.registry.registry import default_registry
    from esc_eval.sim.dialogue.targets import registry_system_prompt

    assert registry_system_prompt(ModelRef(model="fake/echo")) is None  # plain spec: release default
    no_system = [e.name for e in default_registry().models.values() if e.system_prompt is None]
    assert no_system, "the registry marks models whose templates have no system role"
    assert registry_system_prompt(ModelRef(model=no_system[0])) == ""
    assert registry_system_prompt(ModelRef(model="embedded")) is None


def test_per_worker_cpu_binding_gives_each_engine_its_own_core(monkeypatch):
    from esc_eval.sim.pool.on_ray import worker_env

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    ex = ExecutionConfig(workers=3, cpu_bind="per_worker", env={"VLLM_CPU_KVCACHE_SPACE": "4"})
    envs = [worker_env(ex, i) for i in range(3)]
    assert [e["VLLM_CPU_OMP_THREADS_BIND"] for e in envs] == ["0", "1", "0"]
    assert all(e["VLLM_CPU_KVCACHE_SPACE"] == "4" for e in envs)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in worker_env(ExecutionConfig(workers=2), 1)  # default: vLLM's own
    explicit = ExecutionConfig(cpu_bind="per_worker", env={"VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    assert worker_env(explicit, 1)["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"  # the user's setting wins


def test_cpu_bind_all_binds_the_engine_to_every_core_the_driver_may_use(monkeypatch):
    from esc_eval.sim.pool.on_ray import core_ranges, worker_env

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 5})
    assert worker_env(ExecutionConfig(cpu_bind="all"), 0)["VLLM_CPU_OMP_THREADS_BIND"] == "0-2,5"
    assert worker_env(ExecutionConfig(cpu_bind="all", env={"VLLM_CPU_OMP_THREADS_BIND": "3"}), 0)[
        "VLLM_CPU_OMP_THREADS_BIND"] == "3"  # the user's own binding wins
    assert "VLLM_CPU_OMP_THREADS_BIND" not in worker_env(ExecutionConfig(), 0)
    assert core_ranges({1, 3, 4, 5, 7}) == "1,3-5,7" and core_ranges({0}) == "0"


def test_one_model_under_two_names_gets_two_sets_of_dialogues(tmp_path):
    """Two targets of one model with different system prompts: distinct names in the rows and
    distinct dialogue ids; two targets that would share a name are refused at the door."""
    from pydantic import ValidationError

    cfg = sim_cfg(limit=2, targets=[ModelRef(model="fake/echo"),
                                    ModelRef(model="fake/echo", name="echo-curt", system_prompt="Be curt.")])
    res = run_simulation(cfg, tmp_path)
    rows = list(RunFolder(tmp_path).iter_rows("dialogues"))
    assert res["items"] == 4 and len({r["dialogue_id"] for r in rows}) == 4
    assert sorted({r["target_model"] for r in rows}) == ["echo-curt", "fake/echo"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["simulation"]["inputs"]["targets"]["echo-curt"]["system_prompt"] == "Be curt."
    usage = {r["model"]: r for r in manifest["usage"]["by_stage"] if r["stage"] == "target"}
    assert usage["echo-curt"]["spec"] == "fake/echo" and usage["echo-curt"]["calls"] == 10  # counted as its model
    with pytest.raises(ValidationError, match="both named 'fake/echo'"):
        sim_cfg(targets=[ModelRef(model="fake/echo"), ModelRef(model="fake/echo", system_prompt="Be curt.")])
