"""The seeker's own ratings read from run folders (sim/runs/records.py SEEKER_RATING_SCHEMA), each
rater's means per target, and what they are set against.

A rating's value is its `expected` (the mean 1-5 under P(1..5), or the people's own answer), else its
`rating`; NaN when the answer was unusable (counted, never a made-up value). Per (rater, target_model,
role_model, strategy, language) and question: n, the mean with a percentile bootstrap interval over
dialogues, and the improvement (the emotion intensity before - after, per dialogue: > 0 = feels better).

The reference. In a folder of the check against people (sim/launch/seeker_check.py) the people's own
answers (rater 'people') are the reference; in a simulation's run, the simulated seeker's
('<role model>:seeker'). `agreement_rows` sets every other rater's answers, and every judge's seven
scores, against the reference's, per question (agreement.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import _as_paths, _open
from esc_eval.analysis.seekerview.agreement import agrees_with_people
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS, SEEKER_RATING_SCHEMA

PEOPLE = "people"
CHANGE = "improvement"  # intensity before - after, per dialogue: > 0 = feels better
QUESTIONS = (*SEEKER_RATING_ITEMS, CHANGE)
LABELS = {"empathy": "Empathy", "relevance": "Relevance", "intensity_before": "Intensity before",
          "intensity_after": "Intensity after", CHANGE: "Improvement (intensity before - after)"}
GROUP = ["rater", "target_model", "role_model", "strategy", "language"]
SUMMARY_COLUMNS = [*GROUP, "question", "n", "unusable", "mean", "lo", "hi"]
AGREEMENT_COLUMNS = ["reference", "rater", "kind", "measure", "question", "n", "spearman", "p", "lo", "hi", "verdict",
                     "note"]


def load_seeker_ratings(run_dirs) -> pd.DataFrame:
    """Every seeker-rating row of the folders (one per dialogue, question and rater), with `value`."""
    frames = []
    for p in _as_paths(run_dirs):
        run = _open(p)
        if run.parts("seeker_ratings"):
            frames.append(run.read("seeker_ratings").to_pandas().assign(run_dir=str(p)))
    df = (pd.concat(frames, ignore_index=True) if frames
          else SEEKER_RATING_SCHEMA.empty_table().to_pandas().assign(run_dir=pd.Series(dtype="object")))
    df["value"] = df["expected"].astype(float).where(df["expected"].notna(), df["rating"].astype(float))
    return df.drop_duplicates(["run_dir", "dialogue_id", "item", "rater"], keep="last").reset_index(drop=True)


def wide(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per (rater, dialogue): the keys and a column per question (and the improvement)."""
    keys = [*GROUP, "dialogue_id"]
    if ratings.empty:
        return pd.DataFrame(columns=[*keys, *QUESTIONS])
    r = ratings.fillna({c: "" for c in GROUP}).drop_duplicates([*keys, "item"], keep="last")
    w = r.set_index([*keys, "item"])["value"].unstack("item").reset_index()  # an unusable answer stays NaN
    for q in SEEKER_RATING_ITEMS:
        if q not in w.columns:
            w[q] = np.nan
    w[CHANGE] = w["intensity_before"] - w["intensity_after"]
    w.columns.name = None
    return w[[*keys, *QUESTIONS]]


def _mean_ci(v: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    if not len(v):
        return float("nan"), float("nan"), float("nan")
    if n_boot and len(v) > 1:
        means = np.random.default_rng(seed).choice(v, size=(n_boot, len(v))).mean(1)
        lo, hi = np.quantile(means, [0.025, 0.975])
        return float(v.mean()), float(lo), float(hi)
    return float(v.mean()), float("nan"), float("nan")


def rating_summary(ratings: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per rater x target x role model x strategy x language and question: n, unusable, mean [95% CI]."""
    w = wide(ratings)
    rows = []
    for key, g in w.groupby(GROUP, sort=True, dropna=False):
        for q in QUESTIONS:
            v = g[q].to_numpy(dtype=float)
            mean, lo, hi = _mean_ci(v[np.isfinite(v)], n_boot, seed)
            rows.append({**dict(zip(GROUP, key)), "question": q, "n": int(np.isfinite(v).sum()),
                         "unusable": int((~np.isfinite(v)).sum()), "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def reference_rater(ratings: pd.DataFrame) -> str | None:
    """'people' where the folder holds their own answers, else the simulated seeker's rater (the first)."""
    raters = sorted(ratings["rater"].dropna().unique())
    if PEOPLE in raters:
        return PEOPLE
    seekers = [r for r in raters if r.endswith(":seeker")]
    return seekers[0] if seekers else None


def agreement_rows(ratings: pd.DataFrame, scores: pd.DataFrame | None = None, n_boot: int = 1000,
                   seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Every other rater's answers (per question) and every judge's scores (per dimension x question:
    empathy, relevance, improvement) against the reference's answers, paired by dialogue:
    agrees_with_people's fields per row. A rater's rows are one family of claims: their intervals are
    simultaneous over them (Bonferroni, 1 - (1 - confidence) / rows: 99% for a rater's 5 questions,
    99.76% for a judge's 7 x 3), so a judge that knows nothing is said to agree on no row 95% of the time."""
    ref = reference_rater(ratings)
    if ref is None:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    w = wide(ratings)
    truth = w[w["rater"] == ref].drop_duplicates("dialogue_id").set_index("dialogue_id")
    families: list[tuple[str, str, list[tuple[str, str, pd.Series, pd.Series]]]] = []
    for rater, g in w[w["rater"] != ref].groupby("rater", sort=True):
        g = g.drop_duplicates("dialogue_id").set_index("dialogue_id")
        pairs = []
        for q in QUESTIONS:
            both = pd.concat([g[q].rename("rater"), truth[q].rename("ref")], axis=1, join="inner")
            pairs.append((LABELS[q], q, both["rater"], both["ref"]))
        families.append((rater, "as the seeker", pairs))
    if scores is not None and not scores.empty:
        value = scores["expected"].where(scores["expected"].notna(), scores["score"]) if "expected" in scores else scores["score"]
        s = scores.assign(value=value.astype(float))
        order = {d: i for i, d in enumerate(DIMENSION_NAMES)}
        for judge, j in s.groupby("judge", sort=True):
            pairs = []
            for dim in sorted(j["dimension"].unique(), key=lambda d: (order.get(d, len(order)), d)):
                per = j[j["dimension"] == dim].groupby("dialogue_id")["value"].mean()
                for q in ("empathy", "relevance", CHANGE):
                    both = pd.concat([per.rename("judge"), truth[q].rename("ref")], axis=1, join="inner")
                    pairs.append((dim, q, both["judge"], both["ref"]))
            families.append((judge, "seven-dimension judge", pairs))
    rows = []
    for rater, kind, pairs in families:
        level = 1 - (1 - confidence) / len(pairs)
        for measure, q, x, y in pairs:
            rows.append({"reference": ref, "rater": rater, "kind": kind, "measure": measure, "question": q,
                         **agrees_with_people(x, y, n_boot=n_boot, confidence=level, seed=seed)})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
