"""Ranks of models by their means and Kendall's tau between two rankings: what every analysis that
compares rankings shares (seekers' rankings, a panel's judges, pairwise against pointwise)."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def ranks(means: np.ndarray) -> np.ndarray:
    """Rank 1 = highest mean along the last axis (ties share the lower rank's average); NaN last."""
    return stats.rankdata(-np.nan_to_num(np.asarray(means, dtype=float), nan=-np.inf), axis=-1, method="average")


def kendall_tau(x, y) -> float:
    """scipy's Kendall tau-b of two rankings; NaN when one is all ties (no order to agree with) or
    there are fewer than two models."""
    if len(x) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(x, y).statistic)
