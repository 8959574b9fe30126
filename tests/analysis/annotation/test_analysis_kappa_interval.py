"""Kappa with a bootstrap interval (analysis/annotation/kappa_interval.py): the point estimate is the one
function's, the vectorised tables give each resample's kappa, and the interval covers a planted kappa
about as often as it says (a joint distribution of two raters with known quadratic-weighted kappa)."""
from __future__ import annotations

import numpy as np
import pytest

from esc_eval.analysis.annotation.agreement import quadratic_weighted_kappa
from esc_eval.analysis.annotation.kappa_interval import kappa_of_tables, kappa_with_interval


def _planted(strength: float) -> np.ndarray:
    """A 5 x 5 joint distribution: rater B copies A with probability `strength`, else rates at random."""
    marg = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    return strength * np.diag(marg) + (1 - strength) * np.outer(marg, marg)


def test_the_tables_give_the_functions_kappa():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 5, 40), rng.integers(0, 5, 40)
    table = np.zeros((5, 5))
    np.add.at(table, (a, b), 1)
    assert kappa_of_tables(table) == pytest.approx(quadratic_weighted_kappa(a, b))
    got = kappa_with_interval(a, b, n_boot=200)
    assert got["kappa"] == pytest.approx(quadratic_weighted_kappa(a, b)) and got["lo"] <= got["kappa"] <= got["hi"]
    same = kappa_with_interval([2, 2, 2], [2, 2, 2])
    assert same["kappa"] is None and same["lo"] is None  # one constant score from both: undefined, never 1 or 0


def test_the_interval_covers_a_planted_kappa_about_95_percent_of_the_time():
    joint = _planted(0.6)
    truth = float(kappa_of_tables(joint))
    rng = np.random.default_rng(7)
    cells = joint.ravel() / joint.sum()
    covered, reps, n = 0, 300, 80
    for r in range(reps):
        codes = rng.choice(25, size=n, p=cells)
        got = kappa_with_interval(codes // 5, codes % 5, n_boot=400, seed=r)
        covered += got["lo"] <= truth <= got["hi"]
    assert 0.88 <= covered / reps <= 0.99, covered / reps
    # and with no agreement planted (B at random), an interval holds 0 about as often
    null = _planted(0.0)
    zero_covered = 0
    for r in range(100):
        codes = rng.choice(25, size=n, p=null.ravel() / null.sum())
        got = kappa_with_interval(codes // 5, codes % 5, n_boot=400, seed=1000 + r)
        zero_covered += got["lo"] <= 0.0 <= got["hi"]
    assert zero_covered >= 85
