"""Self-preference of any judge of a target's family, one judge or many (analysis/panels/self_preference.py),
against planted truth: with no preference the interval excludes 0 at most at its nominal rate, a
quarter point (x25: 6.25) is found at 40 cards; sized against a judge of another family or people's
scores; one judge with nothing to size it against gets a plain warning; and through simulate, score
and the leaderboard on the fakes the row of the judge's own family is marked."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from esc_eval.analysis.panels.self_preference import MIN_CARDS, did_estimate, family_pairs, self_preference

FAMILIES = {"run": {"families": {"targets": {"M": "qwen", "C": "llama"}, "judges": {"J": "qwen", "R": "llama"}}}}


def gaps(rng, cards: int, delta: float) -> pd.DataFrame:
    """Per card, the judge-minus-reference gap (x25) on the target of its family and on another's."""
    own = rng.normal(0, 9, cards) + delta  # sd 9: a judge's 7-dimension Average, rounded labels, minus another's
    other = rng.normal(0, 9, cards)
    return pd.DataFrame({"card_id": [f"c{i}" for i in range(cards)] * 2, "gap": np.r_[own, other],
                         "own": [True] * cards + [False] * cards})


def test_no_preference_within_nominal_and_a_quarter_point_found_at_40_cards():
    rng = np.random.default_rng(0)
    n = 300  # seeds; Monte-Carlo error of a 5% rate over 300: 1.3 points
    fp = sum(not lo <= 0 <= hi for _, lo, hi in (did_estimate(gaps(rng, MIN_CARDS, 0.0), 400, i) for i in range(n)))
    assert fp / n <= 0.05 + 2 * (0.05 * 0.95 / n) ** 0.5, fp
    found = [did_estimate(gaps(rng, 40, 6.25), 400, i) for i in range(100)]
    assert sum(lo > 0 for _, lo, _ in found) >= 80
    covered = sum(lo <= 6.25 <= hi for _, lo, hi in found)
    assert covered >= 88, covered  # 95% nominal, 100 seeds


def frame(rng, cards: int, delta: float, judges=("J", "R")) -> pd.DataFrame:
    """Score rows: targets M (qwen) and C (llama) on each card; J adds `delta` points to M; labels 0-4."""
    rows = []
    for c in range(cards):
        for t in ("M", "C"):
            q = rng.normal(2.5, 0.5)
            for j in judges:
                for dim in ("empathy", "overall"):
                    s = q + (delta if (j == "J" and t == "M") else 0) + rng.normal(0, 0.4)
                    rows.append({"dialogue_id": f"{t}{c}", "judge": j, "language": "en", "target_model": t,
                                 "card_id": f"c{c}", "dimension": dim, "score": float(np.clip(round(s), 0, 4))})
    return pd.DataFrame(rows)


def test_sized_against_another_family_or_people_and_warned_with_one_judge_alone():
    rng = np.random.default_rng(1)
    marks = self_preference(frame(rng, 30, 0.5), FAMILIES, n_boot=300).set_index("judge")
    row = marks.loc["J"]
    # llama's R judging llama's C against J: the same number, as judges alone cannot tell who favours whom
    assert marks.loc["R", "model"] == "C" and marks.loc["R", "estimate"] == row["estimate"]
    assert "human scores (--humans) tell the two apart" in row["note"]
    assert row["reference"] == "judges of other families (R)" and row["model"] == "M"
    assert row["verdict"] == "favours its family" and row["ci_low"] > 0 and 6 < row["estimate"] < 20
    assert set(self_preference(frame(rng, 30, 0.0), FAMILIES, n_boot=300)["verdict"]) == {"no evidence"}
    alone = frame(rng, 12, 0.5, judges=("J",))
    (warn,) = self_preference(alone, FAMILIES).to_dict(orient="records")  # J judges M: R is absent
    assert warn["reference"] == "none" and warn["verdict"] == "unchecked" and "may be inflated" in warn["note"]
    # people's scores size it with one judge: each dialogue's mean over annotators
    truth = alone[alone["judge"] == "J"].assign(score=lambda f: f["score"] - 0.5 * (f["target_model"] == "M"))
    means = truth.pivot_table(index="dialogue_id", columns="dimension", values="score")
    (people,) = self_preference(alone, FAMILIES, humans=SimpleNamespace(means=means), n_boot=300).to_dict("records")
    assert people["reference"] == "people" and people["estimate"] > 0
    assert family_pairs(alone, {}) == []  # no families known: nothing marked
    few = self_preference(frame(rng, MIN_CARDS - 2, 0.5), FAMILIES, n_boot=100).iloc[0]
    assert few["verdict"] == "n/a" and "at least 10" in few["note"]


def test_the_leaderboard_marks_one_judge_of_its_targets_family_through_the_real_path(tmp_path):
    from esc_eval.analysis.report.from_runs import write_leaderboard_files
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.runs.runfolder import RunFolder

    local, run = ExecutionConfig(executor="local"), tmp_path / "run"
    mine, other = "fake/fixed?reply=ALPHA+I+hear+you.", "fake/fixed?reply=BETA+I+hear+you."
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=12, rounds=2, role=ModelRef(model="fake/seeker?vary=1"),
                                    targets=[ModelRef(model=mine), ModelRef(model=other)], execution=local), run)

    def score(name: str, marks: str) -> None:
        run_scoring(ScoringConfig(judge=JudgeConfig(model=ModelRef(model=f"fake/judge?marks={marks}&noise=0.5"), name=name,
                                                    dimensions=["overall"]), execution=local), run)

    score("alpha-judge", "ALPHA:3,BETA:2")  # a point more for its own family's replies
    # what the registry writes for models of known families (fakes have none)
    RunFolder(run).update_manifest(families={"targets": {mine: "alpha", other: "beta"},
                                             "judges": {"alpha-judge": "alpha", "beta-judge": "beta"}})
    one = write_leaderboard_files([str(run)], str(tmp_path / "one"), rule=lambda m: {}, n_boot=200)
    marked = one.table.set_index("model")
    assert marked.loc[mine, "self_family"] == "alpha" and marked.loc[other, "self_family"] == ""
    assert "self-preference unchecked" in marked.loc[mine, "notes"]
    assert "alpha-judge judges" in one.self_preference and "Nothing here sizes it" in one.self_preference
    assert "Self-preference:" in (tmp_path / "one" / "leaderboard.md").read_text()
    score("beta-judge", "ALPHA:2,BETA:2")
    two = write_leaderboard_files([str(run)], str(tmp_path / "two"), rule=lambda m: {}, n_boot=200).table
    note = two[(two["model"] == mine) & (two["judge"] == "alpha-judge")]["notes"].iloc[0]
    assert "against judges of other families (beta-judge): favours its family" in note
