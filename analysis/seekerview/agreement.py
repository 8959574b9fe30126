"""Does a rater agree with the people who were helped? Spearman's rho of its values against the
people's own ratings, paired by dialogue, with a percentile bootstrap interval over dialogues.

`agrees_with_people` is the verdict (a plain function of two paired arrays, for the registry of
verdicts checked against planted truth: tests/analysis/seekerview): "agrees" when the interval lies
wholly above 0, "disagrees" wholly below, else "no clear agreement" (which is no proof that it does
not agree: with 40 dialogues only a rho of about 0.3 or more is seen). The tables (ratings.py
agreement_rows) make a rater's rows one family: their intervals are simultaneous (Bonferroni).

The bootstrap is vectorised: each resample's Spearman is the Pearson correlation of its own ranks
(ties averaged, scipy.stats.rankdata along the rows), so a thousand resamples of 142 dialogues take
milliseconds; a resample where a side is constant has no correlation and is left out.
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

from esc_eval.analysis.checks.registry import VerdictCheck, register_check

AGREES, DISAGREES, UNCLEAR = "agrees", "disagrees", "no clear agreement"
MIN_PAIRS = 5


def _row_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1.0), np.nan)


def bootstrap_spearman(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """Spearman's rho of n_boot paired resamples (NaN where a resample has a constant side)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return _row_pearson(stats.rankdata(x[idx], axis=1), stats.rankdata(y[idx], axis=1))


def agrees_with_people(rater, people, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """The verdict on one rating (module docstring): n, spearman, p (scipy's), lo, hi, verdict, note.
    rater, people: paired values (NaN pairs dropped)."""
    x, y = np.asarray(rater, dtype=float), np.asarray(people, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    out = {"n": int(len(x)), "spearman": float("nan"), "p": float("nan"), "lo": float("nan"), "hi": float("nan"),
           "verdict": UNCLEAR, "note": ""}
    if len(x) < MIN_PAIRS or len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        out["note"] = f"fewer than {MIN_PAIRS} dialogues, or one side constant: no correlation"
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = stats.spearmanr(x, y)
    out.update(spearman=float(r.statistic), p=float(r.pvalue))
    if n_boot:
        reps = bootstrap_spearman(x, y, n_boot, seed)
        reps = reps[np.isfinite(reps)]
        if len(reps) >= 2:
            a = (1 - confidence) / 2
            lo, hi = np.quantile(reps, [a, 1 - a])
            out.update(lo=float(lo), hi=float(hi))
            out["verdict"] = AGREES if lo > 0 else DISAGREES if hi < 0 else UNCLEAR
    else:
        out["note"] = "no bootstrap (n_boot=0): no interval, no verdict"
    return out


RHO = 0.4  # the planted agreement (Spearman) of the check below


def _planted_check(r):
    """One planted replicate (analysis/checks), on data drawn here, not through the jobs (the scenario
    "drawn"): `size` dialogues, people's own ratings and a rater's values bivariate normal with Spearman
    rho 0 (null) or RHO (planted; continuous values: no Likert ties). A verdict other than "no clear
    agreement" is the flag with nothing planted, "agrees" with RHO; the interval should hold rho."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome, within

    rho = RHO if r.variant == PLANTED else 0.0
    pearson = 2 * np.sin(np.pi * rho / 6)  # the normal's Pearson r whose Spearman is rho
    rng = np.random.default_rng([r.seed, r.size, 11])
    people = rng.normal(size=r.size)
    rater = pearson * people + np.sqrt(1 - pearson ** 2) * rng.normal(size=r.size)
    out = agrees_with_people(rater, people, n_boot=r.n_boot, seed=r.seed)
    covered = within(out["lo"], out["hi"], rho)
    if out["lo"] != out["lo"]:
        return Outcome()
    return Outcome(flag=out["verdict"] == AGREES if r.variant == PLANTED else out["verdict"] != UNCLEAR,
                   covered=covered)


register_check(VerdictCheck(
    "seeker-agreement", "A rater against people's own ratings", "esc_eval.analysis.seekerview.agreement.agrees_with_people",
    ("section:seeker_view", "command:analysis seeker-check"), "drawn", "seeker_agreement", _planted_check,
    flag="agrees / disagrees (Spearman's 95% bootstrap interval excludes 0)",
    interval="Spearman's rho, 95% percentile bootstrap over dialogues",
    unit="rated dialogues; drawn directly, not through the jobs"))
