"""The paper's Table 2: per (language, group, model) mean score x 25 on each dimension, with
bootstrap 95% confidence intervals over dialogues, the number of dialogues, how many of them the
simulator spoiled (analysis/results/spoiled.py; the scores include them) and the parse-failure rate.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import caveat
from esc_eval.analysis.checks.registry import (DUO_JUDGE, DUO_PANEL, Outcome, PlantedRuns, VerdictCheck, held,
                                               register_check, within)
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.judgments.rubric_mode import RUBRIC_MODE_NOTES, rubric_mode_of
from esc_eval.analysis.judgments.windowed import with_windowed
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES, TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder

# The paper's column order; "Average" is the mean of the seven dimension columns.
TITLES = [DIMENSION_TITLES[d] for d in DIMENSION_NAMES]
VALUE_COLUMNS = TITLES + ["Average"]
GROUP_ORDER = {"close": 0, "open": 1, "domain": 2}
UNASSIGNED_GROUP = "unassigned"
REQUIRED_SCORE_COLUMNS = {"dialogue_id", "target_model", "language", "dimension", "score"}
KEY_COLUMNS = ["language", "group", "model", "judge"]
# Below this many dialogues a percentile bootstrap under-covers: say so beside the CI.
SMALL_N = 10
CHECK = "leaderboard-ci"  # its planted-truth check (registered at the end of this module)


def leaderboard_columns() -> list[str]:
    cols = list(KEY_COLUMNS) + ["n_dialogues", "n_spoiled"]
    for c in VALUE_COLUMNS:
        cols += [c, f"{c}_lo", f"{c}_hi"]
    return cols + ["n_scores", "parse_failure_rate", "n_windowed", "unread_share", "notes"]


def check_score_frame(scores: pd.DataFrame) -> None:
    missing = REQUIRED_SCORE_COLUMNS - set(scores.columns)
    if missing:
        raise AnalysisInputError(f"score frame lacks columns {sorted(missing)} (see analysis.results.loaders.load_scores)")
    unknown = set(scores["dimension"].dropna()) - set(DIMENSION_NAMES)
    if unknown:
        raise AnalysisInputError(f"unknown dimensions {sorted(unknown)}; expected paper names {DIMENSION_NAMES}")


def dialogue_matrix(group: pd.DataFrame) -> pd.DataFrame:
    """Dialogues x 7 dimensions of scores (NaN where no usable score). Repeated judgments of one
    dialogue (the same dialogue in two runs) are averaged: the dialogue is the resampling unit."""
    m = group.pivot_table(index="dialogue_id", columns="dimension", values="score", aggfunc="mean", dropna=False)
    return m.reindex(columns=DIMENSION_NAMES)


def _table_values(m: np.ndarray) -> np.ndarray:
    """Per-dimension means x 25 and their average, along axis -2 (dialogues) of m[..., n, 7]."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column gives NaN, reported as missing
        dims = np.nanmean(m, axis=-2) * TABLE_SCALE
    return np.concatenate([dims, dims.mean(axis=-1, keepdims=True)], axis=-1)


def bootstrap_table_ci(
    m: np.ndarray, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CIs of the 7 means x 25 and the Average, resampling dialogues (rows
    of m) with replacement, the same resample for all columns so the Average's CI is coherent."""
    n = m.shape[0]

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=int)
        # idx: (..., n) resampled row numbers -> values (..., 8); scipy wants the outputs first.
        return np.moveaxis(_table_values(m[idx]), -1, 0)

    with warnings.catch_warnings():
        # Constant columns give a degenerate (zero-width) interval: that is the right answer here.
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (np.arange(n),), statistic, n_resamples=n_boot, confidence_level=confidence,
            method="percentile", vectorized=True, batch=max(1, min(n_boot, 200_000 // max(n, 1))),
            rng=np.random.default_rng(seed),
        )
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def cluster_bootstrap_table_ci(
    m: np.ndarray, clusters: np.ndarray, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CIs resampling clusters (cards) with all their dialogues (seeds): the
    statistic is the dialogue mean over the resampled clusters, exactly the point estimate's."""
    labels, inverse = np.unique(clusters, return_inverse=True)
    present = ~np.isnan(m)
    sums = np.zeros((len(labels), m.shape[1]))
    counts = np.zeros((len(labels), m.shape[1]))
    np.add.at(sums, inverse, np.where(present, m, 0.0))
    np.add.at(counts, inverse, present.astype(float))

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.asarray(idx, dtype=int)
        with np.errstate(invalid="ignore", divide="ignore"):
            dims = sums[idx].sum(axis=-2) / counts[idx].sum(axis=-2) * TABLE_SCALE
        return np.moveaxis(np.concatenate([dims, dims.mean(axis=-1, keepdims=True)], axis=-1), -1, 0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (np.arange(len(labels)),), statistic, n_resamples=n_boot, confidence_level=confidence,
            method="percentile", vectorized=True, batch=max(1, min(n_boot, 200_000 // max(len(labels), 1))),
            rng=np.random.default_rng(seed),
        )
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def card_of(group: pd.DataFrame, dialogue_ids: pd.Index) -> np.ndarray | None:
    """Each dialogue's card when cards repeat (several seeds or runs per card), else None."""
    if "card_id" not in group.columns or group["card_id"].isna().any():
        return None
    card = group.drop_duplicates("dialogue_id").set_index("dialogue_id")["card_id"].reindex(dialogue_ids)
    return card.to_numpy() if card.nunique() < len(card) else None


def build_leaderboard(
    scores: pd.DataFrame,
    groups: dict[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    spoiled: Mapping[str, bool | None] | None = None,
) -> pd.DataFrame:
    """Table 2 from score rows (analysis.results.loaders.load_scores / load_official_scores).

    One row per (language, group, model, judge): the judge is part of the key so that two judges'
    scores of the same dialogues are never averaged together (a frame with several judges gives
    one row per judge, and a note says so). Columns: n_dialogues; per dimension title
    (Fluency..Overall) the mean score x 25 with `<col>_lo`/`<col>_hi` bootstrap CI bounds over
    dialogues; Average (mean of the seven) with its CI; n_scores (score rows); parse_failure_rate
    (share of score rows with no usable score); n_windowed and unread_share (windowed.py); notes (why a number or CI is missing); n_spoiled: how
    many of the row's dialogues the simulator spoiled, from `spoiled` (dialogue id -> flag,
    analysis/results/spoiled.py spoiled_by_dialogue; NaN where none of them has a flag).
    Groups: model -> close | open | domain; models not in the mapping are "unassigned".
    """
    check_score_frame(scores)
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    if scores.empty:
        return pd.DataFrame(columns=leaderboard_columns())
    scores = scores.copy()
    if "judge" not in scores.columns:
        scores["judge"] = "unknown"
    scores["judge"] = scores["judge"].fillna("unknown")
    scores["language"] = scores["language"].fillna("unknown")
    mixed_judges = scores["judge"].nunique() > 1
    groups = groups or {}
    rows = []
    for (language, model, judge), g in scores.groupby(["language", "target_model", "judge"], sort=True, dropna=False):
        notes: list[str] = []
        m = dialogue_matrix(g)
        values = _table_values(m.to_numpy(dtype=float))
        missing = [DIMENSION_TITLES[d] for d in DIMENSION_NAMES if m[d].notna().sum() == 0]
        if missing:
            notes.append(f"no usable score for {', '.join(missing)}; Average not computed")
        n_scored = int(m.notna().any(axis=1).sum())
        lo = hi = np.full(len(VALUE_COLUMNS), np.nan)
        if n_scored < 2:
            notes.append(f"{n_scored} dialogue(s) with a usable score: no confidence interval")
        elif n_boot == 0:
            notes.append("bootstrap disabled (n_boot=0): no confidence interval")
        else:
            kept = m[m.notna().any(axis=1)]
            scored = kept.to_numpy(dtype=float)
            cards = card_of(g, kept.index)
            if cards is None:
                lo, hi = bootstrap_table_ci(scored, n_boot=n_boot, seed=seed, confidence=confidence)
                n_units = n_scored
            elif len(set(cards)) < 2:  # several dialogues (seeds, strategies) of one card: nothing to resample
                n_units = 1
                notes.append(f"all {n_scored} dialogues are of one card: no confidence interval")
            else:
                # Dialogues of one card (seeds) are not independent: resample cards with all of them.
                lo, hi = cluster_bootstrap_table_ci(scored, cards, n_boot=n_boot, seed=seed, confidence=confidence)
                n_units = len(set(cards))
                notes.append(f"CI resamples {n_units} cards (their {n_scored} dialogues clustered by card)")
            unchecked = caveat(CHECK, n_units)
            if unchecked and np.isfinite(lo).any():
                notes.append(f"CI {unchecked}")
            if n_units < SMALL_N:
                notes.append(f"only {n_units} {'cards' if cards is not None else 'dialogues'}: the bootstrap "
                             "interval is rough (too narrow at this size)")
        if mixed_judges:
            notes.append(f"scores from several judges in this table; this row is judge {judge}")
        mode = rubric_mode_of(g)
        if mode != "per_dimension":
            notes.append(RUBRIC_MODE_NOTES[mode])
        row = {"language": language, "group": groups.get(model, UNASSIGNED_GROUP), "model": model,
               "judge": judge, "n_dialogues": int(len(m)), "n_spoiled": _n_spoiled(m.index, spoiled)}
        for i, c in enumerate(VALUE_COLUMNS):
            row[c], row[f"{c}_lo"], row[f"{c}_hi"] = float(values[i]), float(lo[i]), float(hi[i])
        row["n_scores"] = int(len(g))
        row["parse_failure_rate"] = float(g["score"].isna().mean())
        row["notes"] = "; ".join(notes)
        rows.append(row)
    df = pd.DataFrame(rows, columns=leaderboard_columns())
    order = df["group"].map(lambda x: GROUP_ORDER.get(str(x).lower(), len(GROUP_ORDER)))
    df = df.assign(_g=order, _avg=-df["Average"].fillna(-np.inf))
    df = df.sort_values(["language", "_g", "_avg", "model", "judge"], kind="stable")
    return with_windowed(df.drop(columns=["_g", "_avg"]).reset_index(drop=True), scores)  # windowed.py


def _n_spoiled(dialogue_ids: pd.Index, spoiled: Mapping[str, bool | None] | None) -> float:
    known = [spoiled[d] for d in dialogue_ids if spoiled is not None and spoiled.get(d) is not None]
    return float(sum(bool(f) for f in known)) if known else float("nan")


def spoiled_cell(row: Mapping) -> str:
    """'3' flagged of the row's dialogues; 'n/a' where no flag is known (scores without their dialogues)."""
    n = row.get("n_spoiled")
    return "n/a" if n is None or n != n else str(int(n))


def format_cell(value: float, lo: float, hi: float) -> str:
    """'63.78 [58.1, 69.2]'; 'n/a' for a missing value; the bare value when there is no CI."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{value:.2f}"
    return f"{value:.2f} [{lo:.1f}, {hi:.1f}]"


def leaderboard_markdown(df: pd.DataFrame, bold_best: bool = True) -> str:
    """Markdown table in Table 2 layout; the best value per language and column is bold (not on ties of all)."""
    if df.empty:
        return "_No scores: the leaderboard is empty._\n"
    head = ["Language", "Group", "Model", "Judge", "n", "Spoiled"] + VALUE_COLUMNS + ["Parse failures", "Notes"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * 5 + ["---:"] * (1 + len(VALUE_COLUMNS)) + ["---:", "---"]) + "|"]
    best = df.groupby("language")[VALUE_COLUMNS].transform("max")
    # A column where every model ties has no "best": bold nothing there.
    spread = df.groupby("language")[VALUE_COLUMNS].transform(lambda s: s.max() - s.min())
    for i, r in df.iterrows():
        cells = [str(r["language"]), str(r["group"]), str(r["model"]), str(r["judge"]), str(r["n_dialogues"]), spoiled_cell(r)]
        for c in VALUE_COLUMNS:
            text = format_cell(r[c], r[f"{c}_lo"], r[f"{c}_hi"])
            # Bold only when there is something to compare against.
            if bold_best and not math.isnan(r[c]) and r[c] == best.loc[i, c] and spread.loc[i, c] > 0:
                text = f"**{text}**"
            cells.append(text)
        cells.append(f"{100 * r['parse_failure_rate']:.1f}%")
        cells.append(str(r["notes"]).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# A judge recalibrated against human scores is written as `<judge>+cal:<method>`
# (analysis/trust/calibration_runs.py CAL_TAG); this layer cannot import trust, so the tag is named here too.
CALIBRATED_TAG = "+cal:"


def human_scores_line(judges, anchored: bool = False, instead: str | None = None) -> str:
    """The one line beside Table 2 when a judge's numbers stand without human scores ('' when every
    judge has them: a recalibrated judge, or anchored by PPI). instead: the line to give in that case
    (the demo's says what its models are too small for)."""
    bare = sorted({str(j) for j in judges if CALIBRATED_TAG not in str(j)})
    if anchored or not bare:
        return ""
    if instead:
        return instead
    who = f"judge {bare[0]}" if len(bare) == 1 else f"judges {', '.join(bare)}"
    return (f"No human scores beside {who}: these are the judge's numbers, checked against no person (no calibration, "
            "no PPI); `esc-eval analysis calibration` or `--humans` with human scores puts them on people's scale.")


SPOILED_NOTE = ("Spoiled: how many of the row's dialogues the simulator spoiled (the seeker looped, broke character, "
                "talked like the assistant, ...: docs/guides/spoiled-dialogues-and-rankings.md); their scores are in the "
                "row. `esc-eval leaderboard --exclude-spoiled` shows the table without them.")


def write_leaderboard(df: pd.DataFrame, out_dir: str | Path, note: str = "") -> dict[str, Path]:
    """Write leaderboard.md and leaderboard.csv into out_dir (a folder or a storage URI); returns
    {"markdown": ..., "csv": ...}. note: a line under the title (e.g. what the scores are)."""
    with OutputFolder(out_dir) as out:
        md, csv = out / "leaderboard.md", out / "leaderboard.csv"
        md.write_text("# Leaderboard (mean score x 25, bootstrap 95% CI over dialogues)\n\n" + (note + "\n\n" if note else "")
                      + leaderboard_markdown(df) + (f"\n{SPOILED_NOTE}\n" if df.get("n_spoiled", pd.Series(dtype=float)).notna().any()
                                                    else ""), encoding="utf-8")
        df.to_csv(csv, index=False)
        return out.finals({"markdown": md, "csv": csv})


BY_COLUMNS = {"category": "category_1", "category_1": "category_1", "category_2": "category_2",
              "category_3": "category_3", "language": "language",
              "round": "end_round"}  # a by-round run folder's prefixes (sim/runs/by_round.py)


def build_leaderboard_by(
    scores: pd.DataFrame, dialogues: pd.DataFrame, by: str = "category",
    groups: dict[str, str] | None = None, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
    spoiled: Mapping[str, bool | None] | None = None,
) -> pd.DataFrame:
    """Table 2 within each value of a card attribute: 'category' (= category_1, the three top
    categories of Table 9), 'category_2', 'category_3' (our cards' finer levels), 'language', or
    'round' (a by-round run folder: each dialogue as it stood after each round).
    Every row is a build_leaderboard row (still per language) with the value in column `by`;
    dialogues without the attribute are grouped under 'unknown'."""
    column = BY_COLUMNS.get(by)
    if column is None:
        raise AnalysisInputError(f"--by {by!r}: expected one of {', '.join(BY_COLUMNS)}")
    check_score_frame(scores)
    name = "category" if by == "category" else by
    if scores.empty:
        return pd.DataFrame(columns=[name, *leaderboard_columns()])
    if column == "language":  # Table 2's rows are per language already: the same rows, one table per language
        table = build_leaderboard(scores.assign(language=scores["language"].fillna("unknown")), groups=groups,
                                  n_boot=n_boot, seed=seed, confidence=confidence, spoiled=spoiled)
        return table[leaderboard_columns()]
    if column not in dialogues.columns:
        raise AnalysisInputError(f"dialogue rows lack {column!r}: cannot split the leaderboard by {by}")
    attr = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")[column]
    if column == "end_round":  # "03" sorts before "10"; a dialogue that is not a prefix has none
        attr = attr.map(lambda k: f"{int(k):02d}" if pd.notna(k) else None)
    keyed = scores.assign(**{name: scores["dialogue_id"].map(attr).fillna("unknown")})
    tables = [build_leaderboard(g.drop(columns=[name]), groups=groups, n_boot=n_boot, seed=seed, confidence=confidence,
                                spoiled=spoiled).assign(**{name: value}) for value, g in keyed.groupby(name, sort=True)]
    out = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=leaderboard_columns())
    return out[[name, *leaderboard_columns()]]


def leaderboard_by_markdown(df: pd.DataFrame, by: str = "category") -> str:
    """One Table 2 per value of `by`, with CIs and counts."""
    name = "category" if by == "category" else by
    if df.empty:
        return "_No scores: the leaderboard is empty._\n"
    parts = []
    for value, g in df.groupby(name, sort=True):
        parts.append(f"### {name}: {value} ({int(g['n_dialogues'].sum())} dialogues)\n\n"
                     + leaderboard_markdown((g if name == "language" else g.drop(columns=[name])).reset_index(drop=True)))
    return "\n".join(parts)


def seed_spread(scores: pd.DataFrame, dialogues: pd.DataFrame) -> pd.DataFrame:
    """With several seeds: per (language, model, judge) the Average (x 25) of each seed's
    dialogues and its spread across seeds (n_seeds, mean, sd, min, max). Empty with one seed."""
    cols = ["language", "model", "judge", "n_seeds", "seed_mean", "seed_sd", "seed_min", "seed_max", "per_seed"]
    if scores.empty or "seed" not in dialogues.columns:
        return pd.DataFrame(columns=cols)
    seeds = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")["seed"]
    df = scores.assign(seed=scores["dialogue_id"].map(seeds), judge=scores.get("judge", "unknown"))
    df = df[df["seed"].notna()]
    rows = []
    for (language, model, judge), g in df.groupby(["language", "target_model", "judge"], sort=True):
        if g["seed"].nunique() < 2:
            continue
        per = {int(sd): float(_table_values(dialogue_matrix(gs).to_numpy(dtype=float))[-1])
               for sd, gs in g.groupby("seed", sort=True)}
        v = np.array(list(per.values()))
        rows.append({"language": language, "model": model, "judge": judge, "n_seeds": len(per),
                     "seed_mean": float(np.nanmean(v)), "seed_sd": float(np.nanstd(v, ddof=1)),
                     "seed_min": float(np.nanmin(v)), "seed_max": float(np.nanmax(v)),
                     "per_seed": "; ".join(f"{k}: {x:.2f}" for k, x in per.items())})
    return pd.DataFrame(rows, columns=cols)


# --- its planted-truth check (analysis/checks; `esc-eval bench validity`) ---------------------------
def planted_scores(r: PlantedRuns, judge: str | None = DUO_JUDGE) -> pd.DataFrame:
    """The duo's score rows, loaded once per replicate: one judge's, or (None) the panel's three."""
    from esc_eval.analysis.results.loaders import load_scores

    s = r.once("scores", lambda: load_scores(r.path("runs")))
    return s[s["judge"] == judge] if judge else s[s["judge"].isin(DUO_PANEL)]


def _planted_check(r: PlantedRuns) -> Outcome:
    lb = r.once(f"leaderboard:{DUO_JUDGE}", lambda: build_leaderboard(planted_scores(r), n_boot=r.n_boot, seed=r.seed))
    lb = lb.set_index("model")
    truth = r.truth["judge_mean"][DUO_JUDGE]
    return Outcome(intervals=held([within(lb.loc[m, "Average_lo"], lb.loc[m, "Average_hi"], TABLE_SCALE * truth[m])
                                   for m in truth if m in lb.index]))


register_check(VerdictCheck(
    "leaderboard-ci", "Table 2's intervals", "esc_eval.analysis.results.leaderboard.build_leaderboard",
    ("section:leaderboard", "section:by-category", "command:leaderboard"),
    "duo", "quality_gap", _planted_check, interval="each target's Average x25, 95% bootstrap CI over cards"))
