"""`esc-eval bench serve` against vLLM's own client (`vllm bench serve`), both on an endpoint whose
timings are planted: every request's first token comes TTFT_S after the request and each later one
ITL_S after the last (tests/sim/bench/serve/openai_stream_server.py), so what each client should read is
known in advance, and the endpoint's speed does not drift between the runs as a model server's does on
a shared 2-core box (5-15% over a few minutes; the cross-check on the real endpoint needed a bound of
10% plus the runs' spread, up to 15%, and then passed a client 10% off).

What it checks: each tool run as its user runs it (its own process, imported once, two runs each in
the order vLLM, ours, ours, vLLM), the same random workload (same prompt lengths under the embedded
model's chat template), the same warm-up, the same session header, greedy; pooled over each tool's two
runs, our mean TTFT (after each run's first request: vLLM's client warms up with its first prompt) and
our request throughput within BOUND (5%) of vLLM's (seen: 0.98-1.02), and each tool's mean TTFT within
TRUTH_BOUND (10%) of the planted one (the server's thread and localhost add 2-4% to 250 ms here, alike
for both). A client that reads 10% off fails: the same check on our runs with their TTFT or
throughput moved by 10% either way is asserted to fail.
"""
from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.slow  # imports vLLM in a process of its own; timings compared, so not beside others

TTFT_S, ITL_S, BOUND, TRUTH_BOUND = 0.25, 0.02, 0.05, 0.10
N, CONCURRENCY, INPUT_LEN, OUTPUT_LEN, WARMUP, SESSION = 32, 4, 96, 16, 8, "cross-check"
KEYS = ("request_throughput", "mean_ttft_after_first_ms")


def pooled(runs: list[dict], key: str) -> float:
    if key.endswith("throughput"):  # requests over the runs' summed durations
        return sum(r["completed"] for r in runs) / sum(r["completed"] / r[key] for r in runs)
    return sum(r[key] for r in runs) / len(runs)  # means over equal request counts


def disagreements(ours: list[dict], vllm: list[dict]) -> dict[str, float]:
    """Each compared figure's pooled ratio (ours / vLLM's) where it is more than BOUND from 1; each
    tool's mean TTFT over the planted one where it is more than TRUTH_BOUND from 1."""
    out = {k: pooled(ours, k) / pooled(vllm, k) for k in KEYS}
    out = {k: r for k, r in out.items() if abs(r - 1) > BOUND}
    for tool, runs in (("ours", ours), ("vllm", vllm)):
        r = pooled(runs, "mean_ttft_after_first_ms") / (1000 * TTFT_S)
        if abs(r - 1) > TRUTH_BOUND:
            out[f"{tool} ttft / planted"] = r
    return out


def off_by(runs: list[dict], key: str, factor: float) -> list[dict]:
    return [{**r, key: r[key] * factor} for r in runs]


def test_our_client_reads_what_vllms_reads_on_planted_timings(tmp_path):
    from command_session import CommandSession
    from openai_stream_server import StreamServer
    from transformers import AutoTokenizer

    from esc_eval.serve.engines.embedded import embedded_model_path
    from esc_eval.sim.bench.serve.vllm_cli import PRELUDE

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path()))

    def prompt_tokens(messages: list[dict]) -> int:  # as vLLM's server counts them: the chat template applied
        return len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))

    def level(res: dict) -> dict:
        return res["arms"][0]["levels"][0]

    def check(r: dict) -> dict:  # what each run must hold, whatever the timings
        assert r["completed"] == N and r["failed"] == 0
        assert r["total_output_tokens"] == N * OUTPUT_LEN
        assert len(r["ttfts"]) == N and r["mean_ttft_ms"] == pytest.approx(1000 * sum(r["ttfts"]) / N)
        r["mean_ttft_after_first_ms"] = 1000 * sum(r["ttfts"][1:]) / (N - 1)
        return r

    with StreamServer(model="embedded", ttft_s=TTFT_S, itl_s=ITL_S, prompt_tokens=prompt_tokens) as server:
        base = server.url.removesuffix("/v1")

        def theirs(i: int) -> dict:
            run = clients["vllm"].run(
                ["bench", "serve", "--backend", "openai-chat", "--base-url", base, "--endpoint", "/v1/chat/completions",
                 "--model", "embedded", "--tokenizer", str(embedded_model_path()), "--dataset-name", "random",
                 "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--num-prompts", str(N),
                 "--max-concurrency", str(CONCURRENCY), "--ignore-eos", "--num-warmups", str(WARMUP), "--temperature",
                 "0", "--top-p", "1", "--header", f"x-session-id={SESSION}", "--percentile-metrics", "ttft,tpot,itl,e2el",
                 "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
                 "--result-filename", f"vllm-{i}.json"])
            assert run["rc"] == 0, run["stdout"][-2000:] + clients["vllm"].tail()
            return json.loads((tmp_path / f"vllm-{i}.json").read_text())

        def ours(i: int) -> dict:
            path = tmp_path / f"ours-{i}.json"
            run = clients["ours"].run(["bench", "serve", "--base-url", server.url, "--model", "embedded", "--workload",
                                       "random", "--input-len", str(INPUT_LEN), "--max-tokens", str(OUTPUT_LEN), "--num",
                                       str(N), "--concurrency", str(CONCURRENCY), "--warmup", str(WARMUP), "--session-id",
                                       SESSION, "--save-detailed", "-o", str(path)])
            assert run["rc"] == 0, clients["ours"].tail()
            return level(json.loads(path.read_text()))

        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
        with CommandSession("vllm bench serve", PRELUDE, "vllm", tmp_path / "vllm.log", env) as vllm_client, \
                CommandSession("esc-eval bench serve", "from esc_eval.cli.app import main", "esc-eval",
                               tmp_path / "ours.log", env) as our_client:
            clients = {"vllm": vllm_client, "ours": our_client}
            vllm_client.ready(), our_client.ready()  # both imported before anything is timed
            runs: dict[str, list[dict]] = {"vllm": [], "ours": []}
            for i, tool in enumerate(["vllm", "ours", "ours", "vllm"]):
                runs[tool].append(check((theirs if tool == "vllm" else ours)(i)))
        sent = [r["body"] for r in server.requests if r["body"].get("stream")]
    assert {r["headers"].get("x-session-id") for r in server.requests if r["body"].get("stream")} == {SESSION}
    assert len(sent) >= 4 * N  # each run's measured requests, and its warm-up
    for mine, vllm in zip(runs["ours"], runs["vllm"]):
        assert mine["total_input_tokens"] == vllm["total_input_tokens"]  # same prompt lengths, same chat template
    ratios = {k: pooled(runs["ours"], k) / pooled(runs["vllm"], k) for k in KEYS}
    print("esc-eval / vllm bench serve (pooled):", {k: round(v, 3) for k, v in ratios.items()},
          "TTFT ms (planted 250):", {t: round(pooled(rs, "mean_ttft_after_first_ms"), 1) for t, rs in runs.items()})
    assert disagreements(runs["ours"], runs["vllm"]) == {}
    for key in KEYS:  # a client 10% off either way fails the same check
        for factor in (0.9, 1.1):
            assert key in disagreements(off_by(runs["ours"], key, factor), runs["vllm"]), (key, factor)
