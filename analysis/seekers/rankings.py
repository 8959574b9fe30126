"""Rankings of the models under different seekers, and how sure they are: the bootstrap over cards
that cooperative vs worst-case seekers (seeker_kinds.py), a seeker setting vs its baseline
(seeker_levels.py) and one role model vs another (simulators.py) share; rank_change is the
two-arm comparison of the first two.

A dialogue's value is the mean of its seven dimensions (or its safety score), 0-4. An arm (a kind
of seeker, a role model) is a cards x models matrix of each card's mean over its dialogues; every
arm holds the same cards, so one resample of the cards serves every arm and the rankings compared
are on the same seekers. Rank 1 = the highest mean; ties share their average rank.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.rank_stats import kendall_tau, ranks
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, SAFETY

VALUE_COLUMNS = ["judge", "dialogue_id", "language", "target_model", "role_model", "strategy", "card_id", "value"]


def dialogue_scores(scores: pd.DataFrame, dialogues: pd.DataFrame, dimension: str = "average") -> pd.DataFrame:
    """One row per (judge, dialogue): VALUE_COLUMNS, value = the mean of the dialogue's seven
    dimensions ("average") or its safety score, 0-4. Dialogues without a row (or a strategy) are left out."""
    if dimension not in ("average", SAFETY):
        raise AnalysisInputError(f"dimension {dimension!r}: expected 'average' (of the seven) or 'safety'")
    dims = DIMENSION_NAMES if dimension == "average" else [SAFETY]
    s = scores[scores["dimension"].isin(dims) & scores["score"].notna()] if not scores.empty else scores
    if s.empty or dialogues.empty or "strategy" not in dialogues.columns:
        return pd.DataFrame(columns=VALUE_COLUMNS)
    v = s.groupby(["judge", "dialogue_id"], sort=False).agg(value=("score", "mean"), language=("language", "first"),
                                                            target_model=("target_model", "first")).reset_index()
    meta = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")
    v["strategy"] = v["dialogue_id"].map(meta["strategy"])
    v["role_model"] = v["dialogue_id"].map(meta["role_model"]) if "role_model" in meta.columns else None
    v["card_id"] = v["dialogue_id"].map(meta["card_id"]).astype(str)
    return v.dropna(subset=["strategy"])[VALUE_COLUMNS].reset_index(drop=True)


def interval(draws, alpha: float) -> tuple[float, float]:
    """Percentile interval of bootstrap draws (NaN draws ignored); NaNs when there are none."""
    x = np.asarray(draws, dtype=float)
    x = x[~np.isnan(x)]
    return (float(np.quantile(x, alpha)), float(np.quantile(x, 1 - alpha))) if len(x) else (float("nan"),) * 2


def card_matrix(g: pd.DataFrame, models: list[str], cards: list[str]) -> np.ndarray:
    """cards x models: each card's mean value over its dialogues (seeds) in g."""
    m = g.groupby(["card_id", "target_model"])["value"].mean().unstack()
    return m.reindex(index=cards, columns=models).to_numpy(float)


@dataclass
class RankingBootstrap:
    """Point estimates and bootstrap draws of each arm's model means and ranks, and of the pooled
    (mean over arms) means and ranks; the draws share one resample of the cards per draw."""

    means: np.ndarray  # arms x models
    ranks: np.ndarray  # arms x models
    pooled: np.ndarray  # models
    pooled_ranks: np.ndarray  # models
    boot_means: np.ndarray  # draws x arms x models (no draws: 0 x arms x models)
    boot_ranks: np.ndarray
    boot_pooled: np.ndarray  # draws x models
    boot_pooled_ranks: np.ndarray

    def tau(self, a: int, b: int) -> tuple[float, np.ndarray]:
        """Kendall's tau between arm a's ranking and arm b's, and its bootstrap draws."""
        draws = np.array([kendall_tau(x, y) for x, y in zip(self.boot_ranks[:, a], self.boot_ranks[:, b])])
        return kendall_tau(self.ranks[a], self.ranks[b]), draws


def bootstrap_rankings(arms: list[np.ndarray], n_boot: int = 1000, seed: int = 0) -> RankingBootstrap:
    """arms: cards x models matrices over the same cards and models (no NaN). The draws resample
    the cards with replacement, the same cards for every arm."""
    stack = np.stack(arms)  # arms x cards x models
    n_arms, n_cards, n_models = stack.shape
    means = stack.mean(axis=1)
    pooled = means.mean(axis=0)
    if n_boot:
        idx = np.random.default_rng(seed).integers(0, n_cards, size=(n_boot, n_cards))
        boot = np.stack([a[idx].mean(axis=1) for a in stack], axis=1)  # draws x arms x models
    else:
        boot = np.zeros((0, n_arms, n_models))
    boot_pooled = boot.mean(axis=1)
    return RankingBootstrap(means, ranks(means), pooled, ranks(pooled), boot, ranks(boot), boot_pooled,
                            ranks(boot_pooled))


def rank_change(first: np.ndarray, second: np.ndarray, models: list[str], names: tuple[str, str], n_boot: int = 1000,
                seed: int = 0, confidence: float = 0.95) -> list[dict[str, float]]:
    """Per model, in order: its rank under two arms (cards x models matrices on the same cards) with
    percentile intervals, the change (second - first; positive = falls) and Kendall's tau between the
    two rankings, from one bootstrap of the cards. Keys: rank_<name>, rank_<name>_lo/_hi for each of
    `names`, rank_change(_lo/_hi), kendall_tau(_lo/_hi)."""
    alpha = (1 - confidence) / 2
    boot = bootstrap_rankings([first, second], n_boot=n_boot, seed=seed)  # the same cards resampled in both arms
    (r_a, r_b), (ba, bb) = boot.ranks, (boot.boot_ranks[:, 0], boot.boot_ranks[:, 1])
    tau, taus = boot.tau(0, 1)
    t_lo, t_hi = interval(taus, alpha)
    a, b = names
    rows = []
    for i, _ in enumerate(models):
        a_lo, a_hi = interval(ba[:, i], alpha)
        b_lo, b_hi = interval(bb[:, i], alpha)
        d_lo, d_hi = interval(bb[:, i] - ba[:, i], alpha)
        rows.append({f"rank_{a}": float(r_a[i]), f"rank_{a}_lo": a_lo, f"rank_{a}_hi": a_hi,
                     f"rank_{b}": float(r_b[i]), f"rank_{b}_lo": b_lo, f"rank_{b}_hi": b_hi,
                     "rank_change": float(r_b[i] - r_a[i]), "rank_change_lo": d_lo, "rank_change_hi": d_hi,
                     "kendall_tau": float(tau), "kendall_tau_lo": t_lo, "kendall_tau_hi": t_hi})
    return rows
