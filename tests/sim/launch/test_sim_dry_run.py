"""The price before the run (sim/launch/dry_run.py): what a scoring or a simulation would send, counted
without sending or writing anything, priced at the shipped list prices online against batch and per
dimension against one call per dialogue; --max-cost refusing before anything is sent. On the embedded
model against what the run then used: test_sim_dry_run_vllm.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.prices import shipped_price
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.launch.dry_run import check_max_cost, score_estimate
from esc_eval.sim.launch.simulate_estimate import simulate_estimate
from esc_eval.sim.pool.config import ExecutionConfig

REPO = Path(__file__).resolve().parents[3]
LOCAL = ExecutionConfig(executor="local", concurrency=4, chunk_size=2, flush_seconds=0.2, max_attempts=1)


def _fake_run(tmp_path, n: int = 3) -> Path:
    from esc_eval.analysis.results.fake_runs import write_fake_run

    return Path(write_fake_run(tmp_path / "run", n, models=["fake/echo"]))


def _files(path: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in path.rglob("*")}


def test_a_scoring_dry_run_counts_both_modes_and_writes_nothing(tmp_path):
    run = _fake_run(tmp_path)
    before = _files(run)
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")), execution=LOCAL)
    est = score_estimate(cfg, run)
    assert _files(run) == before  # nothing written
    n = est["dialogues_to_score"]
    (judge,) = est["judges"]
    per, one = judge["modes"]["per_dimension"], judge["modes"]["one_call"]
    assert n >= 1 and per["calls"] == 7 * n and one["calls"] == n and judge["rubric_mode"] == "per_dimension"
    assert per["completion_tokens"] == 7 * n  # one constrained label a call
    assert one["prompt_tokens"] < per["prompt_tokens"]  # the dialogue once instead of seven times
    assert judge["tokens"].startswith("estimated") and est["estimate_usd"] == 0.0  # a fake: no tokenizer, no price
    # a resume owes only what is missing: after the one-call judge scored, it has nothing left
    one_cfg = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"rubric_mode": "one_call"})})
    run_scoring(one_cfg, run)
    assert score_estimate(one_cfg, run)["dialogues_to_score"] == 0
    assert score_estimate(cfg, run)["dialogues_to_score"] == n  # the per-dimension judge is another judge


def test_an_api_judge_is_priced_online_batch_and_per_mode_without_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a dry run sends nothing: no key needed
    run = _fake_run(tmp_path)
    est = score_estimate(ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4o"))), run)
    (judge,) = est["judges"]
    online, batch = shipped_price("openai/gpt-4o"), shipped_price("openai/gpt-4o", batch=True)
    for mode in ("per_dimension", "one_call"):
        m = judge["modes"][mode]
        want = m["prompt_tokens"] / 1e6 * online.prompt_per_1m + m["completion_tokens"] / 1e6 * online.completion_per_1m
        assert m["cost_usd"]["online"] == pytest.approx(want, rel=1e-4)
        assert m["cost_usd"]["batch"] == pytest.approx(want / 2, rel=1e-4)  # OpenAI's batch API: half
    assert judge["modes"]["one_call"]["cost_usd"]["online"] < judge["modes"]["per_dimension"]["cost_usd"]["online"]
    assert est["estimate_usd"] == judge["modes"]["per_dimension"]["cost_usd"]["online"]  # this run's mode, online
    assert judge["price"]["read_on"] == "2026-12-04" and "litellm" in judge["price"]["source"]
    # the config's price wins, as the spend cap's does
    mine = score_estimate(ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4o")),
                                        prices={"openai/gpt-4o": TokenPrice(prompt_per_1m=1.0, completion_per_1m=0.0)}), run)
    m = mine["judges"][0]["modes"]["per_dimension"]
    assert m["cost_usd"]["online"] == pytest.approx(m["prompt_tokens"] / 1e6) and mine["judges"][0]["price"]["read_on"] is None


def test_max_cost_refuses_an_estimate_over_it_or_one_it_cannot_price():
    check_max_cost({"job": "score", "estimate_usd": 1.0, "unpriced": []}, 2.0)
    check_max_cost({"job": "score", "estimate_usd": 5.0, "unpriced": []}, None)
    with pytest.raises(ValueError, match=r"estimated \$3.00 at list prices is over --max-cost \$2.*nothing was sent"):
        check_max_cost({"job": "score", "estimate_usd": 3.0, "unpriced": []}, 2.0)
    with pytest.raises(ValueError, match="no price for openai/mystery"):
        check_max_cost({"job": "simulate", "estimate_usd": None, "unpriced": ["openai/mystery"]}, 2.0)


def test_a_simulation_dry_run_counts_every_call_at_its_cap(tmp_path):
    cfg = SimulationConfig(cards="sample", languages=["en"], limit=2, rounds=3,
                           role=ModelRef(model="fake/seeker", params=GenerationParams(max_tokens=10)),
                           targets=[ModelRef(model="openai/gpt-4o-mini", params=GenerationParams(max_tokens=20)),
                                    ModelRef(model="fake/echo", params=GenerationParams(max_tokens=30))])
    est = simulate_estimate(cfg)
    rows = {(m["stage"], m["model"]): m for m in est["models"]}
    assert est["dialogues"] == 4 and rows[("role", "fake/seeker")]["calls"] == 4 * 3
    api = rows[("target", "openai/gpt-4o-mini")]
    assert api["calls"] == 6 and api["completion_tokens"] == 6 * 20
    price = shipped_price("openai/gpt-4o-mini")
    assert api["cost_usd"]["online"] == pytest.approx(api["prompt_tokens"] / 1e6 * price.prompt_per_1m
                                                      + 120 / 1e6 * price.completion_per_1m, rel=1e-4)
    # the prompts grow by the replies so far: the third round's target call holds two of each side
    assert api["prompt_tokens"] > 6 * (10 + 20) // 2
    assert est["estimate_usd"] == pytest.approx(api["cost_usd"]["online"])


def test_the_cli_refuses_over_max_cost_in_one_line_before_anything_is_written(tmp_path):
    run = _fake_run(tmp_path)
    before = _files(run)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "OPENAI_API_KEY": "sk-never-used", "OPENAI_BASE_URL": "http://127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "score", "-i", str(run), "--judge", "openai/gpt-4",
                           "--rubric-mode", "one_call", "--max-cost", "0.000001"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "over --max-cost" in lines[0] and "Traceback" not in proc.stderr
    assert _files(run) == before and proc.stdout == ""
