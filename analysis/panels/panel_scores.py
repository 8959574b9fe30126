"""The panel's score per (dialogue, dimension) from several judges' score rows, by a rule.

An item is one (dialogue, dimension); a judge's value for it is its latest row's `expected` score
where the judge gave P(0..4), else its label. Rules (w = the judges' weights):

- mean: the weighted mean of the values. The row's P(0..4) is the weighted mixture of the judges'
  vectors (a label-only judge counts as all its mass on its label), whose expected score is the mean.
- trimmed_mean: with 3 or more judges on the item, drop the highest and the lowest value (ties: the
  first-listed lowest and the last-listed highest judge), then the weighted mean of the rest; with
  fewer, the weighted mean. P(0..4): the mixture of the judges kept.
- median: the weighted low median of the labels: the smallest label whose cumulative weight reaches
  half the total (the low median, as human_scores takes people's), an integer label.
- majority: the label with the most weight; a tie goes to the lower label (a panel split between two
  labels does not round up).
For median and majority the row's P(0..4) is the share of weight on each label (the panel's vote).

Quorum: the panel scores an item only when at least `quorum` of its judges gave it a usable score
(every judge by default, PanelSpec.min_judges); the other items are left out of the rows and counted
per dimension in the coverage table, with each judge's missing items beside them.

The rows are in load_scores' layout with judge = "panel:<rule>", method = "panel" and `n_judges`
(the judges the item used), so build_leaderboard, calibration and PPI take the panel as one more judge.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from esc_eval.analysis.panels.panel_spec import PanelSpec
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

N_LABELS = 5
REQUIRED = {"dialogue_id", "dimension", "judge", "score", "target_model", "language"}
META = ["run_id", "card_id", "target_model", "language", "run_dir"]
PANEL_COLUMNS = ["run_id", "dialogue_id", "card_id", "target_model", "language", "dimension", "score", "probs",
                 "expected", "raw", "parse_status", "judge", "method", "parser", "error", "prompt_tokens", "latency_s",
                 "scored_at", "adapter", "probs_status", "rounds_left_out", "run_dir", "n_judges"]


@dataclass
class PanelScores:
    """The panel's score rows and how many items each dimension had, scored and left out."""

    spec: PanelSpec
    scores: pd.DataFrame  # PANEL_COLUMNS
    coverage: pd.DataFrame  # dimension, n_items, n_scored, n_left_out, missing:<judge> ... (+ an "all" row)


def latest_rows(scores: pd.DataFrame, judges: list[str]) -> pd.DataFrame:
    """Each judge's latest row per (dialogue, dimension) among the seven dimensions (a dialogue in two runs
    is one item: the later score counts, as a re-score's would)."""
    missing = REQUIRED - set(scores.columns)
    if missing:
        raise AnalysisInputError(f"score frame lacks columns {sorted(missing)} (see analysis.results.loaders.load_scores)")
    s = scores[scores["judge"].isin(judges) & scores["dimension"].isin(DIMENSION_NAMES)]
    if "scored_at" in s.columns:
        s = s.sort_values("scored_at", kind="stable", na_position="first")
    return s.drop_duplicates(["dialogue_id", "dimension", "judge"], keep="last")


def _probs(rows: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """rows x 5: the stored P(0..4) normalised where full and finite, else all mass on the label (0s when none)."""
    out = np.zeros((len(rows), N_LABELS))
    if "probs" in rows.columns:
        vals = rows["probs"].to_numpy(dtype=object)
        sized = np.fromiter((v is not None and not isinstance(v, float) and len(v) == N_LABELS for v in vals), bool,
                            len(vals))
        if sized.any():
            out[sized] = np.stack(vals[sized]).astype(float)
    total = out.sum(axis=1)
    ok = np.isfinite(out).all(axis=1) & (total > 0)
    out[ok] /= total[ok, None]
    have = ~np.isnan(labels)
    label_only = ~ok & have
    out[~ok] = 0.0
    out[label_only, labels[label_only].astype(int)] = 1.0
    return out


def judge_arrays(rows: pd.DataFrame, judges: list[str]):
    """(items frame, labels items x judges, values items x judges, probs items x judges x 5); NaN = no usable score."""
    item = rows.groupby(["dialogue_id", "dimension"], sort=True).ngroup().to_numpy()
    n_items = int(item.max()) + 1 if len(item) else 0
    j = rows["judge"].map({name: i for i, name in enumerate(judges)}).to_numpy()
    label = rows["score"].to_numpy(dtype=float)
    value = label.copy()
    if "expected" in rows.columns:
        exp = pd.to_numeric(rows["expected"], errors="coerce").to_numpy(dtype=float)
        value = np.where(~np.isnan(label) & ~np.isnan(exp), exp, label)
    labels = np.full((n_items, len(judges)), np.nan)
    values = labels.copy()
    probs = np.zeros((n_items, len(judges), N_LABELS))
    labels[item, j], values[item, j] = label, value
    probs[item, j] = _probs(rows, label)
    first = rows.assign(_item=item).sort_values("_item", kind="stable")
    agg = {c: "first" for c in META if c in rows.columns}
    if "scored_at" in rows.columns:
        agg["scored_at"] = "max"
    items = first.groupby("_item").agg({"dialogue_id": "first", "dimension": "first", **agg})
    return items.reset_index(drop=True), labels, values, probs


def combine(labels: np.ndarray, values: np.ndarray, probs: np.ndarray, weights: np.ndarray, rule: str, quorum: int):
    """(score, P(0..4) items x 5, expected, n_judges, kept mask) of every item by `rule` (the module docstring)."""
    usable = ~np.isnan(labels)
    n_used = usable.sum(axis=1)
    kept = n_used >= quorum
    w = np.where(usable, weights[None, :], 0.0)
    if rule in ("median", "majority"):
        onehot = np.zeros_like(probs)
        idx = np.nonzero(usable)
        onehot[idx[0], idx[1], labels[idx].astype(int)] = 1.0
        votes = (w[:, :, None] * onehot).sum(axis=1)  # items x 5: weight on each label
        total = votes.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = votes / total[:, None]
        if rule == "median":
            # the smallest label whose cumulative weight reaches half (a relative tolerance for float sums)
            score = np.argmax(np.cumsum(votes, axis=1) * 2 >= total[:, None] * (1 - 1e-12), axis=1).astype(float)
        else:
            score = np.argmax(votes, axis=1).astype(float)  # argmax takes the first (lowest) label of a tie
        return score, share, np.full(len(score), np.nan), n_used, kept
    if rule == "trimmed_mean":
        trim = n_used >= 3
        rows = np.nonzero(trim)[0]
        low = np.argmin(np.where(usable, values, np.inf), axis=1)  # the first-listed lowest
        rev = np.where(usable, values, -np.inf)[:, ::-1]
        high = values.shape[1] - 1 - np.argmax(rev, axis=1)  # the last-listed highest: never `low` when 2+ judges
        w = w.copy()
        w[rows, low[rows]] = 0.0
        w[rows, high[rows]] = 0.0
    elif rule != "mean":
        raise AnalysisInputError(f"rule {rule!r}: expected mean, median, majority or trimmed_mean")
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (w * np.nan_to_num(values)).sum(axis=1) / total
        mix = (w[:, :, None] * probs).sum(axis=1) / total[:, None]
    return score, mix, score.copy(), n_used, kept


def panel_scores(scores: pd.DataFrame, spec: PanelSpec) -> PanelScores:
    """The panel's rows (module docstring) and the coverage table."""
    rows = latest_rows(scores, spec.names)
    return aggregate(rows, spec, spec.names, np.asarray(spec.weights, dtype=float), spec.quorum)


def aggregate(rows: pd.DataFrame, spec: PanelSpec, judges: list[str], weights: np.ndarray, quorum: int) -> PanelScores:
    """The panel of `judges` (a subset of spec's, e.g. without one judge) over rows from latest_rows."""
    rows = rows[rows["judge"].isin(judges)]
    if rows.empty:
        raise AnalysisInputError(f"no score rows of the panel's judges ({', '.join(judges)}) on the seven dimensions")
    items, labels, values, probs = judge_arrays(rows, judges)
    score, p, expected, n_used, kept = combine(labels, values, probs, weights, spec.rule, min(quorum, len(judges)))
    out = items[kept].copy()
    n = len(out)
    out["score"] = score[kept]
    out["probs"] = list(p[kept])
    out["expected"] = expected[kept]
    out["n_judges"] = n_used[kept].astype(int)
    # a panel's judgment read what its judges read: windowed where any of them was (analysis/judgments/windowed.py)
    left = rows.assign(left=pd.to_numeric(rows["rounds_left_out"], errors="coerce") if "rounds_left_out" in rows
                       else np.nan).groupby(
        ["dialogue_id", "dimension"])["left"].max()
    out = out.assign(raw=None, parse_status="ok", judge=spec.judge_id, method="panel", parser=None, error=None,
                     prompt_tokens=np.nan, latency_s=np.nan, adapter=None, probs_status="full",
                     rounds_left_out=[left.get((d, m), np.nan) for d, m in zip(out["dialogue_id"], out["dimension"])])
    for c in PANEL_COLUMNS:
        if c not in out.columns:
            out[c] = None
    out["probs"] = [list(map(float, v)) for v in out["probs"]] if n else out["probs"]
    out = out[PANEL_COLUMNS].sort_values(["language", "target_model", "dialogue_id", "dimension"], kind="stable")
    return PanelScores(spec, out.reset_index(drop=True), _coverage(items, labels, kept, judges))


def _coverage(items: pd.DataFrame, labels: np.ndarray, kept: np.ndarray, judges: list[str]) -> pd.DataFrame:
    dims = items["dimension"].to_numpy()
    missing = np.isnan(labels)
    rows = []
    for dim in [*DIMENSION_NAMES, "all"]:
        sel = np.ones(len(items), bool) if dim == "all" else dims == dim
        if not sel.any():
            continue
        row = {"dimension": dim, "n_items": int(sel.sum()), "n_scored": int(kept[sel].sum()),
               "n_left_out": int((~kept[sel]).sum())}
        row.update({f"missing:{j}": int(missing[sel, i].sum()) for i, j in enumerate(judges)})
        rows.append(row)
    return pd.DataFrame(rows)
