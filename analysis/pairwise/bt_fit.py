"""The Bradley-Terry fit behind the pairwise ratings, vectorised over bootstrap resamples.

P(i beats j) = 1 / (1 + exp(theta_j - theta_i)). A win matrix W (W[i, j] = i's wins over j; a tie is
half a win each way, see verdicts.py) is fitted by Newton's method on the log-likelihood, for a whole
stack of matrices at once (one per resample of the cards): with 14 targets a step is one batched
14 x 14 solve, so 1,000 resamples take a few such steps, warm-started from the point estimate. Written
by hand because choix fits one matrix per call (1,000 Python calls per dimension); tests check it equals
choix.ilsr_pairwise_dense on random data. Thetas are centred (mean 0).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

ELO_SCALE = 400 / np.log(10)  # Elo points per unit of theta: a 400-point gap = 10:1 odds
ELO_CENTRE = 1000.0


def to_elo(theta: np.ndarray) -> np.ndarray:
    """Elo-scale ratings: 1000 + 400 / ln(10) x theta (theta centred, so the ratings average 1000)."""
    return ELO_CENTRE + ELO_SCALE * np.asarray(theta)


def win_tensor(outcomes: pd.DataFrame, models: list[str], cards: list[str]) -> np.ndarray:
    """cards x models x models: W[c, i, j] = the wins of i over j on card c (score_a to a, 1 - score_a to b)."""
    mi = {m: k for k, m in enumerate(models)}
    ci = {c: k for k, c in enumerate(cards)}
    c = outcomes["card_id"].map(ci).to_numpy(int)
    a = outcomes["model_a"].map(mi).to_numpy(int)
    b = outcomes["model_b"].map(mi).to_numpy(int)
    s = outcomes["score_a"].to_numpy(float)
    w = np.zeros((len(cards), len(models), len(models)))
    np.add.at(w, (c, a, b), s)
    np.add.at(w, (c, b, a), 1 - s)
    return w


def fit_bt(wins: np.ndarray, prior: float = 0.0, init: np.ndarray | None = None, tol: float = 1e-9,
           max_iter: int = 100) -> np.ndarray:
    """Maximum-likelihood thetas (..., T) of win matrices (..., T, T), centred.

    prior: pseudo-wins added each way to every pair that met (prior ties): a target that won (or lost)
    all its comparisons keeps a finite rating. Steps are clipped to 2 units of theta so that Newton's
    method cannot overshoot from a far start; pairs never compared contribute nothing (a target
    compared with no one stays at the mean)."""
    w = np.asarray(wins, dtype=float)
    t = w.shape[-1]
    n = w + np.swapaxes(w, -1, -2)
    if prior:
        w = w + prior * (n > 0)
        n = w + np.swapaxes(w, -1, -2)
    won = w.sum(-1)
    theta = np.zeros(w.shape[:-1]) if init is None else np.broadcast_to(init, w.shape[:-1]).astype(float)
    # L + J / T: the Hessian (a weighted graph Laplacian, null space = the constant vector) made invertible
    # without moving the step off the sum-zero plane the gradient lies in; the tiny ridge keeps targets that
    # never met (a disconnected graph) solvable, their relative offset staying where it started.
    j = np.full((t, t), 1.0 / t) + 1e-9 * np.eye(t)
    for _ in range(max_iter):
        p = expit(theta[..., :, None] - theta[..., None, :])  # p[i, j] = P(i beats j)
        grad = won - (n * p).sum(-1)
        v = n * p * (1 - p)
        hess = np.eye(t) * v.sum(-1)[..., None, :] - v + j
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        step = np.clip(step, -2.0, 2.0)
        theta = theta + step
        if np.nanmax(np.abs(step), initial=0.0) < tol:
            break
    return theta - theta.mean(-1, keepdims=True)
