"""Exactly-once run folders on fake backends: one row per dialogue and per (dialogue, dimension,
judge), whatever was re-run on the way (failed-then-retried items, re-run chunks, timer flushes)."""
import asyncio
import datetime as dt
import json
import time

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import SimulationJob, run_simulation
from esc_eval.sim.jobs.simulation_items import iter_items, select_cards
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.worker import WorkerCore
from esc_eval.sim.runs.runfolder import RunFolder


def physical_rows(run_dir, kind):
    return [r for p in sorted((run_dir / kind).glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


def sim_cfg(target="fake/echo", limit=4, **ex):
    execution = ExecutionConfig(executor="local", concurrency=4, flush_rows=1, retry_initial_wait_s=0,
                                retry_max_wait_s=0, **ex)
    return SimulationConfig(cards="sample", limit=limit, role=ModelRef(model="fake/seeker"),
                            targets=[ModelRef(model=target)], execution=execution)


def dialogue_row(did, status, finished, run_id="r"):
    t = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=finished)
    return {"run_id": run_id, "dialogue_id": did, "status": status, "turns": [], "n_turns": 0, "started_at": t,
            "finished_at": t}


def test_read_keeps_one_row_per_key_ok_beats_failed_then_latest_wins(tmp_path):
    run = RunFolder(tmp_path)
    run.write_part("dialogues", [dialogue_row("a", "failed", 1), dialogue_row("b", "ok", 1, run_id="old")])
    run.write_part("dialogues", [dialogue_row("a", "ok", 2), dialogue_row("b", "ok", 3, run_id="new"),
                                 dialogue_row("c", "failed", 1)])
    run.write_part("dialogues", [dialogue_row("a", "failed", 9)])  # a late failure never hides a success
    rows = {r["dialogue_id"]: r for r in run.iter_rows("dialogues")}
    assert len(list(run.iter_rows("dialogues"))) == 3
    assert rows["a"]["status"] == "ok" and rows["b"]["run_id"] == "new" and rows["c"]["status"] == "failed"
    table = run.read("dialogues", columns=["dialogue_id", "run_id"])
    assert sorted(table.column("dialogue_id").to_pylist()) == ["a", "b", "c"]
    assert run.done_dialogue_ids() == {"a", "b"}
    assert run.compact("dialogues") == (6, 3)
    assert len(run.parts("dialogues")) == 1 and len(physical_rows(tmp_path, "dialogues")) == 3
    assert {r["dialogue_id"]: r["run_id"] for r in physical_rows(tmp_path, "dialogues")}["b"] == "new"
    assert run.compact("dialogues") == (3, 3)  # idempotent


def test_failed_then_retried_resume_leaves_exactly_one_row_per_dialogue(tmp_path):
    # Half the target calls fail with one attempt each; resume (retry_failed) until all are ok. The
    # fake's fault draw depends on its attempt count, so a shared pool (same model) eventually passes.
    cfg = sim_cfg(target="fake/echo?error_rate=0.3&seed=3", limit=6, max_attempts=1, retry_failed=True)
    with WorkerPool(cfg.execution) as pool:
        first = run_simulation(cfg, tmp_path, pool=pool)
        assert first["failed"] > 0, "the fault rate should fail some dialogues on the first run"
        for _ in range(30):
            rows = physical_rows(tmp_path, "dialogues")
            ids = [r["dialogue_id"] for r in rows]
            assert len(ids) == len(set(ids)) == 6, "a finished run holds exactly one row per dialogue"
            if all(r["status"] == "ok" for r in rows):
                break
            run_simulation(cfg, tmp_path, pool=pool)
    rows = physical_rows(tmp_path, "dialogues")
    assert all(r["status"] == "ok" and r["n_turns"] == 11 for r in rows)


def test_rerun_chunk_items_are_kept_once(tmp_path):
    # A chunk re-run after a worker death sends items whose rows were already flushed: emulate it by
    # sending every item twice (flush_rows=1 writes each row before its twin runs).
    cfg = sim_cfg(limit=3)
    items = list(iter_items(cfg, select_cards(cfg), set()))
    run = RunFolder(tmp_path)
    run_pool(SimulationJob(cfg, str(tmp_path), "run-x"), items + items, str(tmp_path), cfg.execution)
    ids = [r["dialogue_id"] for r in physical_rows(tmp_path, "dialogues")]
    assert sorted(ids) == sorted(i["dialogue_id"] for i in items)
    assert len(run.parts("dialogues")) == 1


def test_scores_redone_after_errors_are_kept_once(tmp_path):
    run_simulation(sim_cfg(limit=2), tmp_path)
    judge = JudgeConfig(model=ModelRef(model="fake/judge?error_rate=0.4&seed=1"), method="generate")
    cfg = ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", max_attempts=1, flush_rows=1,
                                                                retry_initial_wait_s=0, retry_max_wait_s=0))
    with WorkerPool(cfg.execution) as pool:
        for _ in range(30):
            run_scoring(cfg, tmp_path, pool=pool)
            rows = physical_rows(tmp_path, "scores")
            keys = [(r["dialogue_id"], r["dimension"], r["judge"]) for r in rows]
            assert len(keys) == len(set(keys)) == 2 * len(judge.dimensions)
            if all(r["parse_status"] != "error" for r in rows):
                break
    assert all(r["parse_status"] == "ok" for r in physical_rows(tmp_path, "scores"))


class _OneRowJob(Job):
    """Only what a Job must say: every other hook keeps its default (sim/pool/job.py)."""

    kind = "dialogues"

    async def setup(self, models):
        pass

    async def run(self, item):
        return [dialogue_row(item["dialogue_id"], "ok", 1)], {}


def test_parts_flush_on_a_timer_when_no_further_row_arrives(tmp_path):
    ex = ExecutionConfig(executor="local", flush_rows=100, flush_seconds=0.2)

    async def scenario():
        core = WorkerCore(_OneRowJob(), str(tmp_path), ex, ModelPool())
        await core.run_chunk([{"dialogue_id": "a"}])
        assert not RunFolder(tmp_path).parts("dialogues")  # buffered: 1 row < flush_rows
        await asyncio.sleep(0.8)  # no new row arrives; the timer must flush
        parts = RunFolder(tmp_path).parts("dialogues")
        await core.finish()
        return parts

    assert len(asyncio.run(scenario())) == 1


def test_secret_looking_env_values_are_redacted_in_the_manifest(tmp_path):
    env = {"OPENAI_API_KEY": "sk-live-123", "RAY_AUTH_TOKEN": "tok", "DB_PASSWORD": "pw", "HF_SECRET": "s",
           "VLLM_CPU_KVCACHE_SPACE": "2"}
    cfg = sim_cfg(limit=1, env=env)
    run_simulation(cfg, tmp_path)
    text = (tmp_path / "manifest.json").read_text()
    for secret in ("sk-live-123", '"tok"', '"pw"', '"s"'):
        assert secret not in text
    saved = json.loads(text)["simulation"]["config"]["execution"]["env"]
    assert saved["VLLM_CPU_KVCACHE_SPACE"] == "2" and saved["OPENAI_API_KEY"] == "***redacted***"
    assert set(saved) == set(env)


class _DropsOneRowJob(_OneRowJob):
    """Writes every item's row except one: what a worker writing to a disk the driver cannot see
    looks like from the driver."""

    def item_keys(self, item):
        return [item["dialogue_id"]]

    def present_keys(self, run):
        return set(run.read("dialogues", columns=["dialogue_id"]).column("dialogue_id").to_pylist())

    async def run(self, item):
        rows, summary = await super().run(item)
        return ([] if item["dialogue_id"] == "lost" else rows), summary


def test_the_driver_refuses_success_for_rows_missing_from_the_folder(tmp_path):
    import pytest

    from esc_eval.sim.pool.pool import MissingRowsError

    items = [{"dialogue_id": d} for d in ("a", "lost", "b")]
    with pytest.raises(MissingRowsError, match=r"1 of 3 dialogues rows are not in .*: 1 sent to worker 0 on .*"
                                               r"\(this process\) \(e\.g\. lost\); .*run the same command again"):
        run_pool(_DropsOneRowJob(), items, str(tmp_path), ExecutionConfig(executor="local"))
    # The rows that did arrive stay for the resume.
    assert sorted(r["dialogue_id"] for r in physical_rows(tmp_path, "dialogues")) == ["a", "b"]
    stats = run_pool(_DropsOneRowJob(), items[:1], str(tmp_path / "ok"), ExecutionConfig(executor="local"))
    assert stats.rows_checked == 1


def test_a_job_is_a_job_with_a_part_kind_or_the_pool_refuses_it_before_anything_starts(tmp_path):
    from esc_eval.sim.pool.job import check_job

    class Duck:  # the old protocol's shape, not a Job: its hooks would be guessed at
        kind = "dialogues"

        async def setup(self, models):
            pass

        async def run(self, item):
            return [], {}

    class NoKind(Job):
        async def setup(self, models):
            pass

        async def run(self, item):
            return [], {}

    with pytest.raises(TypeError, match="Duck is not a sim.pool.job.Job"):
        run_pool(Duck(), [{"dialogue_id": "a"}], str(tmp_path / "duck"), ExecutionConfig(executor="local"))
    with pytest.raises(TypeError, match="NoKind.kind must name the part kind"):
        check_job(NoKind())
    assert not (tmp_path / "duck").exists() or not RunFolder(tmp_path / "duck").parts("dialogues")
    # the defaults: no keys to check, no demands, nothing to do after a flush, on a rerun or at the end
    job = _OneRowJob()
    assert job.item_keys({"dialogue_id": "a"}) is None and job.present_keys(None) == set() and job.demands() == []
    assert (job.unit, job.default_concurrency, job.calls_per_item) == ("dialogue", 32, None)
    stats = run_pool(job, [{"dialogue_id": "a"}, {"dialogue_id": "b"}], str(tmp_path / "ok"), ExecutionConfig(executor="local"))
    assert stats.done == 2 and len(RunFolder(tmp_path / "ok").read("dialogues")) == 2
