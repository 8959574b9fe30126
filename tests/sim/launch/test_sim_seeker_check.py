"""The check against people on the fake backends (sim/launch/seeker_check.py): people's dialogues and
their own answers written once, the judge's answers as the seeker and its seven scores beside them,
a re-run that asks nothing again, and a bad judge refused before anything is written."""
from __future__ import annotations

import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.launch.seeker_check import SeekerCheckConfig, run_seeker_check
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

PEOPLE = [{"dialogue_id": f"p{i}", "language": "en",
           "turns": [{"speaker": "seeker", "text": f"I feel low, day {i}."}, {"speaker": "seeker", "text": "Are you there?"},
                     {"speaker": "assistant", "text": "I am here. What happened?"}, {"speaker": "seeker", "text": "Work."}],
           "ratings": {"empathy": 1 + i % 5, "relevance": 2.0, "intensity_before": 4.0,
                       "intensity_after": float("nan") if i == 0 else 3.0}} for i in range(5)]


def cfg(**kw) -> SeekerCheckConfig:
    return SeekerCheckConfig(**{"judge": ModelRef(model="fake/judge"), "execution": ExecutionConfig(executor="local"), **kw})


def test_people_their_answers_the_judge_as_seeker_and_its_scores_in_one_folder(tmp_path):
    out = tmp_path / "check"
    result = run_seeker_check(cfg(), PEOPLE, out)
    run = RunFolder(out, create=False)
    dialogues = list(run.iter_rows("dialogues"))
    assert len(dialogues) == 5 and {d["target_model"] for d in dialogues} == {"people (supporter)"}
    assert [t["speaker"] for t in dialogues[0]["turns"]] == ["seeker", "seeker", "assistant", "seeker"]
    rows = list(run.iter_rows("seeker_ratings"))
    people = [r for r in rows if r["rater"] == "people"]
    assert len(people) == 5 * 4 - 1  # the survey without a final intensity has no row for it
    assert {(r["method"], r["parse_status"]) for r in people} == {("survey", "ok")}
    judge = [r for r in rows if r["rater"] == "fake/judge:as-seeker"]
    assert len(judge) == 20 and all(r["parse_status"] == "ok" and 1 <= r["rating"] <= 5 for r in judge)
    assert result["scoring"]["items"] == 5 and len(list(run.iter_rows("scores"))) == 35
    again = run_seeker_check(cfg(), PEOPLE, out)
    assert again["seeker_ratings"]["items"] == 0 and again["scoring"]["items"] == 0
    assert len(list(run.iter_rows("seeker_ratings"))) == len(rows) and len(list(run.iter_rows("dialogues"))) == 5
    only = run_seeker_check(cfg(score=False, judge=ModelRef(model="fake/judge?score=4")), PEOPLE[:2], tmp_path / "only")
    assert "scoring" not in only and not RunFolder(tmp_path / "only", create=False).parts("scores")


def test_a_judge_that_cannot_be_found_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="nosuch"):
        run_seeker_check(cfg(judge=ModelRef(model="nosuch-model")), PEOPLE, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="no dialogue of people"):
        run_seeker_check(cfg(), [], tmp_path / "bad")
