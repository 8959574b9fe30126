"""The position-bias audit of a pairwise judge, per judge and dimension (and all dimensions pooled).

Two shares, each with a 95% Wilson interval (scipy.stats.binomtest):

- flip rate: of the pairs with a usable answer in both orders, the share whose verdict flips with
  the order (a when a is shown first, b when b is): 0% = the judge reads the dialogues, 100% = it
  only reads the position;
- first-shown share: of all usable answers that pick a dialogue (ties left out), the share picking
  the one shown first: 50% = no position bias (each pair is asked in both orders, so an unbiased
  judge picks the first shown half the time whatever the targets' strengths).

A cell is flagged when its first-shown share differs from 50% by an exact binomial test at 5%
after Holm's correction over the judge's dimensions (an unbiased judge audited on seven dimensions
would otherwise be flagged on one of them about a third of the time); the pooled row is its own
test. Holm is written out here: it is four lines, and statsmodels is not in the stack.

`verdict` (yes | no | n/a) is what is printed: the flag as its planted-truth check allows it from
this many pairs (analysis/checks/floors.py; `verdict_note` says why when it does not, or that a
"no" had too few pairs to find a 60% first-shown share); `biased` stays the test's own answer.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.pairwise.verdicts import KEY, check_rows, usable
from esc_eval.analysis.results.blocks import pct
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

POOLED = "pooled"  # all dimensions together (the paper's seven include one named "overall")
BIAS_COLUMNS = ["judge", "dimension", "pairs_both", "flips", "flip_rate", "flip_lo", "flip_hi", "answers", "ties",
                "first", "first_share", "first_lo", "first_hi", "p_value", "p_holm", "biased", "verdict", "verdict_note"]
BIAS_HEADERS = ["Judge", "Dimension", "Pairs (both orders)", "Flip rate [95% CI]", "Answers",
                "Ties", "Picks the first shown [95% CI]", "p (50%, Holm)", "Position bias"]
LEVEL = 0.05
CHECK = "position-bias"  # its planted-truth check (analysis/checks), registered at the end of this module


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN, and does not count as a test)."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    order = idx[np.argsort(p[idx])]
    out[order] = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(order) - np.arange(len(order)))))
    return out


def wilson(k: int, n: int) -> tuple[float, float, float]:
    """k / n and its 95% Wilson interval (NaNs when n = 0)."""
    if n == 0:
        return (float("nan"),) * 3
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return k / n, float(ci.low), float(ci.high)


def _picks_first(rows: pd.DataFrame) -> pd.Series:
    # by position: `verdict` as the judge answered; derived from order and preferred where it is missing
    derived = np.where(rows["preferred"].eq("tie"), "tie",
                       np.where((rows["order"] == "ab") == rows["preferred"].eq("a"), "first", "second"))
    verdict = rows["verdict"].where(rows["verdict"].notna(), pd.Series(derived, index=rows.index))
    return verdict.eq("first")


def _shares(judge: str, dimension: str, c: pd.Series) -> dict:
    fr, flo, fhi = wilson(int(c["flips"]), int(c["pairs_both"]))
    share, lo, hi = wilson(int(c["first"]), int(c["picks"]))
    p = float(stats.binomtest(int(c["first"]), int(c["picks"])).pvalue) if c["picks"] else float("nan")
    return {"judge": judge, "dimension": dimension, "pairs_both": int(c["pairs_both"]), "flips": int(c["flips"]),
            "flip_rate": fr, "flip_lo": flo, "flip_hi": fhi, "answers": int(c["answers"]),
            "ties": int(c["answers"] - c["picks"]), "first": int(c["first"]), "first_share": share, "first_lo": lo,
            "first_hi": hi, "p_value": p, "p_holm": p, "biased": False}


def position_bias(rows: pd.DataFrame) -> pd.DataFrame:
    """BIAS_COLUMNS per judge and dimension (the paper's order, then POOLED) from load_pairwise's rows."""
    check_rows(rows)
    ok = rows[usable(rows)].assign(judge=lambda r: r["judge"].fillna("unknown"))
    ok = ok.drop_duplicates(KEY + ["order"], keep="last")
    ok = ok.assign(answers=1, picks=ok["preferred"].ne("tie").astype(int),
                   first=(ok["preferred"].ne("tie") & _picks_first(ok)).astype(int),
                   a=ok["preferred"].eq("a").astype(int), b=ok["preferred"].eq("b").astype(int))
    # a flip: the two orders of a pair name different models (a, then b)
    pairs = ok.groupby(KEY)[["answers", "a", "b"]].sum()
    pairs = pd.DataFrame({"pairs_both": pairs["answers"] == 2,
                          "flips": (pairs["answers"] == 2) & (pairs["a"] == 1) & (pairs["b"] == 1)}).astype(int)
    cells = ok.groupby(["judge", "dimension"])[["answers", "picks", "first"]].sum().join(
        pairs.groupby(["judge", "dimension"]).sum(), how="outer").fillna(0)
    out = []
    judges = rows["judge"].fillna("unknown")
    for judge in sorted(judges.unique()):
        dims = set(rows.loc[judges == judge, "dimension"].unique())
        ordered = [d for d in DIMENSION_NAMES if d in dims] + sorted(dims - set(DIMENSION_NAMES))
        mine = cells.xs(judge, level="judge") if judge in cells.index.get_level_values("judge") else None
        zero = pd.Series(0, index=["answers", "picks", "first", "pairs_both", "flips"])
        per_dim = [_shares(judge, d, mine.loc[d] if mine is not None and d in mine.index else zero) for d in ordered]
        for cell, adjusted in zip(per_dim, holm(np.array([c["p_value"] for c in per_dim]))):
            cell["p_holm"] = float(adjusted)
        out += per_dim
        out.append(_shares(judge, POOLED, mine.sum() if mine is not None else zero))
    table = pd.DataFrame(out, columns=BIAS_COLUMNS)
    table["biased"] = table["p_holm"].lt(LEVEL)  # NaN (no answer that picks a dialogue): not flagged
    pairs = table[table["dimension"] != POOLED].groupby("judge")["pairs_both"].max()  # pooled: a pair's dimensions once
    gated = [gate(CHECK, int(pairs.get(r["judge"], 0) if r["dimension"] == POOLED else r["pairs_both"]),
                  "n/a" if pd.isna(r["p_holm"]) else "yes" if r["biased"] else "no", finds=bool(r["biased"]))
             for _, r in table.iterrows()]
    table["verdict"], table["verdict_note"] = [g[0] for g in gated], [g[1] for g in gated]
    return table


def _pct_ci(x: float, lo: float, hi: float) -> str:
    return "n/a" if pd.isna(x) else f"{pct(x)} [{pct(lo)}, {pct(hi)}]"


def bias_rows(table: pd.DataFrame) -> list[list]:
    return [[r["judge"], r["dimension"], r["pairs_both"], _pct_ci(r["flip_rate"], r["flip_lo"], r["flip_hi"]),
             r["answers"], r["ties"], _pct_ci(r["first_share"], r["first_lo"], r["first_hi"]),
             "n/a" if pd.isna(r["p_holm"]) else f"{r['p_holm']:.3g}",
             r["verdict"] + (f" ({r['verdict_note']})" if r["verdict_note"] else "")] for _, r in table.iterrows()]


def bias_notes(table: pd.DataFrame) -> list[str]:
    """One line per judge whose pooled first-shown share differs from 50%."""
    pooled = table[(table["dimension"] == POOLED) & (table["verdict"] == "yes")]
    return [f"Judge {r['judge']} picks the first-shown dialogue in {pct(r['first_share'])} of its answers "
            f"[{pct(r['first_lo'])}, {pct(r['first_hi'])}] (50% = no bias) and its verdict flips with the order "
            f"in {pct(r['flip_rate'])} of pairs: its single-order verdicts would carry the position."
            for _, r in pooled.iterrows()]


def _planted_check(r):
    """One planted replicate (analysis/checks): the pairwise judge's pooled flag and its first-shown
    share's interval against the share planted."""
    from esc_eval.analysis.checks.registry import Outcome, within
    from esc_eval.analysis.results.loaders import load_pairwise

    table = position_bias(r.once("pairwise", lambda: load_pairwise(r.path("runs"))))
    row = table[(table["judge"] == "P") & (table["dimension"] == POOLED)].iloc[0]
    return Outcome(flag=None if pd.isna(row["p_holm"]) else bool(row["biased"]),
                   covered=within(row["first_lo"], row["first_hi"], r.truth["first_share"]["P"]))


register_check(VerdictCheck(
    CHECK, "Position bias of a pairwise judge", "esc_eval.analysis.pairwise.position_bias.position_bias",
    ("section:pairwise", "command:analysis pairwise-ratings"), "duo", "position", _planted_check,
    flag="the judge is position-biased (pooled first-shown share differs from 50%)",
    interval="the first-shown share, 95% Wilson CI"))
