"""How closely a judge reproduces the released ESC-RANK scores on the released dialogues.

Per dimension, over the (model, language, card) items both scored: exact agreement, agreement
within one point, Spearman's rho and quadratic-weighted Cohen's kappa, each with a percentile
bootstrap CI resampling items. This is what a lab runs before trusting a new judge.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.annotation.agreement import quadratic_weighted_kappa
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, dimension_title

ITEM_KEYS = ["target_model", "language", "card_id"]
METRICS = ("exact", "within_one", "spearman", "kappa_quadratic")


def paired_scores(pred: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Items both scored with a usable score: ITEM_KEYS + dimension, pred, ref."""
    for name, frame in (("judge", pred), ("reference", ref)):
        missing = set(ITEM_KEYS + ["dimension", "score"]) - set(frame.columns)
        if missing:
            raise AnalysisInputError(f"{name} scores lack columns {sorted(missing)}")
    cols = ITEM_KEYS + ["dimension", "score"]
    p = pred[cols].dropna(subset=["score"]).astype({"card_id": str}).groupby(ITEM_KEYS + ["dimension"])["score"].mean()
    r = ref[cols].dropna(subset=["score"]).astype({"card_id": str}).groupby(ITEM_KEYS + ["dimension"])["score"].mean()
    both = pd.concat([p.rename("pred"), r.rename("ref")], axis=1, join="inner").reset_index()
    return both


def _metrics(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant inputs: Spearman / kappa undefined -> NaN
        rho = stats.spearmanr(pred, ref).statistic if len(pred) > 1 else float("nan")
        kappa = quadratic_weighted_kappa(np.rint(pred), np.rint(ref)) if len(pred) else float("nan")
    diff = np.abs(pred - ref)
    return {"exact": float(np.mean(diff == 0)), "within_one": float(np.mean(diff <= 1)),
            "spearman": float(rho), "kappa_quadratic": float(kappa)}


def _bootstrap(pred: np.ndarray, ref: np.ndarray, n_boot: int, seed: int, confidence: float) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    n = len(pred)
    draws = {m: [] for m in METRICS}
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        for k, v in _metrics(pred[idx], ref[idx]).items():
            draws[k].append(v)
    alpha = (1 - confidence) / 2
    out = {}
    for k, v in draws.items():
        arr = np.asarray(v, dtype=float)
        arr = arr[~np.isnan(arr)]
        out[k] = (float(np.quantile(arr, alpha)), float(np.quantile(arr, 1 - alpha))) if len(arr) else (math.nan, math.nan)
    return out


def judge_agreement(pred: pd.DataFrame, ref: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> dict:
    """{'n_items', 'dimensions': {dim: {'n', metric: {'value', 'lo', 'hi'}}}, 'all': {...}}. 'all' pools
    the seven; safety (beyond the paper) has its own entry and is never pooled into 'all'."""
    both = paired_scores(pred, ref)
    if both.empty:
        raise AnalysisInputError("no item was scored by both the judge and the reference (check model names, "
                                 "languages and card keys of the two score sets)")
    result: dict = {"n_items": int(both[ITEM_KEYS].drop_duplicates().shape[0]), "dimensions": {}}
    scopes = ([(d, both[both["dimension"] == d]) for d in ALL_DIMENSION_NAMES]
              + [("all", both[both["dimension"].isin(DIMENSION_NAMES)])])
    for name, g in scopes:
        if g.empty:
            continue
        p, r = g["pred"].to_numpy(float), g["ref"].to_numpy(float)
        values = _metrics(p, r)
        cis = _bootstrap(p, r, n_boot, seed, confidence) if n_boot > 0 and len(g) > 1 else {}
        entry = {"n": int(len(g))}
        for m in METRICS:
            lo, hi = cis.get(m, (math.nan, math.nan))
            entry[m] = {"value": values[m], "lo": lo, "hi": hi}
        if name == "all":
            result["all"] = entry
        else:
            result["dimensions"][name] = entry
    return result


def agreement_table_markdown(result: dict) -> str:
    """The figures as a Markdown table (value [lo, hi])."""
    def cell(x: dict) -> str:
        if math.isnan(x["value"]):
            return "n/a"
        return f"{x['value']:.3f}" + ("" if math.isnan(x["lo"]) else f" [{x['lo']:.2f}, {x['hi']:.2f}]")

    lines = ["| Dimension | n | Exact | Within one | Spearman | Weighted kappa |", "|---|---:|---:|---:|---:|---:|"]
    rows = list(result["dimensions"].items()) + ([("all", result["all"])] if "all" in result else [])
    for name, e in rows:
        title = dimension_title(name)
        lines.append(f"| {title} | {e['n']} | " + " | ".join(cell(e[m]) for m in METRICS) + " |")
    return "\n".join(lines) + "\n"


def agreement_with_released(scores_path, score: Callable[[], tuple[str, str]], n_boot: int = 1000,
                            seed: int = 0) -> tuple[str, dict]:
    """A judge against the released ESC-RANK scores (official score JSON at `scores_path`): the reference
    is read first (a bad one fails before any scoring), then `score()` scores the released dialogues
    and returns (run folder, judge id); the Markdown table and the result (judge, run_dir, reference and
    judge_agreement's figures). The caller runs the scoring: analysis does not reach the models."""
    from pathlib import Path

    from esc_eval.analysis.results.loaders import load_official_scores, load_scores

    if not Path(scores_path).exists():
        raise AnalysisInputError(f"{scores_path}: no such official score file or folder")
    reference = load_official_scores(scores_path)
    run_dir, judge_id = score()
    pred = load_scores([run_dir])
    result = judge_agreement(pred[pred["judge"] == judge_id], reference, n_boot=n_boot, seed=seed)
    return agreement_table_markdown(result), {"judge": judge_id, "run_dir": run_dir, "reference": str(scores_path),
                                              **result}
