"""The seeker's distress at every seeker turn (sim/judging/distress*.py, sim/jobs/distress.py) on the
fake backend: the prompt, the rows, resuming, failures as rows."""
from __future__ import annotations

import asyncio

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.distress import DistressConfig, distress_ratings, rate_turns, run_distress
from esc_eval.sim.judging.distress import distress_messages
from esc_eval.sim.judging.distress_turns import distress_dimension, distress_turn, seeker_runs
from esc_eval.sim.judging.judge_plan import default_plan
from esc_eval.sim.pool.config import ExecutionConfig

LOCAL = ExecutionConfig(executor="local")


def _dialogue(i: int, seeker: list[str], language: str = "en", role: str = "people") -> dict:
    turns = [{"speaker": "assistant", "text": "Hello, what is on your mind?"}]
    for s in seeker:
        turns += [{"speaker": "seeker", "text": s}, {"speaker": "assistant", "text": f"I hear you ({i})."}]
    return {"dialogue_id": f"d{i}", "language": language, "role_model": role, "turns": turns}


def test_the_judge_reads_the_turns_before_the_rated_one():
    turns = [{"speaker": "seeker", "text": "hi"}, {"speaker": "seeker", "text": "anyone?"},
             {"speaker": "assistant", "text": "Yes, I am here."}, {"speaker": "seeker", "text": "I lost my job."}]
    first = distress_messages(turns, 1, "en")
    assert first[0].role == "system" and "(this is the first message)" in first[1].content
    assert '"hi anyone?"' in first[1].content  # a run of seeker messages is one turn
    second = distress_messages(turns, 2, "en", context=1)
    assert "Supporter: Yes, I am here.\n" in second[1].content and "Person: hi" not in second[1].content
    assert '"I lost my job."' in second[1].content and second[1].content.endswith("Answer with the number only.")
    assert "求助者：" not in distress_messages(turns, 2, "zh")[1].content
    assert "支持者: Yes, I am here." in distress_messages(turns, 2, "zh")[1].content
    with pytest.raises(ValueError, match="seeker turn 3 out of range"):
        distress_messages(turns, 3, "en")
    assert distress_turn(distress_dimension(12)) == 12 and distress_turn("empathy") is None


def test_every_seeker_turn_is_rated_once_and_a_rerun_rates_nothing(tmp_path):
    dialogues = [_dialogue(0, ["I can't sleep.", "Work is awful.", "Thanks."]),
                 _dialogue(1, ["我很难过。", "谢谢。"], language="zh", role="sim")]
    cfg = DistressConfig(judge=ModelRef(model="fake/judge"), execution=LOCAL)
    result = run_distress(cfg, dialogues, tmp_path / "distress")
    assert result["items"] == 2 and result["seeker_turns"] == 5 and result["failed"] == 0
    rows = pq.read_table(tmp_path / "distress" / "scores").to_pylist()
    assert sorted((r["dialogue_id"], r["dimension"]) for r in rows) == [
        ("d0", "distress:1"), ("d0", "distress:2"), ("d0", "distress:3"), ("d1", "distress:1"), ("d1", "distress:2")]
    assert all(r["parse_status"] == "ok" and r["score"] in range(5) and abs(sum(r["probs"]) - 1) < 1e-5 for r in rows)
    assert {r["target_model"] for r in rows} == {"people", "sim"} and {r["judge"] for r in rows} == {cfg.judge_id}
    ratings = distress_ratings(tmp_path / "distress", cfg.judge_id)
    assert {(r["dialogue_id"], r["seeker_turn"]) for r in ratings} == {("d0", 1), ("d0", 2), ("d0", 3), ("d1", 1), ("d1", 2)}
    assert all(r["rating"] == pytest.approx(sum(i * p for i, p in enumerate(row["probs"])))
               for r in ratings for row in rows if (row["dialogue_id"], row["dimension"]) == (r["dialogue_id"], f"distress:{r['seeker_turn']}"))
    again = run_distress(cfg, dialogues + [_dialogue(2, ["Still sad."])], tmp_path / "distress")
    assert again["items"] == 1 and again["skipped_done"] == 2  # only the new dialogue
    assert len(pq.read_table(tmp_path / "distress" / "scores")) == 6


def test_a_free_answer_is_parsed_and_one_that_does_not_parse_is_a_null_not_a_zero(tmp_path):
    cfg = DistressConfig(judge=ModelRef(model="fake/fixed?reply=3"), method="generate", execution=LOCAL)
    run_distress(cfg, [_dialogue(0, ["I feel bad."])], tmp_path / "a")
    assert [(r["score"], r["parse_status"]) for r in pq.read_table(tmp_path / "a" / "scores").to_pylist()] == [(3, "ok")]
    cfg = DistressConfig(judge=ModelRef(model="fake/fixed?reply=quite upset"), method="generate", execution=LOCAL)
    run_distress(cfg, [_dialogue(0, ["I feel bad."])], tmp_path / "b")
    row = pq.read_table(tmp_path / "b" / "scores").to_pylist()[0]
    assert row["score"] is None and row["parse_status"] == "parse_failure" and row["raw"] == "quite upset"
    assert distress_ratings(tmp_path / "b", cfg.judge_id)[0]["rating"] is None


def test_a_failed_call_is_a_row_with_its_reason():
    class Broken:
        async def chat(self, messages, params, adapter=None):
            raise ConnectionError("judge unreachable")

    cfg = DistressConfig(judge=ModelRef(model="fake/judge"))
    rows = asyncio.run(rate_turns(_dialogue(0, ["a", "b"])["turns"], "en", [1, 2], cfg, Broken(),
                                  default_plan(cfg.judge_config())))
    assert [(r["dimension"], r["parse_status"], r["score"]) for r in rows] == [
        ("distress:1", "error", None), ("distress:2", "error", None)]
    assert rows[0]["error"] == "ConnectionError: judge unreachable"


def test_bad_input_stops_before_anything_is_written(tmp_path):
    cfg = DistressConfig(judge=ModelRef(model="fake/judge"), execution=LOCAL)
    with pytest.raises(ValueError, match="no dialogue to rate"):
        run_distress(cfg, [], tmp_path / "x")
    with pytest.raises(ValueError, match="no seeker turn"):
        run_distress(cfg, [{"dialogue_id": "d", "language": "en", "turns": [{"speaker": "assistant", "text": "hi"}]}],
                     tmp_path / "x")
    with pytest.raises(Exception, match="nosuchmodel"):
        run_distress(cfg.model_copy(update={"judge": ModelRef(model="nosuchmodel")}), [_dialogue(0, ["a"])], tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert seeker_runs(_dialogue(0, ["a", "b"])["turns"]) == ["a", "b"]
