"""Prediction-powered mean estimation (analysis/trust/ppi.py) against hand-computed values and the
numbers of the `ppi-python` package (0.2.3, `ppi_mean_pointestimate` / `ppi_mean_ci`, alpha 0.05),
computed in a separate virtual environment (the package is not a dependency) and recorded here."""
from __future__ import annotations

import math

import numpy as np
import pytest

from esc_eval.analysis.trust.ppi import classical_mean, effective_human_scores, ppi_lambda, ppi_mean

Y = np.array([3, 2, 4, 1, 3, 2, 0, 4, 3, 2, 1, 3], dtype=float)
YHAT = np.array([2.8, 2.1, 3.6, 1.4, 2.9, 2.4, 0.7, 3.5, 3.1, 1.6, 1.2, 2.7])
YHAT_U = np.array([(i * 37 % 41) / 10 for i in range(30)])


def test_plain_ppi_by_hand():
    # lam = 1: mean(Yhat_u) + mean(Y - Yhat); se^2 = var(Yhat_u)/N + var(Y - Yhat)/n (ddof 0)
    y, yh, yu = np.array([1.0, 2.0, 3.0]), np.array([1.5, 1.5, 2.5]), np.array([1.0, 2.0, 3.0, 4.0])
    est = ppi_mean(y, yh, yu, lam=1.0)
    assert est.estimate == pytest.approx(2.5 + (2.0 - 11 / 6))  # 2.6667
    rect = y - yh  # -0.5, 0.5, 0.5: mean 1/6, var 2/9
    se = math.sqrt(1.25 / 4 + (2 / 9) / 3)
    assert est.se == pytest.approx(se)
    assert (est.lo, est.hi) == pytest.approx((est.estimate - 1.959963984540054 * se, est.estimate + 1.959963984540054 * se))
    assert rect.mean() == pytest.approx(1 / 6) and (est.n, est.N, est.lam) == (3, 4, 1.0)


def test_tuned_lambda_by_hand():
    # lam* = cov(Y, Yhat) (1/n) / ((1 + n/N) var(all Yhat, ddof 1)), clipped to [0, 1]
    y, yh, yu = np.array([1.0, 2.0, 3.0]), np.array([1.5, 1.5, 2.5]), np.array([1.0, 2.0, 3.0, 4.0])
    cov = np.mean((y - 2) * (yh - 11 / 6))  # 1/3
    var = np.var(np.concatenate([yh, yu]), ddof=1)
    assert ppi_lambda(y, yh, yu) == pytest.approx(min(1.0, cov / ((1 + 3 / 4) * var)))
    # uninformative (constant) predictions: lam 0, the human-only mean
    assert ppi_lambda(y, np.full(3, 2.0), np.full(4, 2.0)) == 0.0


def test_matches_ppi_python():
    tuned = ppi_mean(Y, YHAT, YHAT_U)
    assert tuned.lam == pytest.approx(0.5853022978050106, rel=1e-12)
    assert tuned.estimate == pytest.approx(2.1323795444202798, rel=1e-12)
    assert (tuned.lo, tuned.hi) == pytest.approx((1.6780641853070617, 2.586694903533498), rel=1e-12)
    assert (ppi_mean(Y, YHAT, YHAT_U, confidence=0.9).lo, ppi_mean(Y, YHAT, YHAT_U, confidence=0.9).hi) == pytest.approx(
        (1.7511060760751445, 2.513653012765415), rel=1e-12)
    plain = ppi_mean(Y, YHAT, YHAT_U, lam=1.0)
    assert plain.estimate == pytest.approx(1.99) and (plain.lo, plain.hi) == pytest.approx(
        (1.524433485080943, 2.4555665149190573), rel=1e-12)
    human = ppi_mean(Y, YHAT, YHAT_U, lam=0.0)
    assert (human.lo, human.hi) == pytest.approx((1.6665400449506516, 3.0001266217160154), rel=1e-12)
    c = classical_mean(Y)
    assert (c.estimate, c.lo, c.hi) == pytest.approx((human.estimate, human.lo, human.hi))


def test_matches_ppi_python_at_the_target_size():
    # 8,500 dialogues, 500 with a human score (numpy's default_rng(7) stream; ppi-python's numbers)
    rng = np.random.default_rng(7)
    truth = rng.normal(2.5, 0.8, 8500)
    judge = 0.6 * truth + 0.4 + rng.normal(0, 0.5, 8500)
    est = ppi_mean(truth[:500], judge[:500], judge[500:])
    assert est.estimate == pytest.approx(2.468841792040675, rel=1e-12)
    assert (est.lo, est.hi) == pytest.approx((2.4172961821005536, 2.5203874019807966), rel=1e-12)


def test_covers_the_human_mean_and_beats_humans_alone_with_a_good_judge():
    """Seeded simulation: a biased judge (human = judge - 0.5 + noise); PPI covers the true human
    mean about 95% of the time while the judge alone is off, and is narrower than humans alone."""
    rng = np.random.default_rng(0)
    covered, narrower, judge_covered = 0, 0, 0
    reps = 400
    for _ in range(reps):
        judge = rng.normal(2.5, 0.9, 2000)
        human = judge - 0.5 + rng.normal(0, 0.4, 2000)
        est = ppi_mean(human[:100], judge[:100], judge[100:])
        covered += est.lo <= 2.0 <= est.hi
        narrower += (est.hi - est.lo) < (classical_mean(human[:100]).hi - classical_mean(human[:100]).lo)
        judge_covered += abs(judge.mean() - 2.0) < 0.1
    assert 0.92 <= covered / reps <= 0.98
    assert narrower == reps and judge_covered == 0


def test_edges():
    assert math.isnan(ppi_mean([3.0], [2.0], [1.0, 2.0]).estimate)  # one human score: no interval
    every = ppi_mean(Y, YHAT, [])  # every dialogue human-scored: the human mean
    assert every.lam == 0.0 and every.estimate == pytest.approx(Y.mean())
    with pytest.raises(ValueError):
        ppi_mean([1.0, 2.0], [1.0], [1.0])
    est, hum = ppi_mean(Y, YHAT, YHAT_U), classical_mean(Y)
    assert effective_human_scores(est, hum) == pytest.approx(12 * (hum.se / est.se) ** 2) and est.se < hum.se
