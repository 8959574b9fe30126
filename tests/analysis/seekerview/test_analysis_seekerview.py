"""The person's own view read back (analysis/seekerview): the verdict "agrees with the people" against
planted truth (no effect: said at most at its rate; a planted rho: seen; the interval's coverage), the
raters' means, the agreement table with its simultaneous intervals, the report's section, and the
check's bad input refused before any model runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from analysis_testdata import T0, dialogue_row, score_rows
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.seekerview import (agreement_rows, agrees_with_people, load_seeker_ratings, rating_summary,
                                          seeker_check_of_people, wide)
from esc_eval.analysis.seekerview.section import _has_ratings
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS, seeker_rating_row
from esc_eval.sim.runs.runfolder import RunFolder

CUTS = [-1.2, -0.4, 0.4, 1.2]  # a normal cut into five answers, 1-5, like a survey's


def survey_pairs(rng, n: int, rho: float):
    z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=n)
    return np.digitize(z[:, 0], CUTS) + 1.0, np.digitize(z[:, 1], CUTS) + 1.0, z


def test_agrees_is_said_at_its_rate_with_no_effect_and_seen_with_a_planted_one():
    """Planted truth at 40 dialogues answering 1-5: no relation -> 'agrees' near its one-sided 2.5% (measured
    2.3-3.7% over 600 draws, seeds 54, 1, 2; the test allows 3 binomial standard errors over 3% at 300 draws),
    a claim either way near 5% (measured 6%); a latent rho of 0.5 -> said in most draws; and the interval of a
    continuous pair covers its population Spearman, 6/pi asin(rho/2), about 95% of the time."""
    rng = np.random.default_rng(54)
    reps = 300
    null = [agrees_with_people(*survey_pairs(rng, 40, 0.0)[:2], n_boot=400, seed=r)["verdict"] for r in range(reps)]
    assert null.count("agrees") / reps <= 0.06 and (reps - null.count("no clear agreement")) / reps <= 0.1, null
    reps = 150
    planted = [agrees_with_people(*survey_pairs(rng, 40, 0.5)[:2], n_boot=400, seed=r)["verdict"] for r in range(reps)]
    assert planted.count("agrees") / reps >= 0.7
    truth = 6 / np.pi * np.arcsin(0.25)
    covered = 0
    for r in range(reps):
        z = survey_pairs(rng, 40, 0.5)[2]
        v = agrees_with_people(z[:, 0], z[:, 1], n_boot=400, seed=r)
        covered += v["lo"] <= truth <= v["hi"]
    assert 0.88 <= covered / reps <= 0.995, covered / reps
    few = agrees_with_people([1, 2, 3], [3, 2, 1])
    assert few["verdict"] == "no clear agreement" and "fewer than 5" in few["note"]


def _rows(did: str, rater: str, values: dict, target: str = "m1", role: str = "r", strategy: str = "official"):
    return [seeker_rating_row({"run_id": "run-a", "dialogue_id": did, "card_id": "c", "language": "en", "target_model": target,
                               "role_model": role, "strategy": strategy, "item": item, "rater": rater,
                               "rating": None if v is None else int(round(v)), "expected": v,
                               "parse_status": "ok" if v is not None else "parse_failure", "rated_at": T0})
            for item, v in values.items()]


def test_means_per_target_and_the_improvement_by_hand(tmp_path, make_run):
    run = make_run("run", dialogues=[dialogue_row("d1", "m1"), dialogue_row("d2", "m1")])
    RunFolder(run).write_part("seeker_ratings", _rows("d1", "r:seeker", {"empathy": 4.0, "relevance": 3.0, "intensity_before": 5.0,
                                                                         "intensity_after": 2.0})
                              + _rows("d2", "r:seeker", {"empathy": 2.0, "relevance": None, "intensity_before": 4.0,
                                                         "intensity_after": 4.0}))
    ratings = load_seeker_ratings([run])
    s = rating_summary(ratings, n_boot=0).set_index("question")
    assert s.loc["empathy", "mean"] == 3.0 and s.loc["relevance", "n"] == 1 and s.loc["relevance", "unusable"] == 1
    assert s.loc["improvement", "mean"] == pytest.approx(1.5)  # (5 - 2 + 4 - 4) / 2: > 0 feels better


def _check_folder(make_run, n: int = 30, seed: int = 0):
    """A check's folder: people's answers, a judge's answers as the seeker that follow them (empathy) or not, scores."""
    rng = np.random.default_rng(seed)
    dialogues, ratings, scores = [], [], []
    for i in range(n):
        did = f"p{i}"
        people = {"empathy": float(rng.integers(1, 6)), "relevance": float(rng.integers(1, 6)),
                  "intensity_before": float(rng.integers(3, 6)), "intensity_after": float(rng.integers(1, 4))}
        dialogues.append(dialogue_row(did, "people (supporter)", role_model="people"))
        ratings += _rows(did, "people", people, target="people (supporter)", role="people", strategy="people")
        ratings += _rows(did, "j:as-seeker", {**{k: float(rng.integers(1, 6)) for k in people},
                                             "empathy": people["empathy"]}, target="people (supporter)")
        scores += score_rows(did, "people (supporter)", [int(min(4, people["empathy"] - 1))] + [int(rng.integers(0, 5))] * 6,
                             judge="j7")
    run = make_run("check", dialogues=dialogues, scores=scores)
    RunFolder(run).write_part("seeker_ratings", ratings)
    return run


def test_the_agreement_table_names_what_follows_the_people_and_nothing_else(make_run):
    run = _check_folder(make_run)
    from esc_eval.analysis.results.loaders import load_scores

    table = agreement_rows(load_seeker_ratings([run]), load_scores([run]), n_boot=400)
    as_seeker = table[table["kind"] == "as the seeker"].set_index("question")
    assert len(as_seeker) == 5 and as_seeker.loc["empathy", "verdict"] == "agrees"
    assert as_seeker.loc["empathy", "spearman"] == pytest.approx(1.0)
    judge = table[table["kind"] == "seven-dimension judge"]
    assert len(judge) == 7 * 3 and list(judge["measure"][::3]) == ["fluency", "expression", "empathy", "information",
                                                                    "skillful", "humanoid", "overall"]
    hit = judge[(judge["measure"] == "fluency") & (judge["question"] == "empathy")].iloc[0]
    assert hit["verdict"] == "agrees"  # the first dimension's scores were built from the people's empathy
    assert (table["reference"] == "people").all()
    # simultaneous: a rater's 5 intervals are each at 1 - 0.05/5, wider than one 95% interval on the same pairs
    w = wide(load_seeker_ratings([run])).set_index(["rater", "dialogue_id"])["relevance"]
    plain = agrees_with_people(w["j:as-seeker"], w["people"].reindex(w["j:as-seeker"].index), n_boot=400)
    row = as_seeker.loc["relevance"]
    assert row["spearman"] == pytest.approx(plain["spearman"]) and row["hi"] - row["lo"] > plain["hi"] - plain["lo"]


def test_the_report_shows_the_persons_view_where_a_run_holds_ratings(tmp_path, make_run):
    run = _check_folder(make_run, n=12)
    paths = write_report([run], tmp_path / "rep", n_boot=50)
    md = paths["markdown"].read_text()
    section = md.split("## The person's own view")[1].split("\n## ")[0]
    assert "Reference: the people who were helped" in section and "| j:as-seeker | people (supporter) |" in section
    data = json.loads(paths["json"].read_text())["seeker_view"]
    assert data["reference"] == "people" and len(data["agreement"]) == 5 + 21
    plain = make_run("plain", dialogues=[dialogue_row("d1", "m1")], scores=score_rows("d1", "m1", [2] * 7))
    assert _has_ratings([run]) and not _has_ratings([plain])  # the section's `when`: a run without ratings has none


def test_the_checks_bad_input_is_refused_before_any_model_runs(tmp_path):
    def never(people, out):
        raise AssertionError("the models were reached")

    people = tmp_path / "people.json"
    people.write_text(json.dumps([{"emotion_type": "anxiety", "problem_type": "job", "situation": "s",
                                   "survey_score": {"seeker": {"initial_emotion_intensity": "4"}},
                                   "dialog": [{"speaker": "seeker", "content": "hi"}, {"speaker": "supporter", "content": "hello"}]}]))
    with pytest.raises(AnalysisInputError, match="no dialogue carries its seeker's own ratings"):
        seeker_check_of_people(str(people), str(tmp_path / "out"), run=never)
    with pytest.raises(AnalysisInputError, match="--limit 0"):
        seeker_check_of_people(str(people), str(tmp_path / "out"), limit=0, run=never)
    with pytest.raises(AnalysisInputError, match="no such file"):
        seeker_check_of_people(str(tmp_path / "nope.json"), str(tmp_path / "out"), run=never)
    assert not (tmp_path / "out").exists()
    assert SEEKER_RATING_ITEMS == ("empathy", "relevance", "intensity_before", "intensity_after")
