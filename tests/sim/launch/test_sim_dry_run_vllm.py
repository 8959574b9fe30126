"""The dry run against what the run then used, on the embedded model (the session's engine: executor local
builds `vllm/embedded` with the same engine kwargs, so no engine starts here): a scoring in each rubric
mode (one dialogue: one call of every dimension; two calls per dimension) counted with the model's own
tokenizer within 5% of the manifest's usage (sim/runs/usage.py); a short simulation whose estimate
(replies at their max_tokens) bounds what it used. The one-call rows on the real engine: each dimension
scored from the JSON answer with its full P(0..4)."""
from __future__ import annotations

import math

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.launch.dry_run import score_estimate
from esc_eval.sim.launch.simulate_estimate import simulate_estimate
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.official import read_official_dialogues
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = pytest.mark.slow
LOCAL = ExecutionConfig(executor="local")


def _used(run_dir, stage: str) -> dict[str, int]:
    usage = RunFolder(run_dir, create=False).read_manifest()["usage"]["by_stage"]
    rows = [u for u in usage if u["stage"] == stage]
    return {k: sum(u[k] for u in rows) for k in ("calls", "prompt_tokens", "completion_tokens")}


def test_the_dry_run_counts_within_5_percent_of_what_the_run_used(embedded_model, shared_data, tmp_path):
    run = RunFolder(tmp_path / "run")
    run.write_part("dialogues", read_official_dialogues(shared_data / "esc-eval" / "dialogues" / "llama3_en.json")[:1])
    for judge in (JudgeConfig(rubric_mode="one_call"), JudgeConfig(dimensions=["empathy", "overall"])):
        cfg = ScoringConfig(judge=judge, execution=LOCAL)
        before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
        est = score_estimate(cfg, run.location)
        assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before  # nothing written
        (row,) = est["judges"]
        assert row["tokens"].startswith("exact: SmolLM2")
        counted = row["modes"][judge.rubric_mode]
        run_scoring(cfg, run.location)
        used = _used(run.location, "judge") if judge.rubric_mode == "one_call" else {
            k: v - one_call_used[k] for k, v in _used(run.location, "judge").items()}
        assert counted["calls"] == used["calls"] == (1 if judge.rubric_mode == "one_call" else 2)
        total_counted = counted["prompt_tokens"] + counted["completion_tokens"]
        total_used = used["prompt_tokens"] + used["completion_tokens"]
        assert abs(total_counted - total_used) <= 0.05 * total_used, (counted, used)
        assert abs(counted["prompt_tokens"] - used["prompt_tokens"]) <= 0.05 * used["prompt_tokens"], (counted, used)
        if judge.rubric_mode == "one_call":
            one_call_used = used
            rows = [r for r in run.iter_rows("scores") if r["judge"] == judge.judge_id]
            assert len(rows) == 7 and all(r["parse_status"] == "ok" and r["score"] in range(5) for r in rows)
            assert all(r["probs_status"] == "full" and math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-4) for r in rows)
            assert all(max(range(5), key=lambda k: r["probs"][k]) == r["score"] for r in rows)  # greedy: the likeliest


def test_a_simulation_estimate_bounds_what_it_used(embedded_model, tmp_path):
    cfg = SimulationConfig(cards="sample", languages=["en"], limit=1, rounds=2,
                           role=ModelRef(params=GenerationParams(max_tokens=16)),
                           targets=[ModelRef(params=GenerationParams(max_tokens=24))], execution=LOCAL)
    est = {m["stage"]: m for m in simulate_estimate(cfg)["models"]}
    run_simulation(cfg, tmp_path / "sim")
    for stage in ("role", "target"):
        used = _used(tmp_path / "sim", stage)
        assert est[stage]["calls"] == used["calls"] == 2
        assert est[stage]["completion_tokens"] >= used["completion_tokens"]  # replies at their caps: an upper bound
        # the prompts hold the replies so far: counted at their caps, within 5% of what replies that reach
        # them hold, above what shorter ones do
        assert est[stage]["prompt_tokens"] >= 0.95 * used["prompt_tokens"]
