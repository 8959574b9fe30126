"""The person's own view on the fake backends (sim/seekerview): the questions as messages (en, zh), an
answer 1-5 read from P(1..5) or parsed, the ratings a simulation asks its seeker after the dialogues
(rows of their own, resumable, the fingerprint unchanged), and the CLI's option and bad input."""
from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from esc_eval.cli.app import app
from esc_eval.serve.chat.interface import ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.judge_plan import JudgePlan
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS, seeker_rating_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.seekerview import (parse_rating, rating_params, read_rating, reader_messages, seeker_messages,
                                     seeker_rater)

TURNS = [{"speaker": "assistant", "text": "Hello, how are you?"}, {"speaker": "seeker", "text": "Not good, I lost my job."},
         {"speaker": "assistant", "text": "I am sorry. That is hard."}]


def test_the_seeker_is_asked_in_its_role_and_the_turns_keep_alternating():
    msgs = seeker_messages("You play Ann.", TURNS, "en", "empathy")
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1].content.startswith("I am sorry. That is hard.\n\n(The conversation is over.")
    assert "understand you and empathize" in msgs[-1].content and msgs[-1].content.endswith("from 1 to 5 only.")
    ended = seeker_messages("You play Ann.", TURNS[:2], "zh", "intensity_after")  # the seeker spoke last
    assert [m.role for m in ended] == ["system", "user", "assistant", "user"] and "对话已经结束" in ended[-1].content
    reader = reader_messages(TURNS, "en", "relevance")
    assert reader[0].role == "system" and "Supporter: I am sorry. That is hard." in reader[1].content
    assert reader[1].content.index("Seeker: Not good") < reader[1].content.index("How relevant")
    assert "求助者：" not in reader_messages(TURNS, "zh", "relevance")[1].content  # labels are the file's: "求助者: ..."
    with pytest.raises(ValueError, match="item 'kindness'"):
        reader_messages(TURNS, "en", "kindness")


def test_an_answer_is_read_from_p1_to_p5_or_parsed_never_made_up():
    plan = JudgePlan("logprob")
    assert rating_params(plan).choices == ["1", "2", "3", "4", "5"] and rating_params(plan).max_tokens == 1
    lp = {"1": math.log(0.1), "2": math.log(0.2), "3": math.log(0.4), "4": math.log(0.2), "5": math.log(0.1)}
    got = read_rating(ChatResult(text="3", top_logprobs=[lp]), plan)
    assert got["rating"] == 3 and got["expected"] == pytest.approx(3.0) and got["parse_status"] == "ok"
    partial = read_rating(ChatResult(text="2", top_logprobs=[{"2": -0.1, "3": -2.0}]), plan)
    assert partial["rating"] == 2 and partial["expected"] is None and math.isnan(partial["probs"][0])
    top = JudgePlan("logprob:top_logprobs")
    late = read_rating(ChatResult(text="I'd say 4", tokens=["I'd", " say", " 4"], top_logprobs=[{"I'd": -0.1}, {" say": -0.1},
                                                                                             {" 4": -0.2, " 5": -1.0}]), top)
    assert late["rating"] == 4 and late["expected"] is None  # three labels unknown: no mean
    gen = JudgePlan("generate")
    assert read_rating(ChatResult(text=" 5."), gen)["rating"] == 5
    assert read_rating(ChatResult(text="quite good"), gen) == {"rating": None, "expected": None, "parse_status": "parse_failure"}
    assert parse_rating("0") is None and parse_rating("6") is None and parse_rating("4") == 4


def config(**kw) -> SimulationConfig:
    return SimulationConfig(cards="sample", languages=["en"], limit=2, rounds=2, role=ModelRef(model="fake/seeker"),
                            targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local"), **kw)


def ratings(run) -> list[dict]:
    return list(RunFolder(run, create=False).iter_rows("seeker_ratings"))


def test_a_simulation_asks_its_seeker_after_the_dialogues_and_resumes(tmp_path):
    run = tmp_path / "run"
    result = run_simulation(config(seeker_ratings=True), run)
    rows = ratings(run)
    assert result["seeker_ratings"]["items"] == 2 and len(rows) == 2 * len(SEEKER_RATING_ITEMS)
    dialogues = {d["dialogue_id"]: d for d in RunFolder(run, create=False).iter_rows("dialogues")}
    for r in rows:
        d = dialogues[r["dialogue_id"]]
        assert (r["rater"], r["target_model"], r["strategy"], r["card_id"]) == ("fake/seeker:seeker", "fake/echo",
                                                                                 "official", d["card_id"])
        assert r["parse_status"] == "ok" and 1 <= r["rating"] <= 5 and math.isclose(sum(r["probs"]), 1, rel_tol=1e-5)
        assert 1 <= r["expected"] <= 5 and r["method"] == "logprob"
    again = run_simulation(config(seeker_ratings=True), run)
    assert again["seeker_ratings"]["skipped_done"] == 2 and again["seeker_ratings"]["items"] == 0
    assert len(ratings(run)) == len(rows)
    manifest = RunFolder(run, create=False).read_manifest()
    assert manifest["seeker_ratings"]["rater"] == "fake/seeker:seeker" and manifest["seeker_ratings"]["prompts"]


def test_ratings_leave_the_dialogues_and_the_fingerprint_as_they_were(tmp_path):
    run_simulation(config(), tmp_path / "off")
    run_simulation(config(seeker_ratings=True), tmp_path / "on")
    fp = [RunFolder(tmp_path / p, create=False).read_manifest()["simulation"]["fingerprint"] for p in ("off", "on")]
    assert fp[0] == fp[1] and "seeker_ratings" not in fp[0]
    turns = [{d["dialogue_id"]: [t["text"] for t in d["turns"]] for d in RunFolder(tmp_path / p, create=False).iter_rows("dialogues")}
             for p in ("off", "on")]
    assert turns[0] == turns[1] and not ratings(tmp_path / "off")
    # turned on for the finished run: its dialogues are rated, none is played again
    again = run_simulation(config(seeker_ratings=True), tmp_path / "off")
    assert again["items"] == 0 and again["seeker_ratings"]["items"] == 2 and len(ratings(tmp_path / "off")) == 8


def test_a_resume_asks_only_what_has_no_usable_answer(tmp_path):
    """As after a kill between two flushes: some answers are in, one call had failed (an error row)."""
    run = tmp_path / "run"
    run_simulation(config(), run)
    folder = RunFolder(run, create=False)
    first = next(iter(folder.iter_rows("dialogues")))
    keys = {k: first[k] for k in ("run_id", "dialogue_id", "card_id", "language", "target_model", "role_model", "strategy")}
    rater = seeker_rater(ModelRef(model="fake/seeker"))
    folder.write_part("seeker_ratings", [
        seeker_rating_row({**keys, "item": "empathy", "rater": rater, "rating": 2, "expected": 2.0, "parse_status": "ok",
                           "raw": "kept", "rated_at": now_utc()}),
        seeker_rating_row({**keys, "item": "relevance", "rater": rater, "parse_status": "error", "error": "boom",
                           "rated_at": now_utc()})])
    result = run_simulation(config(seeker_ratings=True), run)
    assert result["seeker_ratings"]["model_calls"] == 2 * 4 - 1  # the kept answer is not asked again
    rows = {(r["dialogue_id"], r["item"]): r for r in ratings(run)}
    assert len(rows) == 8 and rows[(keys["dialogue_id"], "empathy")]["raw"] == "kept"
    assert rows[(keys["dialogue_id"], "relevance")]["parse_status"] == "ok"


def test_the_cli_option_turns_it_on(tmp_path):
    out, cfg = tmp_path / "run", tmp_path / "local.yaml"
    cfg.write_text("execution: {executor: local}\n")
    res = CliRunner().invoke(app, ["simulate", "-c", str(cfg), "--role", "fake/seeker", "-t", "fake/echo", "-n", "1",
                                   "--language", "en", "--rounds", "1", "--seeker-ratings", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(ratings(out)) == 4
