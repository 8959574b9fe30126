"""Leaderboards anchored on human scores (`leaderboard|report|compare --humans`): per model, judge
and dimension the prediction-powered estimate of the mean human score (analysis.trust.ppi) next to the
judge's own mean and interval.

Per leaderboard cell (language, model, judge): the dialogues with a human score on the dimension
and a judge score are PPI's labelled set (Y = the mean of the dialogue's annotators, Yhat = the
judge's score), the cell's other judged dialogues its unlabelled set. The Average column uses
each dialogue's mean over its scored dimensions, for humans and judge alike. Numbers are x25
like Table 2. Beside each estimate: how many human scores it rests on (n), the human-only mean
with the same normal interval, and what the judge-only bootstrap interval claimed.

Whether the judge is off people's scale is a test, not whether PPI's point estimate falls in the
judge's interval (that compares a noisy point with an interval: with a judge exactly on people's
scale, half the cells of a few dozen human scores were called off in esc-eval's planted check):
the judge's offset, the mean of (judge - human) over the dialogues with both, with its Student-t
95% interval; `judge_off_scale` when that interval excludes 0.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import NOT_SHOWN, gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.trust.human_scores import HumanScores
from esc_eval.analysis.results.leaderboard import VALUE_COLUMNS, dialogue_matrix, format_cell
from esc_eval.analysis.trust.ppi import classical_mean, effective_human_scores, ppi_mean
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES, TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder

KEYS = ["language", "group", "model", "judge"]
COLUMNS = [*KEYS, "column", "n_human", "n_judge_only", "judge_mean", "judge_lo", "judge_hi", "human_mean", "human_lo",
           "human_hi", "ppi", "ppi_lo", "ppi_hi", "lam", "effective_n", "judge_ci_covers_ppi", "offset", "offset_lo",
           "offset_hi", "judge_off_scale", "note"]
DIMENSION_TITLES_ALL = {**DIMENSION_TITLES, "average": "Average"}
SMALL_HUMAN = 10  # below this many human scores a normal interval is rough: say so
CHECK = "ppi-mean"  # its planted-truth check (analysis/checks), registered at the end of this module


def _with_average(m: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a dialogue with no dimension: NaN
        return np.column_stack([m, np.nanmean(m, axis=1)])


def judge_offset(judge: np.ndarray, human: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """The mean of judge - human over paired values, with its Student-t interval (NaNs under 2 pairs)."""
    d = np.asarray(judge, dtype=float) - np.asarray(human, dtype=float)
    if len(d) < 2:
        return (float("nan"),) * 3
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d)))
    q = float(stats.t.ppf(0.5 + confidence / 2, len(d) - 1))
    return mean, mean - q * se, mean + q * se


def human_anchored(scores: pd.DataFrame, humans: HumanScores, leaderboard: pd.DataFrame,
                   confidence: float = 0.95) -> pd.DataFrame:
    """One row per leaderboard row and column (the seven titles and Average): COLUMNS."""
    if scores.empty or leaderboard.empty:
        return pd.DataFrame(columns=COLUMNS)
    scores = scores.assign(judge=scores["judge"].fillna("unknown") if "judge" in scores.columns else "unknown",
                           language=scores["language"].fillna("unknown"))
    h_all = humans.means
    rows = []
    for _, lb in leaderboard.iterrows():
        g = scores[(scores["language"] == lb["language"]) & (scores["target_model"] == lb["model"])
                   & (scores["judge"] == lb["judge"])]
        m = dialogue_matrix(g)
        judge = _with_average(m.to_numpy(dtype=float)) * TABLE_SCALE
        human = _with_average(h_all.reindex(m.index).to_numpy(dtype=float)) * TABLE_SCALE
        for j, col in enumerate(VALUE_COLUMNS):
            has_j, has_h = ~np.isnan(judge[:, j]), ~np.isnan(human[:, j])
            lab, unl = has_j & has_h, has_j & ~has_h
            est = ppi_mean(human[lab, j], judge[lab, j], judge[unl, j], confidence=confidence)
            hum = classical_mean(human[lab, j], confidence=confidence)
            lo, hi = lb[f"{col}_lo"], lb[f"{col}_hi"]
            notes = []
            if est.n < 2:
                notes.append(f"{est.n} human score(s): no estimate")
            elif est.n < SMALL_HUMAN:
                notes.append(f"only {est.n} human scores: the normal interval is rough")
            if (has_h & ~has_j).any():
                notes.append(f"{int((has_h & ~has_j).sum())} human-scored dialogue(s) without a judge score left out")
            covers = (bool(lo <= est.estimate <= hi) if not (math.isnan(est.estimate) or math.isnan(lo)) else None)
            off, off_lo, off_hi = judge_offset(judge[lab, j], human[lab, j], confidence)
            off_scale = None if math.isnan(off_lo) else bool(off_lo > 0 or off_hi < 0)
            shown, why = gate(CHECK, int(has_j.sum()), "tested", finds=bool(off_scale))
            if shown == NOT_SHOWN:
                off_scale = None
            if why:
                notes.append(f"judge off people's scale: {why}")
            rows.append({**{k: lb[k] for k in KEYS}, "column": col, "n_human": est.n, "n_judge_only": est.N,
                         "judge_mean": float(lb[col]), "judge_lo": float(lo), "judge_hi": float(hi),
                         "human_mean": hum.estimate, "human_lo": hum.lo, "human_hi": hum.hi,
                         "ppi": est.estimate, "ppi_lo": est.lo, "ppi_hi": est.hi, "lam": est.lam,
                         "effective_n": effective_human_scores(est, hum), "judge_ci_covers_ppi": covers,
                         "offset": off, "offset_lo": off_lo, "offset_hi": off_hi,
                         "judge_off_scale": off_scale,
                         "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _cell(r) -> str:
    if math.isnan(r["ppi"]):
        return f"n/a (n={r['n_human']})"
    return f"{format_cell(r['ppi'], r['ppi_lo'], r['ppi_hi'])} (n={r['n_human']})"


def anchored_wide(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Table 2's layout with PPI cells 'estimate [lo, hi] (n=human scores)'."""
    headers = ["Language", "Model", "Judge", *VALUE_COLUMNS]
    rows = []
    for key, g in table.groupby(["language", "model", "judge"], sort=False):
        by = g.set_index("column")
        rows.append([*key, *[_cell(by.loc[c]) if c in by.index else "n/a" for c in VALUE_COLUMNS]])
    return headers, rows


CLAIM_HEADERS = ["Language", "Model", "Judge", "Column", "Human scores", "Judge only", "Judge mean [95% CI]",
                 "Humans only [95% CI]", "PPI [95% CI]", "lambda", "Worth (human scores)", "Judge CI covers PPI",
                 "Judge - people [95% CI]"]


def claims_rows(table: pd.DataFrame, columns: tuple[str, ...] = ("Average",)) -> list[list[str]]:
    """What each interval claims, for the given columns (the report shows the Average)."""
    out = []
    for _, r in table[table["column"].isin(columns)].iterrows():
        covers = {True: "yes", False: "no", None: "n/a"}[r["judge_ci_covers_ppi"]]
        out.append([r["language"], r["model"], r["judge"], r["column"], str(r["n_human"]), str(r["n_judge_only"]),
                    format_cell(r["judge_mean"], r["judge_lo"], r["judge_hi"]),
                    format_cell(r["human_mean"], r["human_lo"], r["human_hi"]),
                    format_cell(r["ppi"], r["ppi_lo"], r["ppi_hi"]),
                    "n/a" if math.isnan(r["lam"]) else f"{r['lam']:.2f}",
                    "n/a" if math.isnan(r["effective_n"]) else f"{r['effective_n']:.0f}", covers,
                    "n/a" if math.isnan(r["offset"]) else format_cell(r["offset"], r["offset_lo"], r["offset_hi"])
                    + (" off" if r["judge_off_scale"] else "") + _gate_note(r["note"])])
    return out


def _gate_note(note: str) -> str:
    """What the planted-truth check says of the off-scale verdict, from a row's notes ("" if nothing)."""
    said = [n.split(": ", 1)[1] for n in str(note or "").split("; ") if n.startswith("judge off people's scale: ")]
    return f" ({said[0]})" if said else ""


def _md(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]) + "\n"


EXPLAIN = ("Prediction-powered inference (PPI++, Angelopoulos et al. 2023): the judge's scores on every dialogue, "
           "corrected by its error on the dialogues people scored, estimate the mean human score (x25) with a 95% "
           "interval; n = the human-scored dialogues a cell rests on (the mean of each one's annotators). lambda = the "
           "weight given to the judge (0: humans only, 1: plain PPI); 'worth' = how many human scores alone would give "
           "as narrow an interval. Valid when the human-scored dialogues are a random sample of each model's.")


def anchored_markdown(table: pd.DataFrame, source: str) -> str:
    if table.empty:
        return "_No leaderboard rows: nothing to anchor._\n"
    parts = [f"{EXPLAIN} Human scores: {source}.", "", "## Human-scale means (PPI, 95% CI, n = human scores)", "",
             _md(*anchored_wide(table)), "## What each interval claims", "",
             _md(CLAIM_HEADERS, claims_rows(table, tuple(VALUE_COLUMNS)))]
    missed = table[table["judge_off_scale"] == True]  # noqa: E712 - None means unknown
    if len(missed):
        parts.append(f"\n{len(missed)} of {int(table['judge_off_scale'].notna().sum())} cells: the judge is off people's "
                     "scale (its offset's interval excludes 0). Their judge-only intervals "
                     "exclude the human-scale estimate.\n")
    return "\n".join(parts)


def write_anchored(table: pd.DataFrame, out_dir: str | Path, source: str) -> dict[str, Path]:
    """leaderboard_humans.md and .csv in out_dir (a folder or a storage URI)."""
    with OutputFolder(out_dir) as out:
        md, csv = out / "leaderboard_humans.md", out / "leaderboard_humans.csv"
        md.write_text("# Leaderboard anchored on human scores\n\n" + anchored_markdown(table, source), encoding="utf-8")
        table.to_csv(csv, index=False)
        return out.finals({"markdown": md, "csv": csv})


def side_estimates(scores: pd.DataFrame, humans: HumanScores, confidence: float = 0.95) -> dict[str, dict]:
    """One run's scores (one model, one judge) as a single cell: per dimension and 'average' the
    PPI estimate (x25) and its human-only counterpart, for `compare --humans`."""
    m = dialogue_matrix(scores)
    judge = _with_average(m.to_numpy(dtype=float)) * TABLE_SCALE
    human = _with_average(humans.means.reindex(m.index).to_numpy(dtype=float)) * TABLE_SCALE
    out = {}
    for j, dim in enumerate([*DIMENSION_NAMES, "average"]):
        has_j, has_h = ~np.isnan(judge[:, j]), ~np.isnan(human[:, j])
        lab, unl = has_j & has_h, has_j & ~has_h
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            judge_mean = float(np.nanmean(judge[:, j])) if has_j.any() else math.nan
        out[dim] = {"judge_mean": judge_mean,
                    "ppi": ppi_mean(human[lab, j], judge[lab, j], judge[unl, j], confidence=confidence).as_dict(),
                    "humans_only": classical_mean(human[lab, j], confidence=confidence).as_dict()}
    return out



def compare_on_humans(a: pd.DataFrame, b: pd.DataFrame, humans: HumanScores, pair_by: str,
                      confidence: float = 0.95) -> dict:
    """Each side's human-scale means (PPI) and, when the sides are different dialogues (paired by
    card), B - A on the human scale with a normal interval from the two independent estimates
    (conservative where the pairing makes the sides correlate). Two judges of the same dialogues
    (paired by dialogue) estimate one human mean: then the judges' biases (judge - PPI) are shown."""
    from scipy import stats

    sides = {"a": side_estimates(a, humans, confidence), "b": side_estimates(b, humans, confidence)}
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    rows = []
    for dim in [*DIMENSION_NAMES, "average"]:
        pa, pb = sides["a"][dim]["ppi"], sides["b"][dim]["ppi"]
        row = {"dimension": dim, "n_human_a": pa["n"], "n_human_b": pb["n"], "judge_a": sides["a"][dim]["judge_mean"],
               "judge_b": sides["b"][dim]["judge_mean"], "ppi_a": pa["estimate"], "ppi_a_lo": pa["lo"],
               "ppi_a_hi": pa["hi"], "ppi_b": pb["estimate"], "ppi_b_lo": pb["lo"], "ppi_b_hi": pb["hi"]}
        if pair_by == "card":
            diff, se = pb["estimate"] - pa["estimate"], math.hypot(pa["se"], pb["se"])
            row.update(diff=diff, diff_lo=diff - z * se, diff_hi=diff + z * se)
        rows.append(row)
    return {"pair_by": pair_by, "source": humans.source, "confidence": confidence, "dimensions": rows}


def compare_humans_markdown(h: dict) -> str:
    def f(x) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"

    def ci(lo, hi) -> str:
        return "-" if lo is None or (isinstance(lo, float) and math.isnan(lo)) else f"[{lo:.1f}, {hi:.1f}]"

    by_card = h["pair_by"] == "card"
    lines = ["## On the human scale (prediction-powered inference)", "",
             f"Human scores: {h['source']}. Each side's judge scores corrected by its error on the dialogues people "
             "scored (PPI++), x25, 95% normal intervals; n = human-scored dialogues per side."
             + (" B - A: the two estimates' difference, its interval from their two standard errors (the sides "
                "are different dialogues)." if by_card else
                " Both judges scored the same dialogues, so both estimate one human mean: the difference between "
                "a judge's mean and its PPI estimate is that judge's bias."), "",
             "| Dimension | n human A | n human B | judge A | PPI A [95% CI] | judge B | PPI B [95% CI] |"
             + (" B - A (human scale) [95% CI] |" if by_card else " bias A | bias B |"),
             "|---|---:|---:|---:|---|---:|---|" + ("---|" if by_card else "---:|---:|")]
    for r in h["dimensions"]:
        title = DIMENSION_TITLES_ALL.get(r["dimension"], r["dimension"])
        cells = [title, str(r["n_human_a"]), str(r["n_human_b"]), f(r["judge_a"]),
                 f"{f(r['ppi_a'])} {ci(r['ppi_a_lo'], r['ppi_a_hi'])}", f(r["judge_b"]),
                 f"{f(r['ppi_b'])} {ci(r['ppi_b_lo'], r['ppi_b_hi'])}"]
        if by_card:
            cells.append(f"{f(r['diff'])} {ci(r['diff_lo'], r['diff_hi'])}")
        else:
            cells += [f(r["judge_a"] - r["ppi_a"]), f(r["judge_b"] - r["ppi_b"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _planted_check(r):
    """One planted replicate (analysis/checks): the PPI Average of the duo's judge J2 against the
    people's planted mean, and whether J2's own interval is said to miss it."""
    from esc_eval.analysis.checks.registry import Outcome, held, within
    from esc_eval.analysis.results.leaderboard import build_leaderboard
    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.trust.human_scores import human_scores_of

    s = r.once("scores", lambda: load_scores(r.path("runs")))
    s = s[s["judge"] == "J2"]
    board = r.once("leaderboard:J2", lambda: build_leaderboard(s, n_boot=r.n_boot, seed=r.seed))
    table = human_anchored(s, r.once("humans", lambda: human_scores_of(r.path("humans"))), board)
    avg = table[table["column"] == "Average"].set_index("model")
    truth = r.truth["people_mean"]
    off = [bool(v) for v in avg["judge_off_scale"] if v is not None]  # each target's cell is its own verdict
    return Outcome(items=(sum(off), len(off)) if off else None,
                   intervals=held([within(avg.loc[m, "ppi_lo"], avg.loc[m, "ppi_hi"], TABLE_SCALE * truth[m])
                                   for m in truth if m in avg.index]))


register_check(VerdictCheck(
    CHECK, "Human-scale means (PPI)", "esc_eval.analysis.trust.human_leaderboard.human_anchored",
    ("section:human-scores", "command:leaderboard --humans"), "duo", "length", _planted_check,
    flag="the judge is off people's scale (its offset's 95% t-interval excludes 0), per target",
    interval="each target's PPI mean of the human score (Average x25), 95% CI"))
