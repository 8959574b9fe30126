"""Expected scores: sum_k k x P(k) in place of the most likely label, where the judge gave P(0..4).

A small judge's most likely label can be the same for everything (the embedded model answers 1
to every prompt) while its probabilities still move: the expected score keeps that signal. Rows
without a full vector (generate judges, parse failures, a label outside the top-k) keep their label.
"""
from __future__ import annotations

import pandas as pd

SCORE_KINDS = ("label", "expected")


def check_score_kind(kind: str) -> str:
    if kind not in SCORE_KINDS:
        raise ValueError(f"--scores {kind!r}: expected label (the most likely label, the paper's) or expected")
    return kind


def expected_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Score rows with `score` = `expected` wherever it is set; `score_kind` says which one each row holds."""
    if scores.empty or "expected" not in scores.columns:
        return scores.assign(score_kind="label")
    has = scores["expected"].notna() & scores["score"].notna()
    return scores.assign(score=scores["score"].where(~has, scores["expected"].astype(float)),
                         score_kind=has.map({True: "expected", False: "label"}))


def score_kind_note(scores: pd.DataFrame) -> str:
    """One sentence on what the leaderboard's numbers are."""
    if "score_kind" not in scores.columns:
        return "Scores are the judge's most likely label (0-4)."
    n = int((scores["score_kind"] == "expected").sum())
    usable = int(scores["score"].notna().sum())
    if n == usable:
        return "Scores are expected scores, sum of k x P(k) over the judge's P(0..4)."
    return (f"Scores are expected scores (sum of k x P(k)) for {n} of {usable} scored rows; the other rows' judges "
            "gave no full P(0..4), so they keep their label.")
