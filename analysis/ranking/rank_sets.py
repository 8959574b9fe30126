"""Rank-sets: each model's set of plausible ranks with a simultaneous coverage guarantee, from
judge scores anchored on a few human scores (PPI) or, without them, from the judge alone.

The construction is that of Prediction-Powered Ranking (Chatzi et al., NeurIPS 2024): given
intervals [lo_k, hi_k] that hold all K targets' means at once with probability >= 1 - alpha,
target i's rank-set is

    [1 + #{j: lo_j > hi_i},  K - #{j: hi_j < lo_i}]     (rank 1 = the highest mean)

and then every target's true rank lies in its set, all at once, with probability >= 1 - alpha.

Simultaneous intervals: Bonferroni, each target's interval at level 1 - alpha/K. Chosen over a
max-statistic bootstrap because the targets' estimates share cards (the same seekers meet every
model), so they are dependent in a way the bootstrap would have to model; Bonferroni holds under
any dependence, needs only each target's own interval (ppi.py's, already checked against
ppi-python) and costs nothing. Its price, a little width, is small at the K of a leaderboard.

A target's interval: with human scores, the PPI++ mean of the human score (analysis.trust.ppi);
without them, the normal interval of the judge's own mean (judge-only: it says where the judge
would rank the models with more dialogues, nothing about people). Per dialogue the unit is the
mean of its scored dimensions (Average) or one dimension's score; numbers are x25 like Table 2.
The guarantee is asymptotic (normal intervals) and assumes each target's human-scored dialogues
are a random sample of its dialogues. Where a card has several dialogues of one target (seeds,
strategies), they are not independent: the variance is then clustered by card, as the leaderboard
resamples cards.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import caveat
from esc_eval.analysis.checks.registry import (DUO_JUDGE, PLANTED, Outcome, PlantedRuns, VerdictCheck, register_check,
                                               true_ranks)
from esc_eval.analysis.results.leaderboard import (SMALL_N, VALUE_COLUMNS, card_of, dialogue_matrix, format_cell,
                                                   planted_scores)
from esc_eval.analysis.results.outputs import markdown_table
from esc_eval.analysis.trust.human_scores import HumanScores
from esc_eval.analysis.trust.ppi import MeanEstimate, classical_mean, ppi_mean
from esc_eval.sim.judging.dimensions import TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder

JUDGE_ONLY, HUMAN_ANCHORED = "judge-only", "human-anchored"
CHECK = "rank-sets"  # its planted-truth check (registered at the end of this module)
COLUMNS = ["language", "judge", "model", "column", "anchor", "estimate", "lo", "hi", "confidence", "n_dialogues",
           "n_human", "rank", "rank_lo", "rank_hi", "note"]
RANK_KEYS = ["language", "judge", "model"]


def rank_set_bounds(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """Each target's rank-set [rank_lo, rank_hi] from simultaneous intervals along the last axis
    (rank 1 = highest). A NaN bound is unbounded: that target's set spans what the others allow."""
    lo = np.where(np.isnan(lo), -np.inf, np.asarray(lo, dtype=float))
    hi = np.where(np.isnan(hi), np.inf, np.asarray(hi, dtype=float))
    k = lo.shape[-1]
    above = (lo[..., None, :] > hi[..., :, None]).sum(axis=-1)  # [i]: targets surely above i
    below = (hi[..., None, :] < lo[..., :, None]).sum(axis=-1)  # [i]: targets surely below i
    return 1 + above, k - below


def point_ranks(estimates) -> np.ndarray:
    """Rank 1 = the highest estimate (ties share the lower rank's average); NaN stays NaN."""
    e = np.asarray(estimates, dtype=float)
    r = stats.rankdata(-np.nan_to_num(e, nan=-np.inf), method="average").astype(float)
    r[np.isnan(e)] = np.nan
    return r


def simultaneous_means(judge: list[np.ndarray], human: list[np.ndarray] | None = None,
                       confidence: float = 0.95, cards: list[np.ndarray | None] | None = None) -> list[MeanEstimate]:
    """One mean per target whose intervals hold together with probability >= confidence (Bonferroni).

    judge[k], human[k]: target k's per-dialogue judge and human values, aligned, NaN where a
    dialogue has none. human None: the judge's own mean (judge-only). With human: PPI++ on the
    dialogues with both, the judge-only ones as its unlabelled set (fewer than 2 human: NaN).
    cards[k]: each of target k's dialogues' card where a card has several (seeds, strategies): its
    variance is then clustered by card (ppi.clustered_variance), as the leaderboard's bootstrap is."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    k = len(judge)
    level = 1 - (1 - confidence) / max(k, 1)
    out = []
    for i, j in enumerate(judge):
        j = np.asarray(j, dtype=float)
        has_j = ~np.isnan(j)
        c = None if cards is None or cards[i] is None else np.asarray(cards[i], dtype=str)
        if human is None:
            out.append(classical_mean(j[has_j], confidence=level, clusters=None if c is None else c[has_j]))
            continue
        h = np.asarray(human[i], dtype=float)
        lab = has_j & ~np.isnan(h)
        est = ppi_mean(h[lab], j[lab], j[has_j & ~lab], confidence=level,
                       clusters=None if c is None else c[lab], clusters_unlabeled=None if c is None else c[has_j & ~lab])
        out.append(_student(est, level, est.n if c is None else len(set(c[lab]))))
    return out


def _student(e: MeanEstimate, level: float, units: int) -> MeanEstimate:
    """The PPI interval with Student's t (units - 1 degrees of freedom; units = human scores, or the
    cards they are of when clustered) for the normal quantile: at a Bonferroni level (z = 2.6 for
    six targets) and a few dozen human scores the normal quantile under-covers (six targets, 40
    human scores each: 0.90 simultaneous coverage of the means for a nominal 0.95, 0.94 with t); t
    tends to the normal as n grows."""
    if not e.se > 0 or units < 2:
        return e
    q = float(stats.t.ppf(0.5 + level / 2, units - 1))
    return replace(e, lo=e.estimate - q * e.se, hi=e.estimate + q * e.se)


def _values(m: pd.DataFrame, column: str) -> np.ndarray:
    """A dialogues x dimensions matrix's values for one Table 2 column (Average: each row's nanmean)."""
    a = m.to_numpy(dtype=float)
    if column != "Average":
        return a[:, VALUE_COLUMNS.index(column)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a dialogue with no usable dimension: NaN
        return np.nanmean(a, axis=1)


def build_rank_sets(scores: pd.DataFrame, humans: HumanScores | None = None, columns: tuple[str, ...] = ("Average",),
              confidence: float = 0.95) -> pd.DataFrame:
    """COLUMNS per (language, judge, column, model): the simultaneous interval (x25), the point rank
    and the rank-set. With humans, a (language, judge) whose dialogues have no human score at all
    falls back to judge-only, and its rows say so (anchor, note)."""
    unknown = [c for c in columns if c not in VALUE_COLUMNS]
    if unknown:
        raise ValueError(f"unknown columns {unknown}: expected some of {VALUE_COLUMNS}")
    if scores.empty:
        return pd.DataFrame(columns=COLUMNS)
    scores = scores.assign(judge=scores["judge"].fillna("unknown") if "judge" in scores.columns else "unknown",
                           language=scores["language"].fillna("unknown"))
    rows = []
    for (language, judge), g in scores.groupby(["language", "judge"], sort=True):
        models = sorted(g["target_model"].dropna().unique())
        mats = {m: dialogue_matrix(g[g["target_model"] == m]) for m in models}
        hmeans = {m: humans.means.reindex(mats[m].index) for m in models} if humans is not None else {}
        cards = [card_of(g[g["target_model"] == m], mats[m].index) for m in models]  # None: one dialogue per card
        anchored = humans is not None and any(h.notna().any().any() for h in hmeans.values())
        for column in columns:
            judge_v = [_values(mats[m], column) * TABLE_SCALE for m in models]
            human_v = [_values(hmeans[m], column) * TABLE_SCALE for m in models] if anchored else None
            est = simultaneous_means(judge_v, human_v, confidence, cards)
            r_lo, r_hi = rank_set_bounds(np.array([e.lo for e in est]), np.array([e.hi for e in est]))
            ranks = point_ranks([e.estimate for e in est])
            for i, m in enumerate(models):
                note = []
                if cards[i] is not None:
                    note.append(f"clustered by card ({len(set(cards[i]))} cards)")
                if humans is not None and not anchored:
                    note.append("no human score in this language and judge: judge-only")
                used = ~np.isnan(judge_v[i]) & (~np.isnan(human_v[i]) if anchored else True)
                n_used = int(used.sum()) if cards[i] is None else len(set(cards[i][used]))
                unit = "cards" if cards[i] is not None else "human scores" if anchored else "dialogues"
                if 2 <= n_used < SMALL_N:  # the normal interval at a Bonferroni level needs more than this
                    note.append(f"only {n_used} {unit}: the interval is rough")
                unchecked = caveat(CHECK, n_used) if n_used >= 2 else ""
                if unchecked:
                    note.append(f"rank-set {unchecked}")
                if math.isnan(est[i].lo):
                    note.append(f"{est[i].n} human score(s): no interval, the set spans every rank"
                                if anchored else "fewer than 2 scored dialogues: no interval")
                rows.append({"language": language, "judge": judge, "model": m, "column": column,
                             "anchor": HUMAN_ANCHORED if anchored else JUDGE_ONLY, "estimate": est[i].estimate,
                             "lo": est[i].lo, "hi": est[i].hi, "confidence": confidence,
                             "n_dialogues": int((~np.isnan(judge_v[i])).sum()),
                             "n_human": int(est[i].n) if anchored else 0, "rank": float(ranks[i]),
                             "rank_lo": int(r_lo[i]), "rank_hi": int(r_hi[i]), "note": "; ".join(note)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["language", "judge", "column", "rank", "model"], kind="stable").reset_index(drop=True)


def rank_set_cell(rank_lo, rank_hi) -> str:
    """'2' for a set of one rank, '1-3' for several; 'n/a' when unknown."""
    if rank_lo is None or pd.isna(rank_lo) or pd.isna(rank_hi):
        return "n/a"
    return str(int(rank_lo)) if int(rank_lo) == int(rank_hi) else f"{int(rank_lo)}-{int(rank_hi)}"


def with_rank_sets(leaderboard: pd.DataFrame, table: pd.DataFrame, column: str = "Average") -> pd.DataFrame:
    """Table 2's rows with their rank-set columns (rank, rank_lo, rank_hi, rank_set, rank_anchor)."""
    t = table[table["column"] == column].rename(columns={"anchor": "rank_anchor"})
    t = t.assign(rank_set=[rank_set_cell(a, b) for a, b in zip(t["rank_lo"], t["rank_hi"])])
    keep = [*RANK_KEYS, "rank", "rank_lo", "rank_hi", "rank_set", "rank_anchor"]
    lb = leaderboard.assign(judge=leaderboard["judge"].astype(str), language=leaderboard["language"].astype(str))
    return lb.merge(t[keep], on=RANK_KEYS, how="left")


def explain(anchor: str, confidence: float = 0.95) -> str:
    base = (f"Rank-sets (Prediction-Powered Ranking's construction, Chatzi et al. 2024): with probability at least "
            f"{confidence:.0%}, every model's true rank lies in its set, all at once (rank 1 = the highest; "
            "Bonferroni-simultaneous normal intervals, x25). ")
    if anchor == HUMAN_ANCHORED:
        return base + ("Anchored on human scores (PPI++): 'true' is the ranking by the mean human score, valid when the "
                       "human-scored dialogues are a random sample of each model's.")
    return base + ("Judge-only: 'true' is the ranking the judge would give with unlimited dialogues; it says nothing "
                   "about how people would rank the models (give --humans for that).")


HEADERS = ["Language", "Judge", "Column", "Model", "Estimate [simultaneous CI]", "Rank", "Rank-set", "Dialogues",
           "Human scores", "Note"]


def rank_rows(table: pd.DataFrame) -> list[list[str]]:
    return [[r["language"], r["judge"], r["column"], r["model"], format_cell(r["estimate"], r["lo"], r["hi"]),
             "n/a" if pd.isna(r["rank"]) else f"{r['rank']:g}", rank_set_cell(r["rank_lo"], r["rank_hi"]),
             str(r["n_dialogues"]), str(r["n_human"]) if r["anchor"] == HUMAN_ANCHORED else "-", r["note"]]
            for _, r in table.iterrows()]


def rank_sets_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "_No scores: no rank-sets._\n"
    parts = [explain(a, float(table["confidence"].iloc[0])) for a in sorted(table["anchor"].unique())]
    return "\n\n".join(parts) + "\n\n" + markdown_table(HEADERS, rank_rows(table))


def write_rank_sets(table: pd.DataFrame, leaderboard: pd.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """leaderboard_rank_sets.md (the sets) and .csv (Table 2's rows with the rank-set columns)."""
    with OutputFolder(out_dir) as out:
        md, csv = out / "leaderboard_rank_sets.md", out / "leaderboard_rank_sets.csv"
        md.write_text("# Rank-sets\n\n" + rank_sets_markdown(table), encoding="utf-8")
        with_rank_sets(leaderboard, table).to_csv(csv, index=False)
        return out.finals({"markdown": md, "csv": csv})


# --- its planted-truth check (analysis/checks; `esc-eval bench validity`) ---------------------------
def _planted_check(r: PlantedRuns) -> Outcome:
    table = build_rank_sets(planted_scores(r)).set_index("model")
    truth = true_ranks(r.truth["judge_mean"][DUO_JUDGE])
    covered = all(table.loc[m, "rank_lo"] <= truth[m] <= table.loc[m, "rank_hi"] for m in truth)
    ordered = bool(table.loc["A", "rank_hi"] < table.loc["B", "rank_lo"])  # A placed above B, sets apart
    apart = ordered or bool(table.loc["B", "rank_hi"] < table.loc["A", "rank_lo"])
    return Outcome(flag=ordered if r.variant == PLANTED else apart, covered=covered)


register_check(VerdictCheck(
    "rank-sets", "Rank-sets (judge-only)", "esc_eval.analysis.ranking.rank_sets.build_rank_sets",
    ("section:rank-sets",), "duo", "quality_gap", _planted_check,
    flag="the two targets' rank-sets apart (an order claimed)", interval="every target's true rank in its set, at once"))
