"""Bradley-Terry ratings of the targets from combined pairwise outcomes (verdicts.py), per judge and
dimension and with every dimension's outcomes pooled, on an Elo scale with bootstrap intervals over cards.

A card's outcomes are summed into one win matrix per card once; a resample of the cards is then a
multinomial count per card, its win matrix a weighted sum, and every resample is fitted at once
(bt_fit.py). One resample of the cards serves every dimension, the pooled ratings and the tau with the
pointwise ranking (rank_agreement.py). Ties (and flips, which count as ties) are half a win each way.
Intervals: 95% percentile intervals of the resamples; rank 1 = the highest rating. A judge's
intervals from fewer cards than their planted-truth check shows they need are withheld (NaN) with a
note saying so (analysis/checks/floors.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import NOT_SHOWN, gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.pairwise.bt_fit import fit_bt, to_elo, win_tensor
from esc_eval.analysis.pairwise.position_bias import POOLED
from esc_eval.analysis.pairwise.rank_agreement import TAU_COLUMNS, rank_agreement
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

RATING_COLUMNS = ["judge", "dimension", "model", "theta", "elo", "elo_lo", "elo_hi", "rank", "rank_lo", "rank_hi",
                  "comparisons", "win_share"]
PRIOR = 0.5  # pseudo-wins each way per pair that met: a target that won every comparison stays finite
CHECK = "bt-order"  # its planted-truth check (analysis/checks), registered at the end of this module


@dataclass
class PairwiseRatings:
    """ratings: RATING_COLUMNS (dimension = a paper dimension or POOLED); tau: TAU_COLUMNS per judge;
    pointwise: per judge and model, the pointwise mean (x25) and rank beside the pooled rating."""

    ratings: pd.DataFrame
    tau: pd.DataFrame
    pointwise: pd.DataFrame
    n_boot: int
    notes: list[str] = field(default_factory=list)


def _ranks(theta: np.ndarray) -> np.ndarray:
    return stats.rankdata(-theta, axis=-1, method="average")


def _interval(draws: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    if not len(draws):
        nan = np.full(draws.shape[1:], np.nan)
        return nan, nan
    return np.quantile(draws, alpha / 2, axis=0), np.quantile(draws, 1 - alpha / 2, axis=0)


def _dimension_rows(judge: str, dim: str, models: list[str], wins: np.ndarray, counts: np.ndarray,
                    prior: float, alpha: float) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """Rows of one dimension (wins: cards x T x T), the point thetas and the resamples' thetas."""
    total = wins.sum(0)
    theta = fit_bt(total, prior)
    c, t = wins.shape[0], len(models)
    boot = (fit_bt((counts @ wins.reshape(c, t * t)).reshape(-1, t, t), prior, init=theta) if len(counts)
            else np.empty((0, t)))
    elo_lo, elo_hi = _interval(to_elo(boot), alpha)
    rank_lo, rank_hi = _interval(_ranks(boot), alpha)
    rank, elo = _ranks(theta), to_elo(theta)
    n = total + total.T
    rows = [{"judge": judge, "dimension": dim, "model": m, "theta": float(theta[i]), "elo": float(elo[i]),
             "elo_lo": float(elo_lo[i]), "elo_hi": float(elo_hi[i]), "rank": float(rank[i]),
             "rank_lo": float(rank_lo[i]), "rank_hi": float(rank_hi[i]), "comparisons": float(n[i].sum()),
             "win_share": float(total[i].sum() / n[i].sum()) if n[i].sum() else float("nan")}
            for i, m in enumerate(models)]
    return rows, theta, boot


def bt_ratings(outcomes: pd.DataFrame, scores: pd.DataFrame | None = None, n_boot: int = 1000, seed: int = 0,
               prior: float = PRIOR, alpha: float = 0.05) -> PairwiseRatings:
    """Ratings per judge (see the module docstring) from verdicts.combine_orders(...).table; scores:
    load_scores' rows for the tau with the pointwise ranking (None: no tau)."""
    if outcomes.empty:
        raise AnalysisInputError("no pair was answered usably in both orders: no ratings")
    rows: list[dict] = []
    taus: list[dict] = []
    pointwise: list[pd.DataFrame] = []
    notes: list[str] = []
    for judge, g in outcomes.groupby("judge", sort=True):
        models = sorted(set(g["model_a"].unique()) | set(g["model_b"].unique()))
        if len(models) < 2:
            notes.append(f"Judge {judge}: fewer than 2 targets compared, no ratings.")
            continue
        cards = sorted(g["card_id"].astype(str).unique())
        rng = np.random.default_rng(seed)
        counts = (rng.multinomial(len(cards), np.full(len(cards), 1 / len(cards)), size=n_boot).astype(float)
                  if n_boot > 0 else np.empty((0, len(cards))))
        present = set(g["dimension"].unique())
        dims = [d for d in DIMENSION_NAMES if d in present] + sorted(present - set(DIMENSION_NAMES))
        pooled = np.zeros((len(cards), len(models), len(models)))
        for d in dims:
            wins = win_tensor(g[g["dimension"] == d], models, cards)
            pooled += wins
            rows += _dimension_rows(judge, d, models, wins, counts, prior, alpha)[0]
        pooled_rows, theta, boot = _dimension_rows(judge, POOLED, models, pooled, counts, prior, alpha)
        rows += pooled_rows
        shown, note = gate(CHECK, len(cards), "intervals", finds=True)
        if note:
            notes.append(f"Judge {judge}: {note}.")
        if shown == NOT_SHOWN:
            for r in rows:
                if r["judge"] == judge:
                    r.update(elo_lo=float("nan"), elo_hi=float("nan"), rank_lo=float("nan"), rank_hi=float("nan"))
        if scores is not None:
            tau, per_model = rank_agreement(judge, models, cards, theta, boot, counts, scores, alpha)
            taus.append(tau)
            pointwise.append(per_model.assign(elo=to_elo(theta), rank=_ranks(theta)))
    if not rows:
        raise AnalysisInputError("fewer than 2 targets were compared: no ratings")
    return PairwiseRatings(pd.DataFrame(rows, columns=RATING_COLUMNS), pd.DataFrame(taus, columns=TAU_COLUMNS),
                           pd.concat(pointwise, ignore_index=True) if pointwise else pd.DataFrame(),
                           n_boot, notes)


def rating_rows(ratings: pd.DataFrame) -> list[list]:
    """Table rows: judge, dimension, model, Elo [95% CI], rank [95% CI], comparisons, win share."""
    def ci(x, lo, hi, fmt):
        return fmt.format(x) + ("" if pd.isna(lo) else " [" + fmt.format(lo) + ", " + fmt.format(hi) + "]")

    return [[r["judge"], r["dimension"], r["model"], ci(r["elo"], r["elo_lo"], r["elo_hi"], "{:.0f}"),
             ci(r["rank"], r["rank_lo"], r["rank_hi"], "{:g}"), f"{r['comparisons']:g}",
             f"{100 * r['win_share']:.1f}%"] for _, r in ratings.sort_values(
                 ["judge", "dimension", "rank"], key=lambda s: s.map(_dim_order) if s.name == "dimension" else s).iterrows()]


def _dim_order(d: str) -> int:
    return -1 if d == POOLED else (DIMENSION_NAMES.index(d) if d in DIMENSION_NAMES else len(DIMENSION_NAMES))


RATING_HEADERS = ["Judge", "Dimension", "Target", "Elo [95% CI]", "Rank [95% CI]", "Comparisons", "Win share"]


def _planted_check(r):
    """One planted replicate (analysis/checks): the pooled Bradley-Terry ranks of the two targets
    against the order of their planted quality."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome, true_ranks
    from esc_eval.analysis.pairwise.verdicts import combine_orders
    from esc_eval.analysis.results.loaders import load_pairwise

    outcomes = combine_orders(r.once("pairwise", lambda: load_pairwise(r.path("runs")))).table
    ratings = bt_ratings(outcomes[outcomes["judge"] == "P"], n_boot=r.n_boot, seed=r.seed).ratings
    pooled = ratings[ratings["dimension"] == POOLED].set_index("model")
    truth = true_ranks(r.truth["quality"])
    covered = all(pooled.loc[m, "rank_lo"] <= truth[m] <= pooled.loc[m, "rank_hi"] for m in truth)
    a_first = bool(pooled.loc["A", "rank_hi"] < pooled.loc["B", "rank_lo"])
    apart = a_first or bool(pooled.loc["B", "rank_hi"] < pooled.loc["A", "rank_lo"])
    return Outcome(flag=a_first if r.variant == PLANTED else apart, covered=covered)


register_check(VerdictCheck(
    CHECK, "Bradley-Terry order of the targets", "esc_eval.analysis.pairwise.bradley_terry.bt_ratings",
    ("section:pairwise", "command:analysis pairwise-ratings"), "duo", "quality_gap", _planted_check,
    flag="one target ranked above the other (rank intervals apart)", interval="each target's rank, 95% bootstrap CI"))
