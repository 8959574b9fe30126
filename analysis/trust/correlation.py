"""Correlation of any metric with human scores (the paper's Tables 3 and 13-15).

Sample level: one point per dialogue (metric value vs the human score of that dialogue).
Dataset level: one point per model (the model's mean metric vs its mean human score).
Spearman, Pearson and Kendall's tau come from scipy.stats; r is reported x100 in the
Markdown tables, as in the paper.
"""
from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

METHODS = {"spearman": stats.spearmanr, "pearson": stats.pearsonr, "kendall": stats.kendalltau}
SHORT = {"spearman": "Spear.", "pearson": "Pear.", "kendall": "Kend."}
Level = Literal["sample", "dataset"]


def correlate(x, y, method: str = "spearman") -> tuple[float, float, int, str]:
    """(r, p, n, note) on the pairs where both values exist. Fewer than 3 pairs or a constant
    side gives NaN and a note instead of a number scipy would warn about."""
    if method not in METHODS:
        raise ValueError(f"unknown correlation method {method!r}; expected {list(METHODS)}")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise AnalysisInputError(f"x and y differ in length ({len(x)} vs {len(y)})")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(len(x))
    if n < 3:
        return float("nan"), float("nan"), n, f"{n} paired values: too few to correlate"
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan"), n, "one side is constant: correlation undefined"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = METHODS[method](x, y)
    return float(res.statistic), float(res.pvalue), n, ""


def scores_wide(scores: pd.DataFrame, key: str = "dialogue_id", extra: list[str] | None = None,
                average: bool = True) -> pd.DataFrame:
    """Long score rows -> one row per `key` with a column per dimension (+ "average" of the
    dimensions present), keeping `extra` columns (e.g. target_model) that are constant per key."""
    extra = [c for c in (extra or ["target_model", "language"]) if c in scores.columns]
    missing = {key, "dimension", "score"} - set(scores.columns)
    if missing:
        raise AnalysisInputError(f"score frame lacks columns {sorted(missing)}")
    wide = scores.pivot_table(index=key, columns="dimension", values="score", aggfunc="mean", dropna=False)
    wide = wide.reindex(columns=[d for d in DIMENSION_NAMES if d in wide.columns])
    if average:
        wide["average"] = wide.mean(axis=1, skipna=True)
    wide.columns.name = None
    if extra:
        wide = wide.join(scores.drop_duplicates(key).set_index(key)[extra])
    return wide.reset_index()


def correlation_table(
    metrics: pd.DataFrame,
    human: pd.DataFrame,
    *,
    metric_columns: list[str] | None = None,
    human_columns: list[str] | None = None,
    on: str = "dialogue_id",
    level: Level = "sample",
    group: str = "target_model",
    methods: tuple[str, ...] = ("spearman", "pearson", "kendall"),
    pairing: str = "cross",
    label: str | None = None,
) -> pd.DataFrame:
    """Correlate every metric column with every human column (pairing "cross", Tables 13-15), or
    each metric column with the human column of the same name (pairing "matched": the ESC-Eval
    row of Table 3, judge fluency vs human fluency, ...; `label` names that row, e.g. "ESC-Eval").

    metrics, human: wide frames with an `on` column (e.g. scores_wide(...) of the judge and of
    human annotations, or text metrics per dialogue). At level "dataset" both are first averaged
    per `group` (the model), which must be a column of `metrics` or `human`.
    Returns long rows: metric, human, method, level, r, p, n, note.
    """
    if level not in ("sample", "dataset"):
        raise ValueError(f"level must be 'sample' or 'dataset', got {level!r}")
    for name, f in (("metrics", metrics), ("human", human)):
        if on not in f.columns:
            raise AnalysisInputError(f"{name} frame lacks the key column {on!r}")
    numeric = lambda f: [c for c in f.columns if c not in (on, group) and pd.api.types.is_numeric_dtype(f[c])]  # noqa: E731
    metric_columns = metric_columns or numeric(metrics)
    human_columns = human_columns or numeric(human)
    m = metrics[[on] + metric_columns + ([group] if group in metrics.columns else [])]
    h = human[[on] + human_columns + ([group] if group in human.columns and group not in m.columns else [])]
    joined = m.merge(h, on=on, how="inner", suffixes=("", "_human"))
    if joined.empty:
        raise AnalysisInputError(f"metrics and human frames share no {on!r} value")
    hcols = {c: (c + "_human" if c in metric_columns else c) for c in human_columns}
    if level == "dataset":
        if group not in joined.columns:
            raise AnalysisInputError(f"dataset level needs a {group!r} column in metrics or human")
        joined = joined.groupby(group)[metric_columns + list(hcols.values())].mean().reset_index()
    if pairing == "cross":
        pairs = [(mc, hc) for mc in metric_columns for hc in hcols]
    elif pairing == "matched":
        pairs = [(hc, hc) for hc in hcols if hc in metric_columns]
        if not pairs:
            raise AnalysisInputError(f"no column name is shared by metrics {metric_columns} and human {human_columns}")
    else:
        raise ValueError(f"pairing must be 'cross' or 'matched', got {pairing!r}")
    rows = []
    for mc, hc in pairs:
        for method in methods:
            r, p, n, note = correlate(joined[mc], joined[hcols[hc]], method)
            name = label if (pairing == "matched" and label) else mc
            rows.append({"metric": name, "human": hc, "method": method, "level": level, "r": r, "p": p, "n": n,
                         "note": note})
    return pd.DataFrame(rows)


def correlation_markdown(table: pd.DataFrame, digits: int = 2) -> str:
    """Paper layout: a row per metric, a column per (human dimension, method), r x 100."""
    if table.empty:
        return "_No correlations._\n"
    humans = list(dict.fromkeys(table["human"]))
    methods = list(dict.fromkeys(table["method"]))
    head = ["Metric"] + [f"{h} {SHORT.get(m, m)}" for h in humans for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    idx = table.set_index(["metric", "human", "method"])
    notes = []
    for metric in dict.fromkeys(table["metric"]):
        cells = [str(metric)]
        for h in humans:
            for m in methods:
                r = idx.loc[(metric, h, m)]
                if np.isnan(r["r"]):
                    cells.append("n/a")
                    if r["note"]:
                        notes.append(f"{metric} vs {h}: {r['note']}")
                else:
                    cells.append(f"{100 * r['r']:.{digits}f}")
        lines.append("| " + " | ".join(cells) + " |")
    out = "\n".join(lines) + "\n"
    if notes:
        out += "\n" + "\n".join(f"- {n}" for n in dict.fromkeys(notes)) + "\n"
    return out
