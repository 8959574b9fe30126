"""`esc-eval bench serve` on a local streaming OpenAI server (real HTTP and SSE, no engine): the
client's timings, vLLM's metric definitions, the load shapes, the three workloads driving the
simulation's own dialogue and judge code, arms and ratios, plots, bad input, Ctrl-C."""
from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openai_stream_server import StreamServer

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.sim.bench.serve.bench import Arm, ServeBenchConfig, bench_serve
from esc_eval.sim.bench.serve.client import BenchInputError, RequestRecord, StreamingClient, check_endpoint
from esc_eval.sim.bench.serve.load import LevelRun, LoadShape, run_level
from esc_eval.sim.bench.serve.metrics import level_metrics, parse_slos
from esc_eval.sim.runs.official import write_official_dialogues

HERE = Path(__file__).parent
REPO = HERE.parents[3]


def _dialogue_rows(n: int = 3, seeker_turns: int = 5) -> list[dict]:
    rows = []
    for i in range(n):
        turns = [{"index": 0, "speaker": "assistant", "text": "Hello, how can I help you today?"}]
        for k in range(seeker_turns):
            turns.append({"index": len(turns), "speaker": "seeker", "text": f"dialogue {i} seeker turn {k}: " + "I feel low. " * 5})
            turns.append({"index": len(turns), "speaker": "assistant", "text": f"reply {k} " * 4})
        rows.append({"dialogue_id": f"m_en:{i}", "target_model": "m", "language": "en", "card_id": str(i), "turns": turns,
                     "strategy": "official", "seed": 0})
    return rows


@pytest.fixture
def source(tmp_path) -> Path:
    """Three 5-round English dialogues in the official JSON layout."""
    write_official_dialogues(_dialogue_rows(), tmp_path / "dialogues")
    return tmp_path / "dialogues"


@pytest.fixture
def server():
    with StreamServer("tiny", ttft_s=0.01, ttft_per_char_s=2e-5, itl_s=0.002) as s:
        yield s


# -- the client -----------------------------------------------------------------------------
def test_client_times_a_stream_as_vllm_bench_does(server):
    async def go():
        client = StreamingClient(server.url, "tiny", ignore_eos=True)
        rec, res = await client.request([ChatMessage(role="user", content="hi")], GenerationParams(max_tokens=6),
                                        unit="u", turn=3, session_id="s-1")
        await client.close()
        return rec, res

    rec, res = asyncio.run(go())
    assert rec.success and rec.turn == 3 and res.text == "tok " * 6
    assert rec.output_tokens == 6 and rec.prompt_tokens == len("hi") // 4 + 1  # from the usage chunk
    assert len(rec.itl) == 5  # one gap per token chunk after the first; the usage chunk is no token
    assert 0.01 <= rec.ttft < rec.latency and rec.latency == pytest.approx(rec.ttft + sum(rec.itl), abs=1e-6)
    sent = server.requests[-1]
    assert sent["headers"]["x-session-id"] == "s-1"
    assert sent["body"]["stream"] is True and sent["body"]["stream_options"] == {"include_usage": True}
    assert sent["body"]["ignore_eos"] is True and sent["body"]["max_tokens"] == 6


def test_client_records_failures_with_their_reason(server):
    async def go():
        client = StreamingClient(server.url, "tiny", session_header=False)
        out = [await client.request([ChatMessage(role="user", content="FAIL please")], GenerationParams(max_tokens=2),
                                    unit="u", turn=0, session_id="s")]
        client.base_url = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
        await client.close()
        out.append(await client.request([ChatMessage(role="user", content="x")], GenerationParams(), unit="u", turn=1))
        await client.close()
        return out

    (bad, _), (down, _) = asyncio.run(go())
    assert not bad.success and bad.error.startswith("HTTP 500") and "injected failure" in bad.error
    assert "x-session-id" not in server.requests[-1]["headers"]  # --no-session-header
    assert not down.success and down.error.startswith("connection:")


def test_check_endpoint_names_what_is_wrong(server):
    assert check_endpoint(server.url, "tiny") == ["tiny"]
    with pytest.raises(BenchInputError, match=r"does not serve model 'gpt-9' \(it serves: tiny\)"):
        check_endpoint(server.url, "gpt-9")
    with pytest.raises(BenchInputError, match="--base-url http://127.0.0.1:9/v1: endpoint not reachable"):
        check_endpoint("http://127.0.0.1:9/v1", "tiny")


# -- metrics --------------------------------------------------------------------------------
def _rec(turn, ttft, itl, out, prompt=10, ok=True, err=""):
    return RequestRecord(unit="u", turn=turn, success=ok, ttft=ttft, itl=list(itl), latency=ttft + sum(itl),
                         prompt_tokens=prompt, output_tokens=out, error=err)


def test_metrics_follow_vllm_definitions():
    recs = [_rec(0, 0.1, [0.05] * 3, 4), _rec(1, 0.3, [0.1] * 1, 2), _rec(1, 0.2, [], 1),
            _rec(0, 0, [], 0, ok=False, err="HTTP 500: boom")]
    m = level_metrics(recs, 2.0, parse_slos(["ttft:250", "tpot:60"]), units_completed=2, units_failed=1,
                      unit_errors=["HTTP 500: boom"])
    assert m["completed"] == 3 and m["failed"] == 1 and m["request_throughput"] == 1.5
    assert m["total_input_tokens"] == 30 and m["total_output_tokens"] == 7
    assert m["output_throughput"] == 3.5 and m["total_token_throughput"] == 18.5
    assert m["mean_ttft_ms"] == pytest.approx(200) and m["median_ttft_ms"] == pytest.approx(200)
    # tpot only over requests with more than one token: (0.15/3, 0.1/1)
    assert m["mean_tpot_ms"] == pytest.approx((50 + 100) / 2)
    assert m["mean_itl_ms"] == pytest.approx((0.05 * 3 + 0.1) / 4 * 1000)
    assert m["p99_e2el_ms"] <= 400 and m["p50_e2el_ms"] == pytest.approx(250)
    # goodput: ttft <= 250 ms and tpot <= 60 ms (a one-token answer's tpot counts as 0): requests 1 and 3
    assert m["request_goodput"] == 1.0
    assert m["ttft_by_turn"]["0"]["count"] == 1 and m["ttft_by_turn"]["1"]["mean_ttft_ms"] == pytest.approx(250)
    assert m["failures"] == {"HTTP 500: boom": 1} and m["unit_throughput"] == 1.0


@pytest.mark.parametrize("text,ms", [("ttft:500", {"ttft": 500}), ("tpot:50ms", {"tpot": 50}),
                                     ("e2el:2s,ttft:0.5s", {"e2el": 2000, "ttft": 500})])
def test_slos_parse(text, ms):
    assert parse_slos([text]) == ms


@pytest.mark.parametrize("bad", ["ttft", "ttft:fast", "latency:5", "ttft:5min"])
def test_bad_slo_is_one_line(bad):
    with pytest.raises(BenchInputError, match=r"^--slo .*expected METRIC:VALUE") as ei:
        parse_slos([bad])
    assert "\n" not in str(ei.value)


# -- load shapes ----------------------------------------------------------------------------
class _Counting:
    """Units that only count how many of them run at once."""

    def __init__(self):
        self.now = self.peak = 0

    def units(self, seconds=0.02):
        import itertools

        for i in itertools.count():
            yield _Unit(self, f"u{i}", i, seconds)


class _Unit:
    def __init__(self, c, name, idx, seconds):
        self.c, self.name, self.source_index, self.seconds = c, name, idx, seconds

    async def run(self, model):
        self.c.now += 1
        self.c.peak = max(self.c.peak, self.c.now)
        await asyncio.sleep(self.seconds)
        self.c.now -= 1
        model.recorder.add(RequestRecord(unit=self.name, turn=0, success=True, ttft=self.seconds, latency=self.seconds,
                                         output_tokens=1))


def _level(shape, seconds=0.02):
    c = _Counting()
    run = LevelRun(shape)
    asyncio.run(run_level(c.units(seconds), StreamingClient("http://unused", "m"), run))
    return c, run


class _Deaf:
    """A unit that swallows a cancel (as a client that catches too much would)."""

    def __init__(self, i):
        self.name, self.source_index = f"u{i}", i

    async def run(self, model):
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass


def test_a_stopped_level_starts_no_more_units_whatever_a_unit_does_with_the_cancel():
    run = LevelRun(LoadShape(concurrency=2, count=1000))

    async def go():
        level = asyncio.create_task(run_level((_Deaf(i) for i in itertools.count()), StreamingClient("http://x", "m"), run))
        await asyncio.sleep(0.3)
        run.stop = True  # what Ctrl-C sets (bench.py _stop_on_sigint), with the cancel
        level.cancel()
        await asyncio.wait_for(asyncio.shield(level), 5)  # the deaf units finish; no new one starts

    try:
        asyncio.run(go())
    except asyncio.CancelledError:
        pass
    assert 2 <= run.launched < 40


def test_fixed_concurrency_holds_the_level_and_excludes_warmup():
    c, run = _level(LoadShape(concurrency=3, count=9, warmup=2))
    assert c.peak == 3 and run.launched == 9 and run.units_completed == 9
    assert len(run.recorder.records) == 9  # the two warm-up units are not in the figures
    assert run.warmup_indices == [0, 1] and run.source_indices == list(range(2, 11))
    assert 0.06 <= run.duration_s < 1.0  # 3 waves of 20 ms


def test_poisson_arrivals_with_a_cap_and_a_duration_bound():
    c, run = _level(LoadShape(concurrency=2, rate=200.0, count=40, seed=1), seconds=0.05)
    assert c.peak <= 2 and run.launched == 40
    c, run = _level(LoadShape(rate=20.0, duration_s=0.5, seed=2), seconds=0.01)
    assert 3 <= run.launched <= 25 and run.units_completed == run.launched  # ~10 expected in 0.5 s


# -- workloads through bench_serve -----------------------------------------------------------
def test_replayed_dialogues_grow_the_targets_history_turn_by_turn(source):
    # 2 s per 1,000 characters: the third turn's prompt is ~0.45 s later than the first's, well above the
    # stalls a loaded 2-core machine puts in a client's event loop (0.14 s seen at 0.2 s per 1,000)
    with StreamServer("tiny", ttft_s=0.01, ttft_per_char_s=2e-3, itl_s=0.002) as server:
        _replayed_dialogues(server, source)


def _replayed_dialogues(server, source):
    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="dialogues", concurrency=[1, 2], num=2, rounds=3,
                           max_tokens=4, source=str(source), warmup=1, slos=["e2el:10s"])
    res = bench_serve(cfg)
    (arm,) = res["arms"]
    assert [lv["max_concurrency"] for lv in arm["levels"]] == [1, 2]
    for lv in arm["levels"]:
        assert lv["completed"] == 2 * 3 and lv["units_completed"] == 2 and lv["failed"] == 0
        assert lv["request_goodput"] == lv["request_throughput"]
        turns = lv["ttft_by_turn"]
        assert list(turns) == ["0", "1", "2"]
        # the history grows: more prompt tokens and (this server prefills per character) a later first token
        assert turns["0"]["mean_prompt_tokens"] < turns["1"]["mean_prompt_tokens"] < turns["2"]["mean_prompt_tokens"]
        assert turns["0"]["mean_ttft_ms"] < turns["2"]["mean_ttft_ms"]
    # 3 source dialogues, 1 + 2 + 1 + 2 units: the second level repeats what the first used
    assert arm["levels"][0]["repeated_units"] == 0 and arm["levels"][1]["repeated_units"] == 2
    assert res["source"]["kind"] == "replayed_seeker:official_json" and res["source"]["distinct"] == 3
    # the target saw exactly what sim/dialogue/dialogue.py shows a target: its own live replies, the recorded seeker turns
    third = [r["body"]["messages"] for r in server.requests if r["headers"]["x-session-id"] == "dialogue-0:target"][2]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert third[0]["content"] == "You are a helpful assistant!"
    assert third[1]["content"].startswith("dialogue 0 seeker turn 0") and third[2]["content"] == "tok tok tok tok"
    assert third[5]["content"].startswith("dialogue 0 seeker turn 2")


def test_live_role_model_plays_the_seeker_from_the_cards(server):
    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="dialogues", concurrency=[2], num=2, rounds=2,
                           max_tokens=3, role_url=server.url, role_model="tiny", role_max_tokens=5, language="en", warmup=0)
    res = bench_serve(cfg)
    lv = res["arms"][0]["levels"][0]
    assert lv["units_completed"] == 2 and lv["completed"] == 4  # only the target's calls are measured
    role_calls = [r for r in server.requests if r["headers"].get("x-session-id", "").endswith(":role")]
    assert len(role_calls) == 4 and role_calls[0]["body"]["max_tokens"] == 5
    assert "stream" not in role_calls[0]["body"]  # the role goes through the openai/ backend, unmeasured
    assert res["source"]["kind"] == "live_role"


def test_judge_sends_seven_prompts_per_dialogue_in_both_orders(server, source):
    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="judge", concurrency=[1], num=2, max_tokens=1,
                           source=str(source), prompt_orders=["rubric_first", "dialogue_first"], warmup=0)
    res = bench_serve(cfg)
    assert [a["name"] for a in res["arms"]] == ["rubric_first", "dialogue_first"]
    for arm in res["arms"]:
        assert arm["levels"][0]["completed"] == 14 and list(arm["levels"][0]["ttft_by_turn"]) == [str(i) for i in range(7)]
    bodies = [r["body"] for r in server.requests]
    assert all(b["max_tokens"] == 1 and b["structured_outputs"] == {"choice": ["0", "1", "2", "3", "4"]} for b in bodies)
    assert bodies[0]["messages"][0]["content"].startswith("**Fluency**") or "Dialogue" not in bodies[0]["messages"][0]["content"][:20]
    assert all(b["messages"][0]["content"].startswith("Dialogue between user and AI assistant") for b in bodies[14:])
    assert res["ratios_vs"] == "rubric_first" and set(res["ratios"]) == {"dialogue_first"}
    assert res["ratios"]["dialogue_first"][0]["total_token_throughput"] > 0


def _tokenizer_dir(tmp_path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["I feel overwhelmed by work and I cannot sleep at night.", "Talking to someone might help you feel less alone."]
    tok.train_from_iterator(corpus * 20, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=["<|im_end|>"],
                                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tok"
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>").save_pretrained(path)
    return path


def test_random_prompts_have_the_asked_length(server, tmp_path):
    from transformers import AutoTokenizer

    tok_dir = _tokenizer_dir(tmp_path)
    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="random", concurrency=[4], num=8, input_len=40,
                           max_tokens=5, tokenizer=str(tok_dir), warmup=0)
    res = bench_serve(cfg)
    lv = res["arms"][0]["levels"][0]
    assert lv["completed"] == 8 and lv["total_output_tokens"] == 40
    tok = AutoTokenizer.from_pretrained(tok_dir)
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests]
    # as in vLLM's random dataset, decoding and re-encoding may miss the length by a token or two
    # (this 300-token byte-level vocabulary is the worst case: single bytes decode to U+FFFD)
    lengths = [len(tok.encode(p, add_special_tokens=False)) for p in prompts]
    assert len(set(prompts)) >= 7 and all(abs(n - 40) <= 2 for n in lengths) and lengths.count(40) >= 4
    assert all(r["body"]["ignore_eos"] is True for r in server.requests)


def test_arms_on_one_endpoint_with_and_without_the_session_header(server, source):
    resets = []
    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="dialogues", concurrency=[1], num=1, rounds=2,
                           max_tokens=2, source=str(source), warmup=0)
    arms = [Arm("sticky", server.url, session_header=True, before=lambda: resets.append(1)),
            Arm("spread", server.url, session_header=False, before=lambda: resets.append(2))]
    res = bench_serve(cfg, arms)
    assert resets == [1, 2] and res["ratios_vs"] == "sticky"
    sent = [r["headers"].get("x-session-id") for r in server.requests]
    assert sent == ["dialogue-0:target"] * 2 + [None] * 2
    assert set(res["ratios"]["spread"][0]["mean_ttft_ms_by_turn"]) == {"0", "1"}


def test_plots_of_a_sweep(server, source, tmp_path):
    from esc_eval.analysis.figures.bench_plots import bench_serve_plots

    cfg = ServeBenchConfig(base_url=server.url, model="tiny", workload="dialogues", concurrency=[1, 2], num=2, rounds=2,
                           max_tokens=2, source=str(source), warmup=0)
    paths = bench_serve_plots(bench_serve(cfg), tmp_path / "bench")
    assert [p.name for p in paths] == ["bench_latency_throughput.png", "bench_ttft_by_turn.png"]
    assert all(p.stat().st_size > 5000 for p in paths)


# -- the command ----------------------------------------------------------------------------
def _cli(*args):
    from esc_eval.cli.app import app

    return CliRunner().invoke(app, ["bench", "serve", *args])


def test_command_writes_json_and_plots(server, source, tmp_path):
    out = tmp_path / "res" / "serve.json"
    res = _cli("--base-url", server.url, "--model", "tiny", "--source", str(source), "--concurrency", "1,2", "--num", "2",
               "--rounds", "2", "--max-tokens", "2", "--slo", "ttft:1000", "-o", str(out))
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["workload"] == "dialogues" and data["interrupted"] is False
    assert data["arms"][0]["levels"][1]["request_goodput"] > 0
    assert {Path(p).name for p in data["plots"]} == {"serve_latency_throughput.png", "serve_ttft_by_turn.png"}


def test_save_detailed_lists_each_request_in_launch_order(server, source, tmp_path):
    out = tmp_path / "detailed.json"
    res = _cli("--base-url", server.url, "--model", "tiny", "--source", str(source), "--concurrency", "2", "--num", "3",
               "--rounds", "2", "--max-tokens", "3", "--warmup", "0", "--save-detailed", "-o", str(out))
    assert res.exit_code == 0, res.output
    lv = json.loads(out.read_text())["arms"][0]["levels"][0]
    assert len(lv["ttfts"]) == len(lv["itls"]) == len(lv["errors"]) == lv["completed"] == 6
    assert lv["start_times"] == sorted(lv["start_times"]) and lv["start_times"][0] >= 0
    assert sorted(zip(lv["units"], lv["turns"])) == [(f"dialogue-{i}", t) for i in range(3) for t in (0, 1)]
    # the summary is the mean of the details, and each e2el is its ttft plus its gaps
    assert lv["mean_ttft_ms"] == pytest.approx(1000 * sum(lv["ttfts"]) / 6)
    assert all(e == pytest.approx(t + sum(g)) for e, t, g in zip(lv["e2els"], lv["ttfts"], lv["itls"]))
    assert all(n == 3 for n in lv["output_lens"]) and all(n > 0 for n in lv["input_lens"]) and not any(lv["errors"])
    plain = tmp_path / "plain.json"
    assert _cli("--base-url", server.url, "--model", "tiny", "--source", str(source), "--num", "1", "--rounds", "1",
                "--max-tokens", "2", "-o", str(plain)).exit_code == 0
    assert "ttfts" not in json.loads(plain.read_text())["arms"][0]["levels"][0]  # off by default: sweeps stay small


@pytest.mark.parametrize("args,message", [
    (["--base-url", "http://127.0.0.1:9/v1"], "endpoint not reachable"),
    (["--model", "gpt-9"], "does not serve model 'gpt-9'"),
    (["--slo", "ttft=soon"], "--slo 'ttft=soon'"),
    (["--routing", "session", "--base-url", "http://127.0.0.1:9/v1"], "give either --base-url"),
    (["--routing", "sticky", "--model", "embedded"], "field 'routing.0'"),
    (["--workload", "random"], "--tokenizer: the random workload needs the tokenizer of model 'tiny'"),
    (["--role-url", "http://127.0.0.1:9/v1", "--role-model", "r"], "--role-url http://127.0.0.1:9/v1: endpoint not reachable"),
    (["--workload", "judge", "--prompt-order", "rubric_last"], "prompt_orders"),
])
def test_bad_input_is_one_line_before_any_load(server, source, args, message, monkeypatch, capsys):
    from esc_eval.cli.app import main

    base = ["--base-url", server.url, "--model", "tiny", "--source", str(source)]
    if "--routing" in args:
        base = base[2:]
    # later options win: the case's own --base-url / --model replace the good ones
    monkeypatch.setattr(sys, "argv", ["esc-eval", "bench", "serve", *base, *args])
    with pytest.raises(SystemExit) as ei:
        main()
    err = capsys.readouterr().err
    assert ei.value.code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], err
    assert not [r for r in server.requests if r["body"].get("stream")]  # no load was sent


def test_ctrl_c_still_writes_what_was_measured(source, tmp_path):
    out = tmp_path / "interrupted.json"
    with StreamServer("tiny", itl_s=0.05) as server:  # 10 tokens: 0.5 s a request
        bench = subprocess.Popen([str(Path(sys.executable).with_name("esc-eval")), "bench", "serve", "--base-url", server.url,
                                  "--model", "tiny", "--source", str(source), "--concurrency", "2", "--num", "100",
                                  "--max-tokens", "10", "--warmup", "0", "-o", str(out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # interrupt once the 5th request has started: with 2 slots at least 3 have finished by then (a fixed
        # sleep raced the command's start-up on a loaded machine)
        deadline = time.monotonic() + 120
        while len(server.requests) < 5 and bench.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        bench.send_signal(signal.SIGINT)
        stdout, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 130, stderr
    data = json.loads(out.read_text())
    (lv,) = data["arms"][0]["levels"]
    assert data["interrupted"] is True and lv["interrupted"] is True
    assert lv["completed"] >= 2 and lv["request_throughput"] > 0 and lv["units_started"] < 100
    assert "interrupted: wrote what was measured" in stderr
    assert json.loads(stdout)["interrupted"] is True


def test_routing_configs_pick_the_routers():
    from esc_eval.serve.app.application import CONSISTENT_HASH_ROUTER, PREFIX_CACHE_ROUTER, build_llm_configs
    from esc_eval.sim.bench.serve.routing import routing_config

    routers = {}
    for mode in ("default", "session", "prefix_cache"):
        cfg = routing_config(mode, "qwen1.5-7b-chat", 3, port=8123)  # weights named, never loaded here
        (llm,) = build_llm_configs(cfg)
        dep = llm["deployment_config"]
        assert dep["autoscaling_config"]["min_replicas"] == dep["autoscaling_config"]["max_replicas"] == 3
        routers[mode] = (dep.get("request_router_config") or {}).get("request_router_class")
        assert cfg.app_name == "bench-serve-" + mode.replace("_", "-") and cfg.port == 8123
    assert routers == {"default": None, "session": CONSISTENT_HASH_ROUTER, "prefix_cache": PREFIX_CACHE_ROUTER}
    with pytest.raises(ValueError, match="at least 2 replicas"):
        routing_config("session", "embedded", 1)


def test_routing_arms_deploy_once_per_mode_and_clean_up(server, source, monkeypatch):
    """The deploy sequence of --routing, with Ray Serve replaced by the local server (the real
    deployments run in test_sim_bench_serve_slow.py's fixture and the README's runs)."""
    from esc_eval.serve.app import application as serve_app
    from esc_eval.sim.bench.serve import routing as serve_routing

    calls = []
    monkeypatch.setattr(serve_app, "build_app_args", lambda cfg, registry=None: calls.append(("check", cfg.app_name)))
    monkeypatch.setattr(serve_routing, "ensure_serve", lambda address: (calls.append(("ray", address)), (True, 8123))[1])

    def deploy(cfg, timeout_s):
        calls.append(("deploy", cfg.app_name, cfg.port, cfg.models[0].routing, cfg.models[0].min_replicas))
        return server.url, 1.0

    monkeypatch.setattr(serve_routing, "deploy_routing_app", deploy)
    monkeypatch.setattr(serve_routing, "delete_app", lambda name: calls.append(("delete", name)))
    monkeypatch.setattr(serve_routing, "reset_prefix_cache", lambda app, model: calls.append(("reset", app, model)) or 3)
    probes = []  # each arm's replicas asked for vLLM's counts before and after it: 10 more prompt tokens, 4 cached

    def probe(deployments):
        probes.append(deployments)
        n = len(probes)
        return [{"id": "r1", "counts": {"requests": n, "prompt_tokens": 10 * n, "cached_prompt_tokens": 4 * n}},
                {"id": "r2", "counts": {"requests": 0, "prompt_tokens": 0, "cached_prompt_tokens": 0}}]

    monkeypatch.setattr("esc_eval.sim.bench.engine_probe.probe_replicas", probe)
    shut = []
    monkeypatch.setattr("esc_eval.sim.bench.serve.bench._ray_serve", lambda: (None, type("S", (), {"shutdown": staticmethod(lambda: shut.append("serve"))})))
    monkeypatch.setattr("ray.shutdown", lambda: shut.append("ray"))
    cfg = ServeBenchConfig(model="tiny", workload="judge", routing=["default", "session"], replicas=3, concurrency=[1],
                           num=1, warmup=0, max_tokens=1, source=str(source), prompt_orders=["rubric_first", "dialogue_first"])
    res = bench_serve(cfg)
    assert [a["name"] for a in res["arms"]] == ["default/rubric_first", "default/dialogue_first", "session/rubric_first",
                                                "session/dialogue_first"]
    assert calls == [("check", "bench-serve-default"), ("check", "bench-serve-session"), ("ray", None),
                     ("deploy", "bench-serve-default", 8123, "default", 3), ("reset", "bench-serve-default", "tiny"),
                     ("delete", "bench-serve-default"), ("deploy", "bench-serve-session", 8123, "session", 3),
                     ("reset", "bench-serve-session", "tiny"), ("delete", "bench-serve-session")]
    assert [a.get("prefix_cache_reset") for a in res["arms"]] == [None, 3, None, 3]
    assert probes == [[("tiny", "bench-serve-default")]] * 4 + [[("tiny", "bench-serve-session")]] * 4
    for arm in res["arms"]:
        assert arm["prefix_cache"] == {"prompt_tokens": 10, "cached_prompt_tokens": 4, "hit_rate": 0.4, "replicas": [
            {"id": "r1", "requests": 1, "prompt_tokens": 10, "cached_prompt_tokens": 4, "hit_rate": 0.4},
            {"id": "r2", "requests": 0, "prompt_tokens": 0, "cached_prompt_tokens": 0, "hit_rate": None}]}
    assert shut == ["serve", "ray"] and res["ratios_vs"] == "default/rubric_first"
    assert all(a["levels"][0]["completed"] == 7 for a in res["arms"])
