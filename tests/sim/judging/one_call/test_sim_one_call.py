"""One judge call per dialogue (rubric_mode one_call): the prompt in en and zh, reading an answer and each
dimension's digit probabilities, the plan on each kind of backend, and scoring jobs on the fake judge and
on a stand-in as strict as OpenAI's API (response_format json_schema), kept apart from the per-dimension
rows as another judge, with usage counting the call once. The embedded judge: test_sim_one_call_vllm.py."""
from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "serve"))
from api_standins import openai_standin  # noqa: E402

from esc_eval.serve.chat.interface import Capabilities, ChatResult, get_chat_model  # noqa: E402
from esc_eval.serve.chat.structured import flat_schema_regex  # noqa: E402
from esc_eval.serve.registry.ref import ModelRef  # noqa: E402
from esc_eval.sim.jobs.config import ScoringConfig  # noqa: E402
from esc_eval.sim.jobs.scoring import run_scoring, score_dialogue  # noqa: E402
from esc_eval.sim.judging.config import JudgeConfig  # noqa: E402
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES  # noqa: E402
from esc_eval.sim.judging.one_call import (digit_probs, one_call_messages, plan_one_call, read_rubric_answer,  # noqa: E402
                                           rubric_schema)
from esc_eval.sim.judging.rubrics import rubric_text  # noqa: E402
from esc_eval.sim.pool.config import ExecutionConfig  # noqa: E402
from esc_eval.sim.runs.runfolder import RunFolder  # noqa: E402

TURNS = [("assistant", "Hi, how can I help?"), ("seeker", "I lost my job and I cannot sleep."),
         ("assistant", "That sounds really hard. What has been on your mind at night?")]
LOCAL = dict(executor="local", concurrency=4, chunk_size=2, flush_seconds=0.2, max_attempts=1)


@pytest.mark.parametrize("language,intro", [("en", "on 7 dimensions at once"), ("zh", "同时从7个维度")])
def test_the_prompt_carries_every_rubric_and_the_dialogue_once(language, intro):
    for rubric in ("paper", "official"):
        judge = JudgeConfig(rubric=rubric, rubric_mode="one_call")
        messages = one_call_messages(DIMENSION_NAMES, TURNS, language, judge)
        body = messages[-1].content
        assert intro in body and body.count("I lost my job") == 1
        assert all(rubric_text(d, language, rubric).strip() in body for d in DIMENSION_NAMES)
        assert body.endswith('{"fluency": <0-4>, "expression": <0-4>, "empathy": <0-4>, "information": <0-4>, '
                             '"skillful": <0-4>, "humanoid": <0-4>, "overall": <0-4>}')
        assert [m.role for m in messages] == (["system", "user"] if rubric == "paper" else ["user"])


def test_the_schema_is_every_dimension_an_integer_0_to_4_in_one_layout():
    schema = rubric_schema(["fluency", "empathy"])
    assert schema["required"] == ["fluency", "empathy"] and schema["additionalProperties"] is False
    assert schema["properties"]["empathy"] == {"type": "integer", "enum": [0, 1, 2, 3, 4]}
    import re

    regex = flat_schema_regex(schema)
    assert re.fullmatch(regex, '{"fluency": 3, "empathy": 0}') and not re.fullmatch(regex, '{"fluency": 5, "empathy": 0}')
    assert not re.fullmatch(regex, '{"fluency": 3,  "empathy": 0}')  # one layout: no free whitespace
    assert flat_schema_regex({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                              "additionalProperties": False}) is None  # anything else goes as a JSON schema


def _answer(text: str, tokens: list[str], top: list[dict[str, float]]) -> ChatResult:
    return ChatResult(text=text, tokens=tokens, top_logprobs=top, completion_tokens=len(tokens))


def test_reading_an_answer_scores_each_dimension_and_its_digit_probabilities():
    lp = {"0": -3.0, "1": -2.0, "2": -0.5, "3": -1.5, "4": -4.0}
    tokens = ['{"', "fluency", '":', " ", "2", ',"', "empathy", '":', " 4", "}"]
    top = [{t: 0.0} for t in tokens]
    top[4] = dict(lp)
    top[8] = {" 4": -0.1, " 3": -2.0, "4": -5.0, "x": -1.0}  # ' 3' is label 3; '4' (no space) too; 'x' is not
    got = read_rubric_answer(_answer('{"fluency": 2,"empathy": 4}', tokens, top), ["fluency", "empathy"], True)
    assert got["fluency"]["score"] == 2 and got["fluency"]["probs_status"] == "full"
    assert math.isclose(sum(got["fluency"]["probs"]), 1.0) and got["fluency"]["probs"].index(max(got["fluency"]["probs"])) == 2
    assert got["empathy"]["score"] == 4 and got["empathy"]["probs_status"] == "partial"  # 0-2 never seen: NaN, not 0
    assert [math.isnan(p) for p in got["empathy"]["probs"]] == [True, True, True, False, False]
    assert got["empathy"]["expected"] is None
    # without log-probabilities: the scores alone
    plain = read_rubric_answer(_answer('{"fluency": 2, "empathy": 4}', [], []), ["fluency", "empathy"], False)
    assert [plain[d]["score"] for d in ("fluency", "empathy")] == [2, 4] and plain["fluency"]["probs"] is None


@pytest.mark.parametrize("text,want", [
    ('Sure! {"fluency": 3, "empathy": "1"} Hope it helps.', {"fluency": 3, "empathy": 1}),  # words around, a digit string
    ('{"fluency": 5, "empathy": true}', {"fluency": None, "empathy": None}),  # out of range, a boolean
    ('{"fluency": 2}', {"fluency": 2, "empathy": None}),  # a key missing
    ("I would give it a 3.", {"fluency": None, "empathy": None}),  # no JSON at all
])
def test_what_does_not_parse_is_a_null_score_never_a_zero(text, want):
    got = read_rubric_answer(_answer(text, [], []), ["fluency", "empathy"], False)
    assert {d: got[d]["score"] for d in want} == want
    assert all(got[d]["parse_status"] == ("ok" if v is not None else "parse_failure") for d, v in want.items())


def test_a_digit_not_among_the_tokens_gives_no_probabilities():
    assert digit_probs(["{}"], [{"{}": 0.0}], "fluency") is None
    assert digit_probs(['{"fluency": ', "3", "}"], [{}, {"a": -1.0}, {}], "fluency") is None  # no label offered


def test_the_plan_follows_what_the_backend_takes():
    judge = JudgeConfig(rubric_mode="one_call")
    full = plan_one_call(judge, Capabilities(logprobs=True, max_top_logprobs=20, json_schema=True))
    assert full.method == "logprob" and full.params.json_schema == rubric_schema(DIMENSION_NAMES)
    assert full.params.logprobs == 20 and full.params.logprob_labels == ["0", "1", "2", "3", "4"]
    free = plan_one_call(judge, Capabilities(logprobs=True, max_top_logprobs=20))
    assert free.method == "logprob:top_logprobs" and free.params.json_schema is None
    bare = plan_one_call(judge, Capabilities(json_schema=True))
    assert bare.method == "generate" and bare.params.logprobs is None and "falls back to 'generate'" in bare.note
    assert plan_one_call(judge.model_copy(update={"method": "generate"}), Capabilities(logprobs=True, max_top_logprobs=5,
                                                                                      json_schema=True)).note is None


def test_one_call_rows_share_the_call_and_a_failed_call_is_an_error_row_per_dimension():
    judge = JudgeConfig(model=ModelRef(model="fake/judge"), rubric_mode="one_call")
    model = get_chat_model("fake/judge")
    rows = asyncio.run(score_dialogue(TURNS, "en", judge, model))
    assert [r["dimension"] for r in rows] == DIMENSION_NAMES and model.calls == 1
    assert len({(r["raw"], r["prompt_tokens"], r["completion_tokens"]) for r in rows}) == 1
    assert all(r["rubric_mode"] == "one_call" and r["method"] == "logprob" and r["probs_status"] == "full" for r in rows)
    assert [r["score"] for r in rows] == [json.loads(rows[0]["raw"])[d] for d in DIMENSION_NAMES]
    failing = asyncio.run(score_dialogue(TURNS, "en", judge, get_chat_model("fake/judge?error_rate=1.0")))
    assert len(failing) == 7 and all(r["parse_status"] == "error" and r["score"] is None and r["error"] for r in failing)


def test_mixed_modes_are_another_judge_or_refused():
    one = JudgeConfig(rubric_mode="one_call")
    assert one.judge_id == "vllm/embedded:logprob:official:one_call" != JudgeConfig().judge_id
    assert JudgeConfig(name="mine", rubric_mode="one_call").judge_id == "mine:one_call"
    with pytest.raises(ValueError, match="tag of rubric_mode one_call"):
        JudgeConfig(name="mine:one_call")
    with pytest.raises(ValueError, match="one adapter per dimension"):
        JudgeConfig(rubric_mode="one_call", adapters={"fluency": "fluency"})


def _fake_run(tmp_path, n: int = 4) -> Path:
    from esc_eval.analysis.results.fake_runs import write_fake_run

    return Path(write_fake_run(tmp_path / "run", n, models=["fake/echo"]))


def test_both_modes_score_one_folder_as_two_judges_and_usage_counts_each_call_once(tmp_path):
    run = RunFolder(_fake_run(tmp_path), create=False)
    n = sum(1 for d in run.iter_rows("dialogues", columns=["status"]) if d["status"] == "ok")
    fake = ModelRef(model="fake/judge")
    per_dim = run_scoring(ScoringConfig(judge=JudgeConfig(model=fake), execution=ExecutionConfig(**LOCAL)), run.location)
    one = run_scoring(ScoringConfig(judge=JudgeConfig(model=fake, rubric_mode="one_call"),
                                    execution=ExecutionConfig(**LOCAL)), run.location)
    assert one["judge"] == "fake/judge:logprob:official:one_call" and per_dim["judge"] != one["judge"]
    rows = list(RunFolder(run.location, create=False).iter_rows("scores"))
    mine = [r for r in rows if r["judge"] == one["judge"]]
    assert len(mine) >= 7 * n and {r["rubric_mode"] for r in mine} == {"one_call"}
    judges = {u["model"]: u for u in RunFolder(run.location, create=False).read_manifest()["usage"]["by_stage"]
              if u["stage"] == "judge"}
    calls = {r["dialogue_id"]: (r["prompt_tokens"], r["completion_tokens"]) for r in mine}
    assert judges[one["judge"]]["calls"] == len(calls)  # one call per dialogue, not seven
    assert judges[one["judge"]]["prompt_tokens"] == sum(p for p, _ in calls.values())
    assert judges[one["judge"]]["completion_tokens"] == sum(c for _, c in calls.values())
    assert judges[per_dim["judge"]]["calls"] == 7 * len(calls)
    # a resume owes nothing: no call made
    again = run_scoring(ScoringConfig(judge=JudgeConfig(model=fake, rubric_mode="one_call"),
                                      execution=ExecutionConfig(**LOCAL)), run.location)
    assert again["skipped_done"] == again["dialogues"]


def test_an_openai_judge_answers_the_schema_through_response_format(shared_data, monkeypatch, tmp_path):
    """gpt-4o takes json_schema (strict mode, OpenAI's checks in the stand-in): one request per dialogue,
    P(0..4) at each digit; gpt-4 takes none: the free answer is parsed, and what is no JSON is a null score."""
    with openai_standin(monkeypatch) as srv:
        cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4o"), rubric_mode="one_call"),
                            execution=ExecutionConfig(**LOCAL))
        result = run_scoring(cfg, shared_data / "esc-eval" / "dialogues", tmp_path / "scored")
        assert srv.ok == 12 and result["judge_method"] == "logprob"
        rows = list(RunFolder(tmp_path / "scored").iter_rows("scores"))
        assert len(rows) == 84 and all(r["score"] is not None and r["probs_status"] == "full" for r in rows)
        old = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4"), rubric_mode="one_call",
                                              dimensions=["empathy", "overall"]), execution=ExecutionConfig(**LOCAL))
        result = run_scoring(old, shared_data / "esc-eval" / "dialogues" / "llama3_en.json", tmp_path / "old")
        assert result["judge_method"] == "logprob:top_logprobs" and srv.ok == 12 + 3
    rows = list(RunFolder(tmp_path / "old").iter_rows("scores"))
    assert len(rows) == 6 and all(r["score"] is None and r["parse_status"] == "parse_failure" and r["raw"] for r in rows)


def test_one_call_per_dialogue_through_a_provider_batch(monkeypatch, tmp_path):
    """score --batch with rubric_mode one_call (the cheapest way): one request a dialogue in the batch, its
    response_format checked by the stand-in as OpenAI checks it, each row once, priced at the batch price."""
    from batch_standins import BatchOpenAI, write_dialogues

    from esc_eval.serve.batches.config import BatchConfig
    from esc_eval.serve.registry.prices import shipped_price
    from esc_eval.sim.batching import run_batch_scoring
    from esc_eval.sim.launch.dry_run import score_estimate

    srv = BatchOpenAI(key="sk-local").start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
    try:
        write_dialogues(tmp_path, 3)
        cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="openai/gpt-4o"), rubric_mode="one_call"),
                            execution=ExecutionConfig(executor="local", max_attempts=2, retry_initial_wait_s=0.01),
                            batch=BatchConfig(enabled=True, poll_s=0.01))
        est = score_estimate(cfg, tmp_path)["judges"][0]
        assert est["transport"] == "batch" and est["this_run_usd"] == est["modes"]["one_call"]["cost_usd"]["batch"]
        result = run_batch_scoring(cfg, str(tmp_path), plain=True)
        assert result["batch"]["requests_answered"] == 3 and srv.repeated_lines() == 0
    finally:
        srv.stop()
    rows = list(RunFolder(tmp_path, create=False).iter_rows("scores"))
    assert len(rows) == 21 and all(r["transport"] == "batch" and r["rubric_mode"] == "one_call" and r["score"] is not None
                                   and r["probs_status"] == "full" for r in rows)
    judge = next(u for u in RunFolder(tmp_path, create=False).read_manifest()["usage"]["by_stage"] if u["stage"] == "judge")
    calls = {r["dialogue_id"]: (r["prompt_tokens"], r["completion_tokens"]) for r in rows}
    price = shipped_price("openai/gpt-4o", batch=True)
    assert judge["calls"] == judge["batch_calls"] == 3
    assert judge["dollars"] == pytest.approx(sum(p * price.prompt_per_1m + c * price.completion_per_1m
                                                 for p, c in calls.values()) / 1e6, rel=1e-4)
