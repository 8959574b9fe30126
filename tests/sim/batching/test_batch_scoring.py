"""A scoring through the providers' batch APIs, in this process, against the strict stand-ins: every
score row exactly once and at the batch price; a request that fails inside a batch sent again, one over
the judge's context windowed, expired requests sent again, failures kept as error rows after
max_attempts or scored online (fallback 'online'); a scoring stopped with batches in flight, or between
a batch's create and its record, picks them up instead of sending them twice; the spend cap; bad input."""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "serve"))
from batch_standins import BatchOpenAI, write_dialogues  # noqa: E402
from batch_standins_anthropic import BatchAnthropic  # noqa: E402

from esc_eval.serve.batches.config import BatchConfig  # noqa: E402
from esc_eval.serve.registry.ref import ModelRef  # noqa: E402
from esc_eval.sim.batching import run_batch_scoring  # noqa: E402
from esc_eval.sim.batching.book import BatchBook  # noqa: E402
from esc_eval.sim.jobs.config import ScoringConfig  # noqa: E402
from esc_eval.sim.judging.config import JudgeConfig  # noqa: E402
from esc_eval.sim.judging.panel import PanelConfig, PanelJudge  # noqa: E402
from esc_eval.sim.pool.config import ExecutionConfig  # noqa: E402
from esc_eval.sim.runs.runfolder import RunFolder  # noqa: E402

LOCAL = dict(executor="local", max_attempts=2, retry_initial_wait_s=0.01)
CLAUDE = "litellm/anthropic/claude-3-5-haiku-20241022"


class Killed(Exception):
    """The scoring process dying where the test says."""


def config(judge: str = "openai/gpt-4", options: dict | None = None, dims: list[str] | None = None,
           budget: float | None = None, **batch) -> ScoringConfig:
    j = JudgeConfig(model=ModelRef(model=judge, options=options or {}), **({"dimensions": dims} if dims else {}))
    return ScoringConfig(judge=j, execution=ExecutionConfig(**LOCAL, budget_usd=budget),
                         batch=BatchConfig(enabled=True, poll_s=0.01, **batch))


def rows(run_dir) -> list[dict]:
    """Every score row written, duplicates included (what a reader would have to drop)."""
    return [r for p in sorted(Path(run_dir, "scores").glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


def once_each(run_dir, n_keys: int) -> list[dict]:
    found = rows(run_dir)
    keys = [(r["dialogue_id"], r["judge"], r["dimension"]) for r in found]
    assert len(keys) == len(set(keys)) == n_keys, "every (dialogue, judge, dimension) has exactly one row"
    return found


@pytest.fixture()
def openai(monkeypatch):
    srv = BatchOpenAI(key="sk-local").start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
    yield srv
    srv.stop()


def test_every_row_once_from_batches_within_the_limit_at_the_batch_price(openai, tmp_path):
    write_dialogues(tmp_path, 6)
    result = run_batch_scoring(config(max_requests=20), str(tmp_path), plain=True)
    found = once_each(tmp_path, 42)
    assert all(r["transport"] == "batch" and r["score"] is not None and r["method"] == "logprob:logit_bias"
               for r in found)
    assert len(openai.created) == 3 and openai.repeated_lines() == 0  # 2 dialogues (14 requests) a batch of 20
    assert result["batch"]["sent"] == 3 and result["batch"]["requests_answered"] == 42
    assert result["outcome"]["score_rows"] == 42 and result["outcome"]["error_rows"] == 0
    manifest = RunFolder(tmp_path).read_manifest()
    judge = next(u for u in manifest["usage"]["by_stage"] if u["stage"] == "judge")
    tokens = sum(r["prompt_tokens"] for r in found)
    assert judge["batch_calls"] == 42 and judge["batch_prompt_tokens"] == tokens
    assert judge["dollars"] == pytest.approx((tokens * 30.0 + 42 * 60.0) / 1e6 / 2)  # gpt-4's list price, halved
    assert manifest["scoring"]["transport"] == "batch" and manifest["scoring"]["batch"]["ended"] == 3
    again = run_batch_scoring(config(max_requests=20), str(tmp_path), plain=True)
    assert again["items"] == 0 and len(openai.created) == 3  # nothing left: nothing sent


def test_batched_rows_are_the_online_rows(openai, tmp_path, monkeypatch):
    """The same requests as online (prompts, parameters, logit_bias), read the same way: the same rows."""
    from esc_eval.sim.jobs.scoring import run_scoring

    claude = BatchAnthropic(key="ak-local").start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-local")
    try:
        for judge, options, method in (("openai/gpt-4", {}, "logprob"), (CLAUDE, {"api_base": claude.base_url}, "generate")):
            for where, batched in (("online", False), ("batch", True)):
                write_dialogues(tmp_path / judge / where, 2)
                cfg = config(judge, options, dims=["empathy", "overall"])
                cfg.judge.method = method
                if batched:
                    run_batch_scoring(cfg, str(tmp_path / judge / where), plain=True)
                else:
                    run_scoring(cfg.model_copy(update={"batch": BatchConfig()}), str(tmp_path / judge / where))
            same = [{(r["dialogue_id"], r["dimension"]): (r["score"], r["probs"], r["raw"], r["prompt_tokens"], r["method"])
                     for r in rows(tmp_path / judge / where)} for where in ("online", "batch")]
            assert len(same[0]) == 4 and same[0] == same[1], judge
    finally:
        claude.stop()
    assert openai.requests == 4 and len(openai.created) == 1 and len(claude.created) == 1


def test_a_failed_request_goes_out_again_and_a_prompt_over_the_context_is_windowed(openai, tmp_path):
    write_dialogues(tmp_path, 2, rounds=2)
    (long,) = write_dialogues(tmp_path, 1, rounds=9, start=2)
    openai.fail_lines = 2
    openai.context = 520  # four of the 9-round dialogue's prompts (527 to 597 tokens) are over it, no other
    run_batch_scoring(config(), str(tmp_path), plain=True)
    found = once_each(tmp_path, 21)
    assert all(r["parse_status"] == "ok" for r in found)
    windowed = [r for r in found if r["rounds_left_out"]]
    # the first window: round 1 and the last (9 - 1) // 2 = 4 rounds, sent in the second batch
    assert len(windowed) == 4 and {(r["dialogue_id"], r["rounds_left_out"]) for r in windowed} == {(long, 4)}
    assert openai.repeated_lines() == 2  # only the two that failed ran twice
    assert len(openai.created) == 2


def test_requests_failing_in_every_batch_become_error_rows_after_max_attempts(openai, tmp_path):
    write_dialogues(tmp_path, 1)
    openai.fail_lines = 10**6
    result = run_batch_scoring(config(max_attempts=2), str(tmp_path), plain=True)
    found = once_each(tmp_path, 7)
    assert all(r["parse_status"] == "error" and r["score"] is None and "in 2 batches" in r["error"] for r in found)
    assert len(openai.created) == 2 and result["outcome"]["error_rows"] == 7
    openai.fail_lines = 0  # the same command again sends them again (error rows are redone, as online)
    run_batch_scoring(config(max_attempts=2), str(tmp_path), plain=True)
    assert {r["parse_status"] for r in RunFolder(tmp_path).iter_rows("scores")} == {"ok"}


def test_expired_requests_go_out_again_and_fallback_online_scores_failures_with_ordinary_calls(openai, tmp_path):
    write_dialogues(tmp_path / "a", 2)
    openai.expire_next, openai.expire_keep = 1, 5
    run_batch_scoring(config(), str(tmp_path / "a"), plain=True)
    assert len(once_each(tmp_path / "a", 14)) == 14 and len(openai.created) == 2 and openai.requests == 0
    write_dialogues(tmp_path / "b", 2)
    openai.fail_lines = 3
    result = run_batch_scoring(config(fallback="online"), str(tmp_path / "b"), plain=True)
    found = once_each(tmp_path / "b", 14)
    assert openai.requests == 3 and len(openai.created) == 3  # three online calls, no new batch
    assert sorted(r["transport"] or "online" for r in found).count("online") == 3
    assert result["batch"]["went_online"] == 3 and result["api_calls"]["models"]["openai/gpt-4"]["requests"] == 3
    judge = next(u for u in RunFolder(tmp_path / "b").read_manifest()["usage"]["by_stage"] if u["stage"] == "judge")
    assert judge["calls"] == 14 and judge["batch_calls"] == 11


def test_a_scoring_stopped_with_batches_in_flight_picks_them_up_and_resends_a_lost_one(openai, tmp_path):
    write_dialogues(tmp_path, 4)
    openai.polls = 10**6  # in progress until the test lets them end

    def killed(_s):
        raise Killed()

    with pytest.raises(Killed):
        run_batch_scoring(config(max_requests=14), str(tmp_path), plain=True, sleep=killed)
    assert len(openai.created) == 2 and rows(tmp_path) == []
    states = [r["state"] for r in BatchBook(RunFolder(tmp_path)).records()]
    assert states == ["submitted", "submitted"]
    openai.polls = 1
    del openai.batches[openai.created[1]]  # the provider lost one of them (404): its requests go out again
    result = run_batch_scoring(config(max_requests=14), str(tmp_path), plain=True)
    once_each(tmp_path, 28)
    assert len(openai.created) == 3 and openai.repeated_lines() == 0 and result["batch"]["sent"] == 1
    assert [r["status"] for r in BatchBook(RunFolder(tmp_path)).records()] == ["completed", "not_found", "completed"]


def test_a_batch_made_but_not_recorded_is_found_and_a_record_never_sent_is_dropped(openai, tmp_path, monkeypatch):
    from esc_eval.serve.batches.openai_batches import OpenAIBatches

    write_dialogues(tmp_path, 2)
    made = OpenAIBatches.submit

    def dies_after_the_create(self, *a, **kw):
        made(self, *a, **kw)
        raise Killed()  # the provider made it; the process died before the record said so

    monkeypatch.setattr(OpenAIBatches, "submit", dies_after_the_create)
    with pytest.raises(Killed):
        run_batch_scoring(config(), str(tmp_path), plain=True)
    monkeypatch.setattr(OpenAIBatches, "submit", made)
    book = BatchBook(RunFolder(tmp_path))
    (pending,) = book.records()
    assert pending["state"] == "pending" and pending["create_started"] and len(openai.created) == 1
    never = book.open("20000101000000neversent", pending["judge"], pending["spec"], "openai", "old", [], 0, 0.0)
    result = run_batch_scoring(config(), str(tmp_path), plain=True)
    once_each(tmp_path, 14)
    assert len(openai.created) == 1 and result["batch"]["found_after_restart"] == 1
    states = {r["name"]: r["state"] for r in book.records()}
    assert states[never["name"]] == "dropped" and states[pending["name"]] == "ended"


def test_the_spend_cap_stops_sending_and_a_resume_finishes(openai, tmp_path):
    write_dialogues(tmp_path, 4)
    stopped = run_batch_scoring(config(max_requests=14, budget=0.12), str(tmp_path), plain=True)
    assert stopped["outcome"]["budget_stopped_items"] == 2 and len(openai.created) == 1
    assert stopped["batch"]["est_usd_sent"] <= 0.12
    from esc_eval.sim.driver.outcome import EXIT_BUDGET, outcome_line

    code, line = outcome_line(stopped, "scores", 0.5)
    assert code == EXIT_BUDGET and line.startswith(f"stopped by budget_usd=0.12: ${stopped['batch']['est_usd_sent']} "
                                                   "spent; 2 dialogues to score stopped")
    once_each(tmp_path, 14)
    run_batch_scoring(config(max_requests=14, budget=5.0), str(tmp_path), plain=True)
    once_each(tmp_path, 28)
    assert len(openai.created) == 2


def test_a_panel_of_an_openai_and_an_anthropic_judge_each_in_its_own_batches(openai, tmp_path, monkeypatch):
    claude = BatchAnthropic(key="ak-local").start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-local")
    try:
        write_dialogues(tmp_path, 2)
        judges = [JudgeConfig(model=ModelRef(model="openai/gpt-4"), dimensions=["empathy", "overall"]),
                  JudgeConfig(model=ModelRef(model=CLAUDE, options={"api_base": claude.base_url}), method="generate",
                              dimensions=["empathy", "overall"])]
        cfg = ScoringConfig(panel=PanelConfig(judges=[PanelJudge(judge=j) for j in judges]),
                            execution=ExecutionConfig(**LOCAL), batch=BatchConfig(enabled=True, poll_s=0.01))
        run_batch_scoring(cfg, str(tmp_path), plain=True)
    finally:
        claude.stop()
    found = once_each(tmp_path, 8)
    assert {r["judge"] for r in found} == {"openai/gpt-4:logprob:official", f"{CLAUDE}:generate:official"}
    assert all(r["score"] is not None for r in found)
    assert len(openai.created) == 1 and len(claude.created) == 1


def test_a_run_folder_in_object_storage(openai, s3_uri, tmp_path):
    write_dialogues(tmp_path, 1)
    from esc_eval.sim.runs.open import open_storage

    store = open_storage(s3_uri)
    for key in RunFolder(tmp_path).parts("dialogues"):
        store.write(key, (tmp_path / key).read_bytes())
    run_batch_scoring(config(), s3_uri, plain=True)
    assert len(RunFolder(s3_uri).read("scores")) == 7
    assert [r["state"] for r in BatchBook(RunFolder(s3_uri)).records()] == ["ended"]


@pytest.mark.parametrize("judge, words", [("vllm/embedded", "is no API model"),
                                          ("litellm/gemini/gemini-1.5-pro", "no batch API for provider 'gemini'")])
def test_a_judge_without_a_batch_api_is_refused_in_one_line_before_anything_is_written(judge, words, tmp_path):
    write_dialogues(tmp_path, 1)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match=f"^--batch: model '{judge}'.*{words}") as e:
        run_batch_scoring(config(judge), str(tmp_path), plain=True)
    assert "\n" not in str(e.value) and sorted(p.name for p in tmp_path.rglob("*")) == before


def test_the_online_job_refuses_a_config_asking_for_batches(tmp_path):
    from esc_eval.sim.jobs.scoring import run_scoring

    write_dialogues(tmp_path, 1)
    with pytest.raises(ValueError, match="provider batches are sent by `esc-eval score --batch`"):
        run_scoring(config(), str(tmp_path))  # e.g. the demo's scoring config with batch.enabled
    assert not (tmp_path / "scores").exists()
