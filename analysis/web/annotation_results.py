"""Live results of a study, computed by the analysis functions the paper's tables use.

- Inter-annotator agreement per dimension: mean pairwise quadratic-weighted kappa and
  Krippendorff's alpha (annotation.agreement_summary, pairwise_kappa) and ICC(1) with its 95% CI
  (annotation.icc_table).
- Every judge in the runs against the humans: Table 4's ACC / ACC_soft (judge_accuracy) against
  one human label per (dialogue, dimension), the low median of its annotators (what `train rank`
  trains on with aggregate: median), and Table 3's correlations with the human mean
  (correlation_table, pairing "matched", sample and dataset level).
Nothing here re-implements a statistic; this module only shapes the inputs and the JSON.
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from esc_eval.analysis.annotation.agreement import agreement_summary, icc_table, pairwise_kappa
from esc_eval.analysis.trust.correlation import correlation_table, scores_wide
from esc_eval.analysis.trust.correlation_ci import human_wide
from esc_eval.analysis.trust.judge_accuracy import judge_accuracy
from esc_eval.analysis.results.loaders import AnalysisInputError


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-safe rows (NaN -> null)."""
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def human_reference(long: pd.DataFrame) -> pd.DataFrame:
    """One human label per (dialogue, dimension): the low median of its annotators' scores."""
    ref = (long.groupby(["dialogue_id", "dimension"])["score"]
           .agg(lambda s: float(sorted(s)[(len(s) - 1) // 2])).reset_index())
    return ref


def judge_frames(scores: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Score rows of each judge in the runs; a judge seen in several runs on the same dialogue is
    split by run (judge_accuracy needs one judge row per item)."""
    out: dict[str, pd.DataFrame] = {}
    if scores is None or scores.empty:
        return out
    for judge, g in scores.groupby("judge", sort=True):
        if g.duplicated(["dialogue_id", "dimension"]).any():
            for run, h in g.groupby("run_id", sort=True):
                out[f"{judge} @ {run}"] = h
        else:
            out[str(judge)] = g
    return out


def _judge_vs_human(name: str, pred: pd.DataFrame, long: pd.DataFrame, ref: pd.DataFrame) -> dict[str, Any]:
    entry: dict[str, Any] = {"judge": name, "accuracy": [], "correlation": [], "note": ""}
    try:
        entry["accuracy"] = records(judge_accuracy(pred, ref))
    except AnalysisInputError as e:
        entry["note"] = str(e)
        return entry
    metrics = scores_wide(pred)
    human = human_wide(long)
    rows = []
    for level in ("sample", "dataset"):
        try:
            rows.append(correlation_table(metrics, human, level=level, pairing="matched", label=name,
                                          methods=("spearman", "pearson", "kendall")))
        except AnalysisInputError as e:
            entry["note"] = str(e)
    if rows:
        entry["correlation"] = records(pd.concat(rows, ignore_index=True))
    return entry


def live_results(long: pd.DataFrame, judge_scores: pd.DataFrame | None = None) -> dict[str, Any]:
    """Agreement and judge-vs-human figures on a long annotation table (annotator, dialogue_id,
    dimension, score). Model names never appear: the dataset-level correlations only give r."""
    out: dict[str, Any] = {"n_answers": int(len(long)), "n_annotators": int(long["annotator"].nunique()),
                           "n_dialogues": int(long["dialogue_id"].nunique()), "agreement": [], "pairs": [], "icc": [],
                           "judges": []}
    if long.empty:
        return out
    pairs = pairwise_kappa(long)
    out["agreement"] = records(agreement_summary(long, pairs))
    out["pairs"] = records(pairs)
    out["icc"] = records(icc_table(long))
    ref = human_reference(long)
    out["judges"] = [_judge_vs_human(name, pred, long, ref) for name, pred in judge_frames(judge_scores).items()]
    return out
