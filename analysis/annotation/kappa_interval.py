"""Quadratic-weighted kappa with a percentile bootstrap interval, resampling the rated items (dialogues).

The point estimate is agreement.py's `quadratic_weighted_kappa`. The bootstrap is vectorised: kappa is a
function of the 5 x 5 table of rating pairs, and a resample's table is its draw counts times each item's
one-hot pair, one matrix product for all draws (a Python loop of the function would take seconds per
dimension at 1,000 draws on 8,500 dialogues). The interval's coverage is checked against a planted
joint distribution of known kappa (tests/analysis/annotation/test_analysis_kappa_interval.py).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from esc_eval.analysis.annotation.agreement import quadratic_weighted_kappa


def kappa_of_tables(tables: np.ndarray) -> np.ndarray:
    """Quadratic-weighted kappa of joint count tables [..., k, k] (NaN where the expected disagreement is 0)."""
    k = tables.shape[-1]
    total = tables.sum(axis=(-2, -1), keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = tables / total
    expected = observed.sum(axis=-1)[..., :, None] * observed.sum(axis=-2)[..., None, :]
    i, j = np.indices((k, k))
    w = (i - j) ** 2
    denom = (w * expected).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1.0 - (w * observed).sum(axis=(-2, -1)) / denom
    return np.where(denom > 0, out, np.nan)


def kappa_with_interval(a: Iterable[int], b: Iterable[int], n_boot: int = 1000, seed: int = 0,
                        confidence: float = 0.95, categories: int = 5) -> dict[str, float | int | None]:
    """{"n", "kappa", "lo", "hi", "undefined_draws"}: the kappa of the paired ratings and its percentile
    bootstrap interval over items (None when n < 2 or kappa is undefined: both raters gave one and the same
    constant score)."""
    a, b = np.asarray(list(a), dtype=int), np.asarray(list(b), dtype=int)
    n = int(a.size)
    if n == 0:
        return {"n": 0, "kappa": None, "lo": None, "hi": None, "undefined_draws": 0}
    kappa = quadratic_weighted_kappa(a, b, categories)
    if n < 2 or n_boot < 1 or kappa != kappa:
        return {"n": n, "kappa": None if kappa != kappa else kappa, "lo": None, "hi": None, "undefined_draws": 0}
    codes = np.zeros((n, categories * categories))
    codes[np.arange(n), a * categories + b] = 1.0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_boot, n))
    weights = np.zeros((n_boot, n))
    np.add.at(weights, (np.repeat(np.arange(n_boot), n), draws.ravel()), 1.0)
    boot = kappa_of_tables((weights @ codes).reshape(n_boot, categories, categories))
    ok = boot[~np.isnan(boot)]
    tail = (1 - confidence) / 2
    lo, hi = (float(np.quantile(ok, tail)), float(np.quantile(ok, 1 - tail))) if ok.size else (None, None)
    return {"n": n, "kappa": kappa, "lo": lo, "hi": hi, "undefined_draws": int(n_boot - ok.size)}
