"""Both orders of a pairwise question combined into one outcome per (judge, dimension, pair).

A judge is asked each pair twice, dialogue_a shown first ("ab") and dialogue_b shown first ("ba").
An answer is usable when it parsed (parse_status ok) and says a, b or tie (`preferred`). The two
answers of a pair give `score_a`, model a's share of the win (each answer: a = 1, tie = 0.5, b = 0;
the pair's score = their mean):

- agree: the same model preferred in both orders: it wins (score 1 or 0);
- flip: a in one order, b in the other: the verdict follows the position, not the dialogues, so it
  counts as a tie (0.5) - every output says so;
- lean: a tie in one order, a model in the other: three quarters of a win to that model (0.75);
- tie: a tie in both orders (0.5);
- dropped: one order missing or unusable: the pair is left out (one order alone would carry the
  judge's position bias) and counted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

KEY = ["judge", "dimension", "pair_id"]
OUTCOME_COLUMNS = ["judge", "dimension", "pair_id", "card_id", "language", "model_a", "model_b", "score_a", "kind"]
KINDS = ["agree", "lean", "tie", "flip", "dropped"]
FLIP_NOTE = ("A verdict that flips with the order (a when a is shown first, b when b is) counts as a tie; a tie in "
             "one order and a model in the other gives that model three quarters of a win; a pair with one order "
             "missing or unusable is dropped (counted).")
_VALUE = {"a": 1.0, "tie": 0.5, "b": 0.0}


def usable(rows: pd.DataFrame) -> pd.Series:
    """Whether each verdict row carries an answer (parsed, preferred a, b or tie)."""
    return rows["parse_status"].eq("ok") & rows["preferred"].isin(list(_VALUE))


def check_rows(rows: pd.DataFrame) -> None:
    """One-line errors for rows the analysis cannot read: none at all, or an order not ab/ba."""
    if rows is None or rows.empty:
        raise AnalysisInputError("no pairwise verdict rows: run `esc-eval pairwise` first")
    bad = sorted(set(rows["order"].dropna().unique()) - {"ab", "ba"})
    if bad or rows["order"].isna().any():
        raise AnalysisInputError(f"pairwise rows: order must be 'ab' or 'ba', found {bad or [None]}")


@dataclass
class Outcomes:
    """One row per (judge, dimension, pair) answered in both orders (OUTCOME_COLUMNS), and the counts
    of each kind per judge and dimension (KINDS; dropped pairs are in the counts only)."""

    table: pd.DataFrame
    counts: pd.DataFrame


def combine_orders(rows: pd.DataFrame) -> Outcomes:
    """The module docstring's rules, vectorised over the rows (load_pairwise's frame)."""
    check_rows(rows)
    r = rows.assign(value=rows["preferred"].map(_VALUE).where(usable(rows)))
    r["judge"] = r["judge"].fillna("unknown")
    # one value per order (load_pairwise already keeps the latest row per pair, dimension, order and judge)
    r = r.drop_duplicates(KEY + ["order"], keep="last")
    wide = r.drop_duplicates(KEY).set_index(KEY)[["card_id", "language", "model_a", "model_b"]]
    for order in ("ab", "ba"):
        wide = wide.join(r[r["order"] == order].set_index(KEY)["value"].rename(order))
    ab, ba = wide["ab"].to_numpy(float), wide["ba"].to_numpy(float)
    both = ~np.isnan(ab) & ~np.isnan(ba)
    kind = np.select([~both, (ab == ba) & (ab == 0.5), ab == ba, np.abs(ab - ba) == 1.0],
                     ["dropped", "tie", "agree", "flip"], "lean")
    wide["kind"] = kind
    wide["score_a"] = (ab + ba) / 2  # flip: (1 + 0) / 2 = a tie
    table = wide[both].reset_index()[OUTCOME_COLUMNS]
    table["card_id"] = table["card_id"].astype(str)
    counts = (wide.reset_index().groupby(["judge", "dimension"])["kind"].value_counts().unstack(fill_value=0)
              .reindex(columns=KINDS, fill_value=0).reset_index())
    counts.columns.name = None
    rank = {d: i for i, d in enumerate(DIMENSION_NAMES)}  # the paper's order, others after
    counts = counts.sort_values(["judge", "dimension"], key=lambda c: c.map(rank).fillna(len(rank))
                                if c.name == "dimension" else c).reset_index(drop=True)
    counts["pairs"] = counts[KINDS].sum(axis=1)
    return Outcomes(table.reset_index(drop=True), counts)


def count_rows(counts: pd.DataFrame) -> list[list]:
    """The counts as table rows: judge, dimension, pairs, then each kind (and its share)."""
    out = []
    for _, c in counts.iterrows():
        n = max(int(c["pairs"]), 1)
        out.append([c["judge"], c["dimension"], int(c["pairs"])]
                   + [f"{int(c[k])} ({100 * c[k] / n:.0f}%)" for k in KINDS])
    return out


COUNT_HEADERS = ["Judge", "Dimension", "Pairs", "Agree", "Lean", "Tie", "Flip (= tie)", "Dropped"]
