"""How the pairwise ranking agrees with the pointwise one: Kendall's tau between each target's pooled
Bradley-Terry rating and its pointwise score (the mean of the seven dimensions, 0-4, as in Table 2's
Average), with a bootstrap interval from the same resamples of the cards as the ratings.

The pointwise scores are the pairwise judge's own when the score rows hold that judge, else every
judge's pooled (said in the note). Only the cards that have verdicts count, and a card's value is the
mean over its dialogues (seeds) of each dialogue's mean of the seven dimensions.
"""
from __future__ import annotations


import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.results.rank_stats import kendall_tau
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE

TAU_COLUMNS = ["judge", "pointwise_judge", "models", "cards", "tau", "tau_lo", "tau_hi", "note"]


def pointwise_matrix(scores: pd.DataFrame | None, judge: str, models: list[str],
                     cards: list[str]) -> tuple[np.ndarray, str]:
    """cards x models of each card's mean over its dialogues of the seven-dimension mean (NaN where
    none), and which judge's scores they are."""
    empty = np.full((len(cards), len(models)), np.nan)
    if scores is None or scores.empty or "card_id" not in scores.columns:
        return empty, ""
    s = scores[scores["dimension"].isin(DIMENSION_NAMES) & scores["score"].notna()
               & scores["target_model"].isin(models) & scores["card_id"].astype(str).isin(cards)]
    judges = set(s["judge"].fillna("unknown"))
    if judge in judges:
        s, who = s[s["judge"] == judge], judge
    else:
        who = ", ".join(sorted(judges)) + (" (pooled)" if len(judges) > 1 else "")
    if s.empty:
        return empty, ""
    per_dialogue = s.groupby("dialogue_id").agg(value=("score", "mean"), card_id=("card_id", "first"),
                                                model=("target_model", "first"))
    m = per_dialogue.assign(card_id=per_dialogue["card_id"].astype(str)).groupby(["card_id", "model"])["value"].mean()
    return m.unstack().reindex(index=cards, columns=models).to_numpy(float), who


def weighted_means(matrix: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each model's mean over cards, each card weighted by its count in a resample (counts: draws x
    cards); NaN where a model has no card in the resample."""
    present = ~np.isnan(matrix)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts @ np.nan_to_num(matrix)) / (counts @ present)


def rank_agreement(judge: str, models: list[str], cards: list[str], theta: np.ndarray, boot_theta: np.ndarray,
                   counts: np.ndarray, scores: pd.DataFrame | None, alpha: float = 0.05) -> tuple[dict, pd.DataFrame]:
    """TAU_COLUMNS for one judge, and the per-model pointwise means (x25) beside the pooled ratings.

    theta: the pooled ratings (models); boot_theta: draws x models from the resamples `counts`
    (draws x cards)."""
    matrix, who = pointwise_matrix(scores, judge, models, cards)
    point = np.nanmean(matrix, axis=0) if (~np.isnan(matrix)).any() else np.full(len(models), np.nan)
    have = ~np.isnan(point)
    row = {"judge": judge, "pointwise_judge": who, "models": int(have.sum()), "cards": int((~np.isnan(matrix)).any(1).sum()),
           "tau": float("nan"), "tau_lo": float("nan"), "tau_hi": float("nan"), "note": ""}
    per_model = pd.DataFrame({"judge": judge, "model": models, "pointwise": point * TABLE_SCALE,
                              "pointwise_rank": stats.rankdata(-np.nan_to_num(point, nan=-np.inf), method="average")})
    if have.sum() < 2:
        row["note"] = "no pointwise scores for two or more of these targets on these cards: no tau"
        return row, per_model
    row["tau"] = kendall_tau(theta[have], point[have])
    if len(counts):
        boot_point = weighted_means(matrix[:, have], counts)
        taus = np.array([kendall_tau(t, p) for t, p in zip(boot_theta[:, have], boot_point)])
        taus = taus[~np.isnan(taus)]
        if len(taus):
            row["tau_lo"], row["tau_hi"] = (float(q) for q in np.quantile(taus, [alpha / 2, 1 - alpha / 2]))
    if have.sum() < len(models):
        row["note"] = f"{len(models) - int(have.sum())} target(s) without pointwise scores left out"
    return row, per_model
