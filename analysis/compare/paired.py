"""Paired comparison of two models on the dialogues that share role cards.

Both models talked to the same seeker cards, so the comparison is paired: per card, the
difference of the two models' scores. The p-value comes from a sign-flip permutation test
(scipy.stats.permutation_test, permutation_type="samples": exact when the 2^n sign patterns fit
in n_resamples, else n_resamples random ones) or from the paired bootstrap; the 95% CI of the
mean difference from scipy.stats.bootstrap. Both resample in batches of about 2M values, so
memory stays bounded at thousands of pairs (unbatched, permutation_test held GBs at 8,500 pairs).
Differences are on the paper's x25 scale. From fewer cards than its planted-truth check shows the
test needs, the p-value and the interval are withheld (NaN) and `note` says so; a difference not
found from too few cards to find a quarter point says that (analysis/checks/floors.py).
"""
from __future__ import annotations

import itertools
import warnings
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import NOT_SHOWN, gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.trust.correlation import scores_wide
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE

Method = Literal["permutation", "bootstrap"]
CHECK = "paired-comparison"  # its planted-truth check (analysis/checks), registered at the end of this module


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
        boot = stats.bootstrap((d,), np.mean, n_resamples=n_resamples, method="percentile", rng=rng,
                               batch=_batch(len(d)))
    out["ci_lo"], out["ci_hi"] = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    if np.all(d == 0):
        out["p_value"] = 1.0
    elif method == "permutation":
        # Paired: permuting within each pair = flipping the sign of its difference.
        out["p_value"] = sign_flip_pvalue(d, n_resamples, rng)
    else:
        # Paired bootstrap p-value: the CI's bootstrap means centred on 0 (the null: resampling d - mean(d)),
        # counting how often a mean at least as extreme as the observed one appears.
        null = boot.bootstrap_distribution - d.mean()
        out["p_value"] = float((1 + np.sum(np.abs(null) >= abs(d.mean()))) / (n_resamples + 1))
    shown, note = gate(CHECK, len(d), "tested", finds=out["p_value"] < 0.05)
    if shown == NOT_SHOWN:
        out.update(p_value=float("nan"), ci_lo=float("nan"), ci_hi=float("nan"))
    out["note"] = note
    return out


def _batch(n: int) -> int:
    """Resamples per batch: about 2M values in memory at a time."""
    return max(1, 2_000_000 // max(1, n))


def sign_flip_pvalue(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> float:
    """Two-sided p-value of mean(d) = 0 for paired differences d: scipy.stats.permutation_test with
    permutation_type="samples" on the one sample d flips each difference's sign; exact over all 2^n
    patterns when they fit in n_resamples, else n_resamples random patterns, p = (count + 1) /
    (n_resamples + 1); two-sided = twice the smaller tail, at most 1."""
    d = np.asarray(d, dtype=float)
    # A zero difference flips to itself and adds nothing to any resample's sum: dropping it leaves
    # the p-value as it is and shortens scipy's loop over the observations.
    d = d[d != 0]
    if len(d) < 2:  # nothing differs, or one difference: of its two signs, the observed one is a tail of 1/2
        return 1.0
    return float(stats.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True,
                                        n_resamples=n_resamples, batch=_batch(len(d)), rng=rng).pvalue)


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


def compare_models_of_runs(run_dirs: list, model_a: str, model_b: str, dimension: str = "average",
                           method: Method = "permutation", n_resamples: int = 10000, seed: int = 0,
                           windowed: str = "include") -> dict:
    """`analysis compare-models`: paired_comparison of the runs' scores, with what the judge did not read
    (`windowed`: include | exclude | only the judgments made on a window; their count and its line)."""
    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.judgments.windowed import windowed_line

    scores = load_scores(run_dirs, windowed=windowed)
    return {**paired_comparison(scores, model_a, model_b, dimension, method, n_resamples, seed),
            "windowed": scores.attrs["windowed"], "windowed_line": windowed_line(scores)}


def _planted_check(r):
    """One planted replicate (analysis/checks): the paired test of the duo's judge J2, A against B."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome, within
    from esc_eval.analysis.results.loaders import load_scores

    s = r.once("scores", lambda: load_scores(r.path("runs")))
    out = paired_comparison(s[s["judge"] == "J2"], "A", "B", n_resamples=max(2000, r.n_boot), seed=r.seed)
    truth = r.truth["judge_mean"]["J2"]
    if np.isnan(out["p_value"]):
        return Outcome()
    found = out["p_value"] < 0.05
    return Outcome(flag=found and out["diff"] > 0 if r.variant == PLANTED else found,
                   covered=within(out["ci_lo"], out["ci_hi"], TABLE_SCALE * (truth["A"] - truth["B"])))


register_check(VerdictCheck(
    CHECK, "Paired comparison of two targets", "esc_eval.analysis.compare.paired.paired_comparison",
    ("section:comparisons", "command:analysis compare-models", "command:compare"), "duo", "quality_gap", _planted_check,
    flag="the two targets differ (sign-flip permutation test, p < 0.05)",
    interval="the mean paired difference x25, 95% bootstrap CI"))
