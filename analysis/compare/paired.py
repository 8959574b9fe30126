"""Paired comparison of two models on the dialogues that share role cards.

Both models talked to the same seeker cards, so the comparison is paired: per card, the
difference of the two models' scores. The p-value comes from a sign-flip permutation test
(what scipy.stats.permutation_test computes with permutation_type="samples": exact when 2^n
sign patterns fit in n_resamples, else n_resamples random ones, same p-value rule) or from a
paired bootstrap; the 95% CI of the mean difference from scipy.stats.bootstrap. Both resample in
batches of about 2M values, so memory and time stay small at thousands of pairs (scipy's
permutation_test took 6.6 s and GBs per dimension at 8,500 pairs). Differences are on the
paper's x25 scale.
"""
from __future__ import annotations

import itertools
import warnings
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.trust.correlation import scores_wide
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE

Method = Literal["permutation", "bootstrap"]


def _per_card(scores: pd.DataFrame, model: str, dimension: str, pair_on: list[str]) -> pd.Series:
    sub = scores[scores["target_model"] == model]
    if sub.empty:
        raise AnalysisInputError(f"no scores for model {model!r}")
    wide = scores_wide(sub, extra=[c for c in pair_on if c != "dialogue_id"])
    if dimension not in wide.columns:
        raise AnalysisInputError(f"no usable {dimension!r} scores for model {model!r}")
    # Several dialogues of one model on one card (e.g. seeds) are averaged into one paired unit.
    return wide.groupby(pair_on)[dimension].mean()


def paired_comparison(
    scores: pd.DataFrame,
    model_a: str,
    model_b: str,
    dimension: str = "average",
    method: Method = "permutation",
    n_resamples: int = 10_000,
    seed: int = 0,
    pair_on: tuple[str, ...] = ("language", "card_id"),
) -> dict:
    """Mean difference A - B (x25) over shared cards, its 95% CI and a two-sided p-value.

    scores: long score rows with card_id (load_scores joins it from the dialogues). dimension: a
    paper dimension name or "average" (the mean of a dialogue's dimensions). Fewer than 2 shared
    cards: no test; the result says so in `note` with NaN numbers.
    """
    if dimension != "average" and dimension not in DIMENSION_NAMES:
        raise ValueError(f"unknown dimension {dimension!r}")
    if method not in ("permutation", "bootstrap"):
        raise ValueError(f"method must be 'permutation' or 'bootstrap', got {method!r}")
    pair_on = list(pair_on)
    missing = set(pair_on) - set(scores.columns)
    if missing or scores[pair_on].isna().all(axis=None):
        raise AnalysisInputError(f"scores lack pairing columns {sorted(missing) or pair_on} (dialogue rows give card_id)")
    a = _per_card(scores, model_a, dimension, pair_on)
    b = _per_card(scores, model_b, dimension, pair_on)
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    out = {"model_a": model_a, "model_b": model_b, "dimension": dimension, "n_pairs": int(len(both)),
           "mean_a": float(both["a"].mean() * TABLE_SCALE) if len(both) else float("nan"),
           "mean_b": float(both["b"].mean() * TABLE_SCALE) if len(both) else float("nan"),
           "diff": float("nan"), "ci_lo": float("nan"), "ci_hi": float("nan"), "p_value": float("nan"),
           "method": method, "note": ""}
    if len(both) < 2:
        out["note"] = f"{len(both)} shared card(s) with scores for both models: no paired test"
        return out
    d = (both["a"] - both["b"]).to_numpy() * TABLE_SCALE
    out["diff"] = float(d.mean())
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identical differences: degenerate CI is the answer
        ci = stats.bootstrap((d,), np.mean, n_resamples=n_resamples, method="percentile", rng=rng,
                             batch=_batch(len(d))).confidence_interval
    out["ci_lo"], out["ci_hi"] = float(ci.low), float(ci.high)
    if np.all(d == 0):
        out["p_value"] = 1.0
    elif method == "permutation":
        # Paired: permuting within each pair = flipping the sign of its difference.
        out["p_value"] = sign_flip_pvalue(d, n_resamples, rng)
    else:
        # Paired bootstrap p-value: resample differences centred on 0 (the null) and count how
        # often a mean at least as extreme as the observed one appears.
        centred = d - d.mean()
        idx = rng.integers(0, len(d), size=(n_resamples, len(d)))
        boot = centred[idx].mean(axis=1)
        out["p_value"] = float((1 + np.sum(np.abs(boot) >= abs(d.mean()))) / (n_resamples + 1))
    return out


def _batch(n: int) -> int:
    """Resamples per batch: about 2M values in memory at a time."""
    return max(1, 2_000_000 // max(1, n))


def sign_flip_pvalue(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of mean(d) = 0 for paired differences d: each difference's sign is flipped
    at random (permuting within a pair). Exact over all 2^n patterns when they fit in n_resamples
    (p = share of patterns at least as extreme), else n_resamples random patterns with
    p = (count + 1) / (n_resamples + 1); two-sided = twice the smaller tail, at most 1 (as
    scipy.stats.permutation_test)."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    observed = d.mean()
    gamma = abs(np.finfo(float).eps * 100 * observed)  # scipy's tolerance for ties of the statistic
    less = greater = 0
    exact = n < 63 and 2 ** n <= n_resamples
    total = 2 ** n if exact else n_resamples
    step = _batch(n)
    for start in range(0, total, step):
        count = min(step, total - start)
        if exact:
            codes = np.arange(start, start + count, dtype=np.int64)[:, None]
            signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)
        else:
            # Random bytes unpacked to bits: 8 draws per byte. sign = 1 - 2 * bit.
            bits = np.unpackbits(rng.integers(0, 256, size=(count, (n + 7) // 8), dtype=np.uint8), axis=1)[:, :n]
            signs = 1.0 - 2.0 * bits
        null = signs @ d / n
        less += int(np.count_nonzero(null <= observed + gamma))
        greater += int(np.count_nonzero(null >= observed - gamma))
    if exact:
        p_less, p_greater = less / total, greater / total
    else:
        p_less, p_greater = (less + 1) / (total + 1), (greater + 1) / (total + 1)
    return float(min(1.0, 2 * min(p_less, p_greater)))


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN)."""
    p = np.asarray(pvalues, dtype=float)
    ok = ~np.isnan(p)
    adj = np.full_like(p, np.nan)
    order = np.argsort(p[ok])
    m = int(ok.sum())
    vals = p[ok][order] * (m - np.arange(m))
    vals = np.minimum(np.maximum.accumulate(vals), 1.0)
    out = np.empty(m)
    out[order] = vals
    adj[ok] = out
    return adj.tolist()


def pairwise_comparisons(scores: pd.DataFrame, dimension: str = "average", method: Method = "permutation",
                         n_resamples: int = 5_000, seed: int = 0) -> pd.DataFrame:
    """paired_comparison for every pair of models within each language, with Holm-adjusted p."""
    rows = []
    for language, g in scores.groupby("language"):
        for a, b in itertools.combinations(sorted(g["target_model"].unique()), 2):
            r = paired_comparison(g, a, b, dimension, method, n_resamples, seed)
            rows.append({"language": language, **r})
    df = pd.DataFrame(rows)
    if not df.empty:
        df["p_holm"] = holm(df["p_value"].tolist())
    return df
