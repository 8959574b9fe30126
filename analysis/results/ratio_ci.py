"""A percentile bootstrap CI of a ratio of sums over resampled units: the weighted mean of the safety
summary (units: dialogues, or cards with all their dialogues) and the card-clustered means of the
scores by round. scipy.stats.bootstrap resamples the units; this only states the statistic."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def ratio_ci(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CIs of sum(num[:, j]) / sum(den) over resampled units (rows)."""
    n = len(den)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=int)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.moveaxis(num[idx].sum(axis=-2) / den[idx].sum(axis=-1)[..., None], -1, 0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant statistic: a zero-width interval is the answer
        res = stats.bootstrap((np.arange(n),), statistic, n_resamples=n_boot, confidence_level=confidence,
                              method="percentile", vectorized=True, batch=max(1, min(n_boot, 200_000 // max(n, 1))),
                              rng=np.random.default_rng(seed))
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)
