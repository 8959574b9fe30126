"""The Bradley-Terry fit equals choix's, the ratings recover known strengths with intervals that cover
them, flips become ties, and the tau with the pointwise ranking comes from the same resamples."""
import choix
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from esc_eval.analysis.pairwise.bradley_terry import bt_ratings
from esc_eval.analysis.pairwise.bt_fit import ELO_SCALE, fit_bt, to_elo, win_tensor
from esc_eval.analysis.pairwise.fake_verdicts import fake_verdict_frame
from esc_eval.analysis.pairwise.position_bias import POOLED
from esc_eval.analysis.pairwise.verdicts import combine_orders
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores


def test_the_vectorised_fit_equals_choix_on_random_data():
    rng = np.random.default_rng(7)
    stack = rng.poisson(rng.uniform(1, 20, (5, 8, 8))).astype(float)
    stack[:, np.arange(8), np.arange(8)] = 0
    got = fit_bt(stack)
    for w, theta in zip(stack, got):
        want = choix.ilsr_pairwise_dense(w, alpha=0.0, max_iter=10_000, tol=1e-12)
        np.testing.assert_allclose(theta, want - want.mean(), atol=1e-6)


def test_the_prior_is_pseudo_wins_each_way_and_keeps_a_perfect_record_finite():
    w = np.array([[0, 3, 2], [0, 0, 1], [0, 1, 0]], float)  # target 0 won everything
    with_prior = fit_bt(w, prior=0.5)
    w2 = w + 0.5 * ((w + w.T) > 0)
    np.testing.assert_allclose(with_prior, choix.ilsr_pairwise_dense(w2, max_iter=10_000, tol=1e-12), atol=1e-6)
    assert np.isfinite(with_prior).all() and with_prior[0] == with_prior.max()


def test_elo_scale():
    assert to_elo(np.array([0.0, np.log(10)])).tolist() == pytest.approx([1000.0, 1400.0])
    assert ELO_SCALE == pytest.approx(173.7178, abs=1e-4)


def test_win_tensor_gives_ties_half_a_win_each_way():
    o = pd.DataFrame({"card_id": ["c1", "c1", "c2"], "model_a": ["x", "x", "y"], "model_b": ["y", "z", "z"],
                      "score_a": [0.5, 1.0, 0.25]})
    w = win_tensor(o, ["x", "y", "z"], ["c1", "c2"])
    assert w[0].tolist() == [[0, 0.5, 1.0], [0.5, 0, 0], [0, 0, 0]]
    assert w[1].tolist() == [[0, 0, 0], [0, 0, 0.25], [0, 0.75, 0]]


def test_ratings_recover_known_strengths_with_intervals_that_cover_them():
    models = ["a", "b", "c", "d"]
    theta = np.array([-1.0, -0.2, 0.3, 0.9])
    rows = fake_verdict_frame(120, models, theta, tie_rate=0.0, seed=3)
    r = bt_ratings(combine_orders(rows).table, n_boot=300, seed=0).ratings
    pooled = r[r["dimension"] == POOLED].set_index("model").loc[models]
    true_elo = to_elo(theta - theta.mean())
    assert (pooled["elo_lo"] < true_elo).all() and (true_elo < pooled["elo_hi"]).all()
    assert np.abs(pooled["elo"] - true_elo).max() < 25
    assert pooled["rank"].tolist() == [4, 3, 2, 1] and pooled["rank_lo"].tolist() == [4, 3, 2, 1]
    assert set(r["dimension"]) == {POOLED, "fluency", "expression", "empathy", "information", "skillful", "humanoid",
                                   "overall"}


def test_a_judge_that_only_reads_the_position_gives_equal_ratings():
    rows = fake_verdict_frame(10, ["a", "b", "c"], [-2, 0, 2], position_bias=1.0, seed=0)
    out = combine_orders(rows)
    assert (out.table["kind"] == "flip").all() and (out.table["score_a"] == 0.5).all()
    r = bt_ratings(out.table, n_boot=20).ratings
    np.testing.assert_allclose(r["elo"], 1000.0, atol=1e-6)


def test_tau_with_the_pointwise_ranking_and_its_interval(tmp_path):
    models = ["model-a", "model-b", "model-c", "model-d"]
    run = write_fake_run(tmp_path / "run", 40 * len(models), models, judge="fake/judge")  # levels rise a -> d
    scores = load_scores([run])
    # pairwise strengths in the reverse order of two of them: c above d
    rows = fake_verdict_frame(40, models, [-1.0, -0.3, 0.9, 0.4], seed=5)
    res = bt_ratings(combine_orders(rows).table, scores, n_boot=200, seed=0)
    tau = res.tau.iloc[0]
    pooled = res.ratings[res.ratings["dimension"] == POOLED].set_index("model").loc[models]
    point = scores.groupby("target_model")["score"].mean().loc[models]  # one dialogue per card: same mean
    assert tau["tau"] == pytest.approx(stats.kendalltau(pooled["theta"], point).statistic)
    assert tau["tau"] == pytest.approx(4 / 6)  # 5 of 6 pairs concordant: (5 - 1) / 6
    assert tau["tau_lo"] <= tau["tau"] <= tau["tau_hi"] and tau["pointwise_judge"] == "fake/judge"
    assert tau["cards"] == 40 and tau["models"] == 4
    assert res.pointwise.set_index("model").loc[models, "pointwise"].to_numpy() == pytest.approx(point.to_numpy() * 25)


def test_no_outcomes_is_one_line():
    with pytest.raises(AnalysisInputError, match="no pair was answered"):
        bt_ratings(pd.DataFrame(columns=["judge", "model_a", "model_b", "card_id", "dimension", "score_a"]))
