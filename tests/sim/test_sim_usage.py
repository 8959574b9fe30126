"""Usage and cost per model and stage, written to the manifest at the end of every job."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.registry import TokenPrice, default_registry
from esc_eval.sim.config import ExecutionConfig, JudgeConfig, ModelRef, ScoringConfig, SimulationConfig
from esc_eval.sim.runfolder import RunFolder
from esc_eval.sim.scoring import run_scoring
from esc_eval.sim.simulation import run_simulation
from esc_eval.sim.usage import compute_usage


def _stage(usage, stage, model):
    return next(r for r in usage["by_stage"] if r["stage"] == stage and r["model"] == model)


def test_jobs_write_usage_to_the_manifest(tmp_path):
    cfg = SimulationConfig(cards="sample", limit=3, role=ModelRef(model="fake/seeker"),
                           targets=[ModelRef(model="fake/echo")],
                           execution=ExecutionConfig(executor="local", concurrency=4, workers=2, num_gpus_per_worker=0.5))
    run_simulation(cfg, tmp_path)
    usage = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    rows = list(RunFolder(tmp_path).iter_rows("dialogues"))
    target = _stage(usage, "target", "fake/echo")
    role = _stage(usage, "role", "fake/seeker")
    turns = [t for r in rows for t in r["turns"] if (t["prompt_tokens"] or t["completion_tokens"])]
    assert target["calls"] + role["calls"] == len(turns) and role["calls"] == 3 * 5
    assert target["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns if t["speaker"] == "assistant") > 0
    assert role["completion_tokens"] == sum(t["completion_tokens"] for t in turns if t["speaker"] == "seeker") > 0
    assert target["dollars"] is None  # self-hosted: its cost is engine time
    engines = {e["model"]: e for e in usage["engines"]}
    assert set(engines) == {"fake/echo", "fake/seeker"}
    assert engines["fake/echo"]["engine_seconds"] > 0
    assert engines["fake/echo"]["gpu_seconds"] == pytest.approx(engines["fake/echo"]["engine_seconds"] * 0.5, rel=1e-3)
    # Scoring adds the judge stage; the earlier stages are recomputed, not doubled.
    run_scoring(ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")),
                              execution=ExecutionConfig(executor="local")), tmp_path)
    usage2 = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    judge = _stage(usage2, "judge", "fake/judge:logprob:official")  # the judge id of the score rows
    assert judge["calls"] == 3 * 7 and judge["spec"] == "fake/judge" and judge["completion_tokens"] == 21
    assert {e["model"] for e in usage2["engines"]} == {"fake/echo", "fake/seeker", "fake/judge"}
    assert _stage(usage2, "role", "fake/seeker")["calls"] == role["calls"]


def test_dollars_from_the_registry_and_config_overrides(tmp_path):
    from esc_eval.analysis.fake_runs import write_fake_run

    run = RunFolder(write_fake_run(tmp_path / "r", 10, models=["gpt-4", "openai/gpt-3.5-turbo", "fake/echo"]))
    usage = compute_usage(run)
    gpt4 = _stage(usage, "target", "gpt-4")
    price = default_registry().get("gpt-4").price
    assert price is not None and gpt4["spec"] == "openai/gpt-4"
    want = gpt4["prompt_tokens"] / 1e6 * price.prompt_per_1m + gpt4["completion_tokens"] / 1e6 * price.completion_per_1m
    assert gpt4["dollars"] == pytest.approx(want) and want > 0
    # A spec is matched to its registry entry (chatgpt = openai/gpt-3.5-turbo).
    assert _stage(usage, "target", "openai/gpt-3.5-turbo")["dollars"] > 0
    assert _stage(usage, "target", "fake/echo")["dollars"] is None
    cheap = compute_usage(run, {"gpt-4": TokenPrice(prompt_per_1m=1.0, completion_per_1m=0.0)})
    assert _stage(cheap, "target", "gpt-4")["dollars"] == pytest.approx(gpt4["prompt_tokens"] / 1e6)
    assert usage["total_dollars"] == pytest.approx(sum(r["dollars"] or 0 for r in usage["by_stage"]))


def test_bad_price_is_named():
    with pytest.raises(ValueError, match="prompt_per_1m"):
        SimulationConfig(prices={"gpt-4": {"prompt_per_1m": -1, "completion_per_1m": 1}})
