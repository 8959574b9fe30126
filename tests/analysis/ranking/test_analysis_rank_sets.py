"""Rank-sets with a simultaneous guarantee: the construction from intervals by hand; in a simulation
with a known ranking, the human-anchored sets hold every target's true rank at once in at least the
nominal share of repetitions, without being trivially [1, K], while a judge whose bias differs by
target misleads the judge-only sets; on run folders, the sets per language and judge, labelled
judge-only or human-anchored, and `leaderboard --rank-sets` writing and printing them."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.trust.human_leaderboard import human_anchored
from esc_eval.analysis.trust.human_scores import load_human_scores
from esc_eval.analysis.trust.ppi import ppi_mean
from esc_eval.analysis.ranking.rank_sets import (
    HUMAN_ANCHORED, JUDGE_ONLY, build_rank_sets, rank_set_bounds, simultaneous_means,
)
from esc_eval.cli.app import app

K, N, N_HUMAN, REPS = 6, 300, 20, 300
MU = 1.6 + 0.3 * np.arange(K)  # true means, ascending: true ranks K..1
TRUE_RANKS = np.arange(K, 0, -1)
BIAS = np.array([0.6, -0.3, 0.4, -0.2, 0.0, -0.5])  # the judge's bias differs by target


def test_rank_sets_from_intervals_by_hand():
    # A clearly on top; B overlaps C; C overlaps D; E has no interval (unbounded)
    lo = np.array([8.0, 5.0, 4.0, 2.0, np.nan])
    hi = np.array([9.0, 7.0, 6.0, 4.5, np.nan])
    r_lo, r_hi = rank_set_bounds(lo, hi)
    # A: nobody surely above it, B, C and D surely below: [1, 5 - 3]; B: A above, D below: [2, 5 - 1];
    # C and D: only A (and B for D) surely above, nobody surely below; E: anywhere, and it moves nobody
    assert r_lo.tolist() == [1, 2, 2, 3, 1]
    assert r_hi.tolist() == [2, 4, 5, 5, 5]


def _simulate(rng, bias):
    y = MU[:, None] + rng.normal(0, 0.8, (K, N))  # the human score of every dialogue
    yhat = y + bias[:, None] + rng.normal(0, 0.4, (K, N))  # the judge's
    human = np.full((K, N), np.nan)
    human[:, :N_HUMAN] = y[:, :N_HUMAN]  # people score a few dialogues per target
    return list(yhat), list(human)


def _coverage(bias, anchored: bool, truth=TRUE_RANKS, seed=7):
    rng = np.random.default_rng(seed)
    covered, sizes, everything = 0, [], 0
    for _ in range(REPS):
        judge, human = _simulate(rng, bias)
        est = simultaneous_means(judge, human if anchored else None, confidence=0.95)
        lo, hi = rank_set_bounds(np.array([e.lo for e in est]), np.array([e.hi for e in est]))
        covered += bool(np.all((lo <= truth) & (truth <= hi)))
        sizes.append(np.mean(hi - lo + 1))
        everything += bool(np.all((lo == 1) & (hi == K)))
    return covered / REPS, float(np.mean(sizes)), everything


def test_human_anchored_rank_sets_cover_the_true_ranking_at_the_nominal_level():
    coverage, size, trivial = _coverage(BIAS, anchored=True)
    # nominal 0.95; with 300 repetitions the Monte Carlo standard error is about 0.013
    assert coverage >= 0.95 - 0.03
    # informative: six targets 0.3 apart with 20 human scores each give sets of about 3 ranks
    assert 1.5 < size < 4.0 and trivial == 0


def test_a_target_dependent_judge_bias_misleads_judge_only_sets_but_not_anchored_ones():
    coverage, size, _ = _coverage(BIAS, anchored=False)
    assert coverage < 0.2 and size < 3.5  # confident and wrong about people's ranking
    # without the bias the judge-only sets hold the judge's (here: people's) ranking
    unbiased, _, _ = _coverage(np.zeros(K), anchored=False)
    assert unbiased >= 0.95 - 0.03


def test_simultaneous_means_are_bonferroni_intervals_of_each_target():
    rng = np.random.default_rng(0)
    judge = [rng.normal(m, 1.0, 50) for m in (1.0, 2.0, 3.0)]
    est = simultaneous_means(judge, None, confidence=0.9)
    z = stats.norm.ppf(1 - 0.1 / 3 / 2)  # each interval at 1 - 0.1/3
    for e, j in zip(est, judge):
        assert e.estimate == pytest.approx(j.mean())
        assert e.hi - e.estimate == pytest.approx(z * j.std() / np.sqrt(len(j)))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_fake_run(tmp_path_factory.mktemp("ranksets") / "run", 150, models=["m-low", "m-mid", "m-high"])


def test_judge_only_rank_sets_per_language_match_the_leaderboards_means(run):
    scores = load_scores([run])
    table = build_rank_sets(scores)
    assert set(table["anchor"]) == {JUDGE_ONLY} and set(table["language"]) == {"en", "zh"}
    en = table[table["language"] == "en"].set_index("model")
    # levels 1.5, 2.5, 3.5 with 40 dialogues each: the order is sure
    assert en["rank"].to_dict() == {"m-high": 1.0, "m-mid": 2.0, "m-low": 3.0}
    assert (en["rank_lo"] == en["rank"]).all() and (en["rank_hi"] == en["rank"]).all()
    s = scores[(scores["language"] == "en") & (scores["target_model"] == "m-mid")]
    per_dialogue = s.groupby("dialogue_id")["score"].mean() * 25
    assert en.loc["m-mid", "estimate"] == pytest.approx(per_dialogue.mean())
    assert en.loc["m-mid", "n_dialogues"] == len(per_dialogue)
    half = stats.norm.ppf(1 - 0.05 / 3 / 2) * per_dialogue.std(ddof=0) / np.sqrt(len(per_dialogue))
    assert en.loc["m-mid", "hi"] - en.loc["m-mid", "estimate"] == pytest.approx(half)
    dims = build_rank_sets(scores, columns=("Empathy", "Average"))
    assert set(dims["column"]) == {"Empathy", "Average"}
    with pytest.raises(ValueError, match="unknown columns"):
        build_rank_sets(scores, columns=("Kindness",))


def _humans(run, tmp_path, languages=("en",)):
    """Two annotators who agree with the judge on the first 10 dialogues of each model in `languages`."""
    scores = load_scores([run])
    scores = scores[scores["language"].isin(languages)]
    first = scores.drop_duplicates("dialogue_id").groupby("target_model")["dialogue_id"].apply(lambda s: list(s)[:10])
    some = scores[scores["dialogue_id"].isin([d for ds in first for d in ds])]
    sheet = tmp_path / "humans.csv"
    pd.DataFrame([{"dialogue_id": r.dialogue_id, "annotator": a, "dimension": r.dimension, "score": int(r.score)}
                  for r in some.itertuples() for a in ("ana", "ben")]).to_csv(sheet, index=False)
    return load_human_scores(sheet), sheet


def test_human_anchored_rank_sets_and_the_judge_only_fallback_for_a_language_nobody_scored(run, tmp_path):
    humans, _ = _humans(run, tmp_path)
    table = build_rank_sets(load_scores([run]), humans)
    en, zh = table[table["language"] == "en"], table[table["language"] == "zh"]
    assert set(en["anchor"]) == {HUMAN_ANCHORED} and (en["n_human"] == 10).all()
    assert set(zh["anchor"]) == {JUDGE_ONLY} and zh["note"].str.contains("no human score").all()
    # the estimate is the human-anchored leaderboard's PPI mean of the Average (computed there apart)
    scores = load_scores([run])
    anchored = human_anchored(scores, humans, build_leaderboard(scores, n_boot=0))
    ppi = anchored[(anchored["language"] == "en") & (anchored["column"] == "Average")].set_index("model")["ppi"]
    assert en.set_index("model")["estimate"].to_dict() == pytest.approx(ppi.to_dict())
    # its interval: Student's t at the Bonferroni level for three models, around PPI's standard error
    se = (ppi_mean_of(scores, humans, "m-mid").se)
    row = en.set_index("model").loc["m-mid"]
    assert row["hi"] - row["estimate"] == pytest.approx(stats.t.ppf(1 - 0.05 / 3 / 2, 9) * se)


def ppi_mean_of(scores, humans, model: str):
    """PPI's mean of one English model's per-dialogue Average (x25), assembled here by hand."""
    s = scores[(scores["language"] == "en") & (scores["target_model"] == model)]
    judge = s.groupby("dialogue_id")["score"].mean() * 25
    human = humans.long.groupby("dialogue_id")["score"].mean().reindex(judge.index) * 25
    lab = human.notna()
    return ppi_mean(human[lab].to_numpy(), judge[lab].to_numpy(), judge[~lab].to_numpy())


def test_leaderboard_rank_sets_prints_and_writes_the_columns(run, tmp_path):
    humans, sheet = _humans(run, tmp_path)
    out = tmp_path / "lb"
    res = CliRunner().invoke(app, ["leaderboard", str(run), "-o", str(out), "--n-boot", "0", "--rank-sets",
                                   "--humans", str(sheet)])
    assert res.exit_code == 0, res.output
    assert "Rank-set" in res.output
    csv = pd.read_csv(out / "leaderboard_rank_sets.csv", dtype={"rank_set": str})
    row = csv[(csv["language"] == "en") & (csv["model"] == "m-high")].iloc[0]
    assert row["rank_set"] == "1" and row["rank_anchor"] == HUMAN_ANCHORED
    assert {"Average", "n_dialogues", "rank_lo", "rank_hi"} <= set(csv.columns)
    emitted = json.loads(res.stdout[res.stdout.index("{"):])
    assert {"rank_sets_markdown", "rank_sets_csv"} <= set(emitted)
    assert "with probability at least 95%" in (out / "leaderboard_rank_sets.md").read_text()
    bad = CliRunner().invoke(app, ["leaderboard", str(run), "-o", str(tmp_path / "by"), "--by", "category",
                                   "--rank-sets"])
    assert bad.exit_code != 0 and not (tmp_path / "by").exists()
