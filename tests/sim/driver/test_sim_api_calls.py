"""Jobs against API models on local servers as strict as the providers (tests/serve/api_standins.py),
in-process (executor local): the GPT-4 judge on the official dialogues by default, the judge's
fallback where a provider has no log-probabilities, the call cache across runs, the spend cap and
its resume, the exit status, and bad input refused in one line before anything is written."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "serve"))
from api_standins import StrictAnthropic, openai_standin  # noqa: E402

from esc_eval.serve.chat.interface import GenerationParams  # noqa: E402
from esc_eval.serve.registry.ref import ModelRef  # noqa: E402
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig  # noqa: E402
from esc_eval.sim.jobs.scoring import run_scoring  # noqa: E402
from esc_eval.sim.jobs.simulation import run_simulation  # noqa: E402
from esc_eval.sim.judging.config import JudgeConfig  # noqa: E402
from esc_eval.sim.pool.config import ExecutionConfig  # noqa: E402
from esc_eval.sim.runs.runfolder import RunFolder  # noqa: E402

LOCAL = dict(executor="local", concurrency=8, chunk_size=2, flush_seconds=0.5, max_attempts=2, retry_initial_wait_s=0.01)


@pytest.fixture()
def openai_server(monkeypatch):
    with openai_standin(monkeypatch) as srv:
        yield srv


def sim_config(n_cards=4, rounds=2, **execution) -> SimulationConfig:
    return SimulationConfig(
        cards="sample", languages=["en"], limit=n_cards, rounds=rounds,
        role=ModelRef(model="openai/gpt-3.5-turbo", params=GenerationParams(max_tokens=12)),
        targets=[ModelRef(model="openai/gpt-4", params=GenerationParams(max_tokens=16))],
        execution=ExecutionConfig(**{**LOCAL, **execution}))


def test_gpt4_judge_scores_the_official_dialogues_with_the_default_method(shared_data, openai_server, tmp_path):
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4")), execution=ExecutionConfig(**LOCAL))
    result = run_scoring(cfg, shared_data / "esc-eval" / "dialogues", tmp_path / "scored")
    rows = list(RunFolder(tmp_path / "scored").iter_rows("scores"))
    assert len(rows) == 84 and all(r["score"] is not None for r in rows)
    assert {r["method"] for r in rows} == {"logprob:logit_bias"} and {r["probs_status"] for r in rows} == {"full"}
    assert result["judge_method"] == "logprob:logit_bias" and openai_server.ok == 84
    manifest = RunFolder(tmp_path / "scored").read_manifest()
    assert manifest["scoring"]["judge_method"] == {"configured": "logprob", "used": "logprob:logit_bias", "note": None}
    assert manifest["usage"]["api_calls"]["scoring"]["models"]["openai/gpt-4"]["requests"] == 84


def test_a_judge_without_logprobs_falls_back_to_generate_with_a_note(shared_data, monkeypatch, tmp_path, caplog):
    srv = StrictAnthropic(key="ak-local").start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-local")
    try:
        spec = "litellm/anthropic/claude-3-5-sonnet-20240620"
        cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model=spec, options={"api_base": srv.base_url}),
                                              dimensions=["empathy", "overall"]), execution=ExecutionConfig(**LOCAL))
        result = run_scoring(cfg, shared_data / "esc-eval" / "dialogues" / "llama3_en.json", tmp_path / "s")
    finally:
        srv.stop()
    rows = list(RunFolder(tmp_path / "s").iter_rows("scores"))
    assert rows and all(r["method"] == "generate" and r["score"] is not None for r in rows)
    note = RunFolder(tmp_path / "s").read_manifest()["scoring"]["judge_method"]
    assert note["used"] == "generate" and "falls back to 'generate'" in note["note"] and "\n" not in note["note"]
    assert "falls back to 'generate'" in caplog.text and result["judge"] == f"{spec}:generate:official"


def test_second_identical_run_is_served_from_the_cache(openai_server, tmp_path):
    cache = tmp_path / "shared-cache"
    first = run_simulation(sim_config(cache_dir=str(cache)), tmp_path / "a")
    sent = openai_server.ok
    assert sent == 4 * 2 * 2 and first["api_calls"]["models"]["openai/gpt-4"]["requests"] == 8
    second = run_simulation(sim_config(cache_dir=str(cache)), tmp_path / "b")
    assert openai_server.ok == sent and openai_server.requests == sent  # nothing reached the server
    calls = second["api_calls"]["models"]
    assert calls["openai/gpt-4"]["cache_hits"] == 8 and calls["openai/gpt-4"]["requests"] == 0
    assert second["api_calls"]["spent_usd"] == 0
    usage = RunFolder(tmp_path / "b").read_manifest()["usage"]
    assert usage["cache_hits"] == 16
    turns = lambda d: sorted((r["dialogue_id"], [t["text"] for t in r["turns"]]) for r in RunFolder(d).iter_rows("dialogues"))
    assert turns(tmp_path / "a") == turns(tmp_path / "b")
    # a changed parameter never hits
    cfg = sim_config(cache_dir=str(cache))
    cfg.targets[0].params.max_tokens = 15
    run_simulation(cfg, tmp_path / "c")
    assert openai_server.ok == sent + 8


def test_budget_stops_the_run_and_a_resume_finishes_it_without_repeating_a_call(openai_server, tmp_path):
    out = tmp_path / "run"
    # the cache off: only the turn checkpoints keep a resume from paying twice
    stopped = run_simulation(sim_config(n_cards=6, rounds=3, budget_usd=0.02, call_cache="off", concurrency=2), out)
    assert stopped["outcome"]["budget_stopped_items"] > 0
    assert stopped["api_calls"]["spent_usd"] <= 0.02 and stopped["api_calls"]["refused_by_budget"] > 0
    rows = list(RunFolder(out).iter_rows("dialogues"))
    assert all(r["status"] == "ok" for r in rows) and len(rows) < 6  # stopped dialogues are no failed rows
    assert any((out / "checkpoints").iterdir())  # their turns wait for the resume
    from esc_eval.sim.driver.outcome import EXIT_BUDGET, outcome_line

    code, line = outcome_line({**stopped, "run_dir": str(out)}, "dialogues", 0.5)
    assert code == EXIT_BUDGET and "budget_usd=0.02" in line and "resume" in line
    before = openai_server.ok
    resumed = run_simulation(sim_config(n_cards=6, rounds=3, budget_usd=5, call_cache="off"), out)
    rows = list(RunFolder(out).iter_rows("dialogues"))
    assert len(rows) == 6 and all(r["status"] == "ok" and r["n_turns"] == 7 for r in rows)
    assert openai_server.repeated() == 0  # not one request was sent twice
    assert openai_server.ok == 6 * 3 * 2  # every call of every dialogue, exactly once over both runs
    assert resumed["outcome"]["budget_stopped_items"] == 0 and openai_server.ok > before


def cli(capsys, monkeypatch, *args) -> tuple[int, str, str]:
    """`esc-eval ARGS` in this process, as the console script runs it: (exit status, stdout, stderr)."""
    from esc_eval.cli.app import main

    monkeypatch.setattr(sys, "argv", ["esc-eval", *args])
    capsys.readouterr()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def last_error_line(err: str) -> str:
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), err[-3000:]
    return lines[-1]


def test_a_job_whose_every_call_failed_exits_non_zero_with_one_line(shared_data, openai_server, tmp_path, capsys,
                                                                     monkeypatch):
    cfg = tmp_path / "score.yaml"
    # a judge told the server takes vLLM's fields: OpenAI's API refuses every request
    cfg.write_text(json.dumps({"judge": {"model": {"model": "openai/judge", "options": {"api": "vllm"}},
                                         "dimensions": ["empathy"]},
                               "execution": {"executor": "local", "max_attempts": 1}}))
    code, out, err = cli(capsys, monkeypatch, "score", "-i", str(shared_data / "esc-eval" / "dialogues" / "llama3_en.json"),
                         "-o", str(tmp_path / "s"), "-c", str(cfg))
    line = last_error_line(err)
    assert code == 1 and "3 of 3 judge calls failed" in line and "Unrecognized request argument" in line
    assert json.loads(out)["outcome"]["error_rows"] == 3  # the result is still printed, rows kept
    assert len(list(RunFolder(tmp_path / "s").iter_rows("scores"))) == 3


def test_bad_api_input_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = cli(capsys, monkeypatch, "simulate", "--target", "openai/gpt-4", "--role", "fake/seeker", "-n", "1",
                       "-o", str(tmp_path / "a"))
    assert code == 2 and "openai/gpt-4" in last_error_line(err) and "OPENAI_API_KEY" in last_error_line(err)
    cfg = tmp_path / "limits.yaml"
    cfg.write_text(json.dumps({"limit": 1, "role": {"model": "fake/seeker"},
                               "targets": [{"model": "openai/gpt-4", "options": {"base_url": "http://127.0.0.1:9/v1"},
                                            "limits": {"tokens_per_minute": 100}}]}))
    code, _, err = cli(capsys, monkeypatch, "simulate", "-c", str(cfg), "-o", str(tmp_path / "b"))
    line = last_error_line(err)
    assert code == 2 and "'openai/gpt-4'" in line and "limits.tokens_per_minute=100" in line
    code, _, err = cli(capsys, monkeypatch, "simulate", "--target", "litellm/nosuchprovider/m", "--role", "fake/seeker",
                       "-n", "1", "-o", str(tmp_path / "c"))
    line = last_error_line(err)
    assert code == 2 and "litellm/nosuchprovider/m" in line and "unknown LiteLLM provider" in line
    for d in "abc":
        assert not (tmp_path / d).exists()
