"""`esc-eval bench rubric`, the reading half: how far one call per dialogue agrees with the paper's one call
per dimension, per dimension, on the same dialogues scored by the same model (sim/bench/loops/rubric.py
wrote both judges' rows into one run folder), and the prompt tokens each spent per dialogue.

Per dimension, over the dialogues both modes scored: the quadratic-weighted kappa with a percentile
bootstrap interval over dialogues (analysis/annotation/kappa_interval.py; its coverage is checked
against a planted kappa), the share of exact agreement, each mode's mean score, and the Pearson
correlation of the expected scores where both read P(0..4) (a point value). Per mode: rows that got
no score (parse failures and errors: never zeros), calls, and prompt and completion tokens per
dialogue (a one-call's rows share one call: counted once)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from esc_eval.analysis.annotation.kappa_interval import kappa_with_interval
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _tokens(rows: pd.DataFrame) -> dict[str, Any]:
    """Calls and tokens per dialogue of one judge's rows (a one-call's rows counted once per dialogue)."""
    one_call = rows["rubric_mode"].eq("one_call").all() if "rubric_mode" in rows else False
    per = rows.drop_duplicates("dialogue_id") if one_call else rows
    reached = per[per["prompt_tokens"].notna() & (per["prompt_tokens"] > 0)]
    by = reached.groupby("dialogue_id")
    prompt = by["prompt_tokens"].sum()
    completion = by["completion_tokens"].sum() if one_call else by.size()  # a constrained label: one token
    return {"calls_per_dialogue": float(by.size().mean()) if len(prompt) else None,
            "prompt_tokens_per_dialogue": float(prompt.mean()) if len(prompt) else None,
            "completion_tokens_per_dialogue": float(completion.mean()) if len(prompt) else None}


def _constant_note(both: pd.DataFrame, kappa: float | None) -> str:
    """What a kappa cannot say: a mode that gave every dialogue one score leaves nothing to agree on (kappa is
    0 by construction, its interval [0, 0]; both the same score: undefined)."""
    if kappa is None and len(both):
        return "kappa undefined: both modes gave every dialogue one and the same score"
    one = [f"{name} gave every dialogue {int(col.iloc[0])}" for name, col in
           (("per_dimension", both["score_a"]), ("one_call", both["score_b"])) if len(col) and col.nunique() == 1]
    return f"{' and '.join(one)}: kappa is 0 by construction, it measures nothing here" if one else ""


def rubric_agreement(run_dir: str | Path, per_dimension: str, one_call: str, n_boot: int = 1000, seed: int = 0) -> dict:
    """The comparison of the two judges' rows in `run_dir` (see the module docstring)."""
    scores = load_scores(run_dir)
    a = scores[scores["judge"] == per_dimension]
    b = scores[scores["judge"] == one_call]
    if a.empty or b.empty:
        raise ValueError(f"{run_dir}: needs rows of both judges {per_dimension!r} and {one_call!r}")
    dims = []
    for d in DIMENSION_NAMES:
        cols = ["dialogue_id", "score", "expected"]
        both = a.loc[a["dimension"] == d, cols].merge(b.loc[b["dimension"] == d, cols], on="dialogue_id",
                                                      suffixes=("_a", "_b"))
        both = both[both["score_a"].notna() & both["score_b"].notna()]
        k = kappa_with_interval(both["score_a"].astype(int), both["score_b"].astype(int), n_boot=n_boot, seed=seed)
        ea, eb = both["expected_a"].astype(float), both["expected_b"].astype(float)
        has = ea.notna() & eb.notna()
        r = float(np.corrcoef(ea[has], eb[has])[0, 1]) if has.sum() > 2 and ea[has].std() > 0 and eb[has].std() > 0 else None
        dims.append({"dimension": d, "n": k["n"], "kappa": k["kappa"], "kappa_lo": k["lo"], "kappa_hi": k["hi"],
                     "exact_agreement": float((both["score_a"] == both["score_b"]).mean()) if len(both) else None,
                     "mean_per_dimension": float(both["score_a"].mean()) if len(both) else None,
                     "mean_one_call": float(both["score_b"].mean()) if len(both) else None,
                     "expected_pearson": r, "note": _constant_note(both, k["kappa"])})
    modes = {}
    for name, rows in (("per_dimension", a), ("one_call", b)):
        modes[name] = {"judge": str(rows["judge"].iloc[0]), "rows": int(len(rows)),
                       "unscored": int(rows["score"].isna().sum()), **_tokens(rows)}
    per, one = modes["per_dimension"]["prompt_tokens_per_dialogue"], modes["one_call"]["prompt_tokens_per_dialogue"]
    return {"dimensions": dims, "modes": modes,
            "prompt_token_saving": round(1 - one / per, 4) if per and one else None, "n_boot": n_boot,
            "interval": "percentile bootstrap over dialogues, 95%"}
