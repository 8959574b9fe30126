"""Where a target's support changes over the rounds: the verdict of scores by round, read from the
curve of a fixed cohort (`round_change_point`; it replaces round 1 against the whole dialogue).

The cohort: the dialogues that reached round C (default: the latest round at least half of the
group's dialogues reached), so every point of the curve averages the same dialogues; a curve over
the survivors of each round would mix a change in the support with a change in who is still there.
The curve: per scored round up to C, the mean of the cohort's values (the seven dimensions x 25).

The change: one step, located by least squares (the weighted CUSUM's argmax: split the curve in
two at round t, and take the t where sqrt(a b / L) |mean after - mean before| is largest; a rounds
before, b from t, L = a + b). Its test (p-value): the largest weighted CUSUM against its null
distribution from a cluster bootstrap over cards of the curve with its round effects removed
(every round's mean moved to the grand mean, each card keeping its dialogues' deviations), the
deviations scaled by sqrt(K / (K - 2)) for K cards (the bootstrap's small-sample shrink, and a little
more for the light tails of a few clusters: with K - 1 the planted false-positive rate at 10 cards was
6.0% over 1,000 seeds, with K - 2 3.9%; 3.8% at 20 cards). The
interval of the round: the percentile interval of the located round over an ordinary cluster
bootstrap of cards. The change (mean from the round on minus the mean before it) is shown without an
interval: one at the located round would be chosen by the same data (a flat curve's largest step is
never near 0), so the p-value, not an interval of the change, says whether there is one.

Verdict: "degrades" (p < 0.05, the change negative) or "improves", from round t [t_lo, t_hi];
"holds" otherwise; "n/a" below MIN_CARDS cards or with one round (the estimate is still shown).
The planted checks (tests/analysis/rounds/test_analysis_round_change_point.py): no change -> a
false-positive rate within its nominal 5%; a failure planted from round 4 -> located at 4 (+-1).
One change point: a curve that falls and recovers is read as its largest step.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from esc_eval.sim.judging.dimensions import REPLY_TAG

ALPHA = 0.05
# Below this many cards no verdict is printed: a bootstrap over fewer clusters under-covers (the
# false-positive rate of the planted check is within its nominal level from here).
MIN_CARDS = 10
KEYS = ["language", "target_model", "judge"]
CHANGE_COLUMNS = [*KEYS, "rule", "n_dialogues", "n_cards", "cohort_round", "rounds", "change_round", "round_low",
                  "round_high", "before", "after", "change", "p_value", "verdict", "note"]


def cohort_round(reached: pd.Series) -> int:
    """The latest round at least half of the dialogues reached (`reached`: each dialogue's last scored round)."""
    need = math.ceil(len(reached) / 2)
    return int(max(r for r in reached.unique() if (reached >= r).sum() >= need))


def cohort(g: pd.DataFrame, at: int | None = None) -> tuple[pd.DataFrame, int]:
    """(the values of the dialogues that reached round `at` (default cohort_round), at rounds <= it; `at`).
    Rounds scored for fewer than half the cohort (another dialogue's last round under --every) are left out."""
    reached = g.groupby("dialogue")["round"].max()
    at = cohort_round(reached) if at is None else int(at)
    members = reached.index[reached >= at]
    c = g[g["dialogue"].isin(members) & (g["round"] <= at)]
    seen = c.groupby("round")["dialogue"].nunique()
    return c[c["round"].isin(seen.index[seen * 2 >= len(members)])], at


def _split_stats(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For curves (..., L): the weighted CUSUM |stat| and the change (after - before) at each split 1..L-1."""
    n = curves.shape[-1]
    j = np.arange(1, n)
    cs = np.cumsum(curves, axis=-1)[..., :-1]
    before, after = cs / j, (curves.sum(axis=-1, keepdims=True) - cs) / (n - j)
    change = after - before
    return np.sqrt(j * (n - j) / n) * np.abs(change), change


def curve_step(sums: np.ndarray, counts: np.ndarray, n_boot: int = 1000, seed: int = 0) -> dict:
    """The step of a curve given per card (rows) and round (columns) as value sums and counts: the
    split index (rounds before it) with its bootstrap interval, before, after, change and p (module doc)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = sums.sum(axis=0) / counts.sum(axis=0)
    stat, change = _split_stats(curve)
    j = int(np.argmax(stat))
    out = {"split": j + 1, "before": float(curve[:j + 1].mean()), "after": float(curve[j + 1:].mean()),
           "change": float(change[j]), "split_low": math.nan, "split_high": math.nan, "p_value": math.nan}
    k = sums.shape[0]
    if n_boot <= 0 or k < 3:
        return out
    rng = np.random.default_rng(seed)
    w = rng.multinomial(k, np.full(k, 1.0 / k), size=n_boot).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (w @ sums) / (w @ counts)
        grand = curve.mean()
        centred = sums - counts * (curve - grand)  # the round effects removed: the null of a flat curve
        null = grand + ((w @ centred) / (w @ counts) - grand) * math.sqrt(k / (k - 2))
    ok, ok0 = ~np.isnan(boot).any(axis=1), ~np.isnan(null).any(axis=1)
    b_stat, _ = _split_stats(boot[ok])
    n_stat, _ = _split_stats(null[ok0])
    at = np.argmax(b_stat, axis=1) + 1
    out.update(p_value=float((1 + (n_stat.max(axis=1) >= stat[j] - 1e-12).sum()) / (1 + ok0.sum())),
               split_low=int(np.quantile(at, 0.025, method="lower")),
               split_high=int(np.quantile(at, 0.975, method="higher")))
    return out


def _card_sums(c: pd.DataFrame, rounds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    pivot = c.pivot_table(index="card_id", columns="round", values="value", aggfunc=["sum", "count"])
    return (pivot["sum"].reindex(columns=rounds).fillna(0.0).to_numpy(float),
            pivot["count"].reindex(columns=rounds).fillna(0.0).to_numpy(float))


def round_change_point(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                       cohort_at: int | None = None) -> pd.DataFrame:
    """The verdict of scores by round per (language, target, judge) (CHANGE_COLUMNS; module doc):
    `values` is analysis/rounds/by_round.py round_values' frame. cohort_at: the cohort's round
    (default: the latest round half the dialogues reached)."""
    rows = []
    for key, g in values.groupby(KEYS, sort=True):
        c, at = cohort(g, cohort_at)
        rounds = sorted(int(r) for r in c["round"].unique())
        n_cards = int(c["card_id"].astype(str).nunique())
        row = {**dict(zip(KEYS, key)), "rule": rule_of(str(key[2])), "n_dialogues": int(c["dialogue"].nunique()),
               "n_cards": n_cards, "cohort_round": at, "rounds": " ".join(map(str, rounds))}
        if len(rounds) < 2:
            rows.append({**row, "verdict": "n/a", "note": "one round in the cohort: no curve to read"})
            continue
        sums, counts = _card_sums(c.assign(card_id=c["card_id"].astype(str)), rounds)
        cp = curve_step(sums, counts, n_boot, seed)
        at_round = lambda i: rounds[int(i)] if i == i else math.nan  # noqa: E731 - split index -> its round
        row.update(change_round=rounds[cp["split"]], round_low=at_round(cp["split_low"]),
                   round_high=at_round(cp["split_high"]),
                   **{k: cp[k] for k in ("before", "after", "change", "p_value")})
        if n_cards < MIN_CARDS:
            verdict, note = "n/a", f"{n_cards} cards: a verdict needs at least {MIN_CARDS} (its planted check)"
        elif math.isnan(cp["p_value"]):
            verdict, note = "n/a", "no bootstrap (n_boot 0)"
        elif cp["p_value"] < ALPHA:
            verdict, note = ("degrades" if cp["change"] < 0 else "improves"), ""
        else:
            verdict, note = "holds", ""
        rows.append({**row, "verdict": verdict, "note": note})
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def rule_of(judge: str) -> str:
    """'reply' for a per-reply judge's rows (its id ends with REPLY_TAG), else 'prefix'."""
    return "reply" if judge.endswith(REPLY_TAG) else "prefix"


def verdict_text(r) -> str:
    """'degrades from round 4 [3, 5]', 'holds', 'n/a'."""
    if r["verdict"] in ("degrades", "improves"):
        return f"{r['verdict']} from round {int(r['change_round'])} {round_interval(r)}".strip()
    return str(r["verdict"])


def round_interval(r) -> str:
    """'[3, 5]': the interval of the round where the curve changes ('' without one)."""
    lo, hi = r.get("round_low"), r.get("round_high")
    return "" if lo is None or hi is None or lo != lo or hi != hi else f"[{int(lo)}, {int(hi)}]"
