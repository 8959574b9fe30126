"""Prediction-powered inference (PPI) of a mean: many judge scores and a few human scores give an
estimate of the mean on the human scale with a valid confidence interval.

Angelopoulos, Bates, Fannjiang, Jordan, Zrnic (2023), "Prediction-powered inference", Science 382;
the power tuning of PPI++ (Angelopoulos, Duchi, Zrnic 2023, arXiv:2311.01453). With n dialogues
scored by humans (Y) and the judge (Yhat) and N scored by the judge only (Yhat_u):

    theta(lam) = mean(Y) + lam * (mean(Yhat_u) - mean(Yhat))
    se(lam)^2  = lam^2 var(Yhat_u) / N + var(Y - lam Yhat) / n
    lam*       = cov(Y, Yhat) / ((1 + n/N) var(Yhat and Yhat_u together)), clipped to [0, 1]

lam = 0 is the human-only mean (the classical interval), lam = 1 plain PPI; the tuned lam makes
the interval at most as wide as the classical one (asymptotically). This is exactly what the
`ppi-python` package computes (`ppi_mean_pointestimate`, `ppi_mean_ci` with lam=None; the tests
hold its numbers), written out because the package pulls numba-compiled code, statsmodels,
scikit-learn and gdown for these lines. Valid when the human-scored dialogues are a random
sample of the cell's dialogues (an `annotate study --sample` is, stratified proportionally).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class MeanEstimate:
    """One mean with its interval: the PPI estimate, or the human-only (classical) one."""

    estimate: float
    lo: float
    hi: float
    lam: float  # the weight of the judge's scores (0 = humans only)
    n: int  # dialogues with a human score (and a judge score)
    N: int  # dialogues with a judge score only
    se: float

    def as_dict(self) -> dict:
        return asdict(self)


def _nan(n: int, N: int) -> MeanEstimate:
    return MeanEstimate(math.nan, math.nan, math.nan, math.nan, n, N, math.nan)


def ppi_lambda(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> float:
    """PPI++'s variance-minimising lam for a mean (ppi-python's _calc_lam_glm, clip=True)."""
    n, N = len(y), len(yhat_u)
    if N == 0 or n < 2:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_u]), ddof=1))
    if not var > 0:
        return 0.0  # constant predictions carry no information about the mean
    return float(np.clip(cov / ((1 + n / N) * var), 0.0, 1.0))


def ppi_mean(y, yhat, yhat_unlabeled, *, lam: float | None = None, confidence: float = 0.95,
             clusters=None, clusters_unlabeled=None) -> MeanEstimate:
    """The prediction-powered mean of y with its two-sided normal interval (lam=None: tuned).

    y, yhat: human and judge scores of the same n dialogues; yhat_unlabeled: judge scores of the
    N dialogues without a human score. Fewer than 2 human scores: NaN (no interval).
    clusters, clusters_unlabeled: each dialogue's card, when a card has several dialogues (seeds,
    strategies): they are not independent, and the variance is then the cluster-robust one
    (`clustered_variance`); with one dialogue per card it equals the plain one."""
    y, yhat, yhat_u = (np.asarray(a, dtype=float).ravel() for a in (y, yhat, yhat_unlabeled))
    if len(y) != len(yhat):
        raise ValueError(f"y and yhat differ in length ({len(y)} vs {len(yhat)})")
    n, N = len(y), len(yhat_u)
    if n < 2:
        return _nan(n, N)
    if N == 0:
        lam = 0.0  # every dialogue has a human score: the judge adds nothing
    elif lam is None:
        lam = ppi_lambda(y, yhat, yhat_u)
    estimate = float(np.mean(y - lam * yhat) + (lam * np.mean(yhat_u) if N else 0.0))
    if clusters is not None:
        var = clustered_variance(y - lam * yhat, lam * yhat_u, clusters,
                                 clusters_unlabeled if clusters_unlabeled is not None else [])
    else:  # ddof 0, as ppi-python's interval
        var = float(np.var(y - lam * yhat)) / n + (lam ** 2 * float(np.var(yhat_u)) / N if N else 0.0)
    se = math.sqrt(var)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return MeanEstimate(estimate, estimate - z * se, estimate + z * se, float(lam), n, N, se)


def clustered_variance(labeled, unlabeled, clusters, clusters_unlabeled) -> float:
    """The variance of mean(labeled) + mean(unlabeled) with dialogues clustered by card: the sum
    over cards of the square of each card's share of both deviations (CR0, the sandwich estimator
    with clusters). A card's labelled and unlabelled dialogues fall in one term, so their
    correlation is counted; with one dialogue per card it equals PPI's var/n + var_u/N (ddof 0).
    Written here: scipy and statsmodels give cluster-robust errors for regressions, not for this
    two-sample estimator."""
    labeled, unlabeled = np.asarray(labeled, dtype=float), np.asarray(unlabeled, dtype=float)
    n, N = len(labeled), len(unlabeled)
    if len(clusters) != n or len(clusters_unlabeled) != N:
        raise ValueError(f"one card per dialogue: {n} + {N} dialogues, {len(clusters)} + {len(clusters_unlabeled)} cards")
    names, inverse = np.unique(np.concatenate([np.asarray(clusters, dtype=str), np.asarray(clusters_unlabeled, dtype=str)]),
                               return_inverse=True)
    share = np.zeros(len(names))
    np.add.at(share, inverse[:n], (labeled - labeled.mean()) / n)
    if N:
        np.add.at(share, inverse[n:], (unlabeled - unlabeled.mean()) / N)
    return float(np.sum(share ** 2))


def classical_mean(y, *, confidence: float = 0.95, clusters=None) -> MeanEstimate:
    """The human-only mean with the same normal interval (PPI with lam = 0)."""
    y = np.asarray(y, dtype=float).ravel()
    return ppi_mean(y, y, np.empty(0), lam=0.0, confidence=confidence, clusters=clusters)


def effective_human_scores(ppi: MeanEstimate, classical: MeanEstimate) -> float:
    """How many human scores alone would give the PPI interval's width: n x (se_classical / se_ppi)^2."""
    if not (ppi.se > 0 and classical.se > 0):
        return math.nan
    return ppi.n * (classical.se / ppi.se) ** 2
