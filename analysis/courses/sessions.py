"""Courses of sessions (beyond the paper): each target's score session by session, and whether its
support degrades or improves across a course (`esc-eval simulate` with `sessions` > 1; sim/courses/).

Per (language, target, its memory, judge, session): the mean of the seven dimensions x 25 over the
sessions scored, and the continuity score x 25 (sessions 2, 3, ...: does it follow up on, remember
and build on the previous session), each with a percentile bootstrap CI resampling cards (a card's
courses together). The change from each course's first scored session to its last, paired by course,
with its CI over cards: `session_change_verdict` says "degrades" when the CI is below 0, "improves"
above, else "holds" (its planted-truth check: tests/analysis/courses/test_analysis_sessions.py).
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pandas as pd

from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.results.blocks import section, table, text
from esc_eval.analysis.results.ratio_ci import ratio_ci
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.sim.judging.dimensions import CONTINUITY, DIMENSION_NAMES, TABLE_SCALE

KEYS = ["language", "target_model", "target_memory", "judge"]
PLACE = ["course_id", "session", "card_id", "dialogue_id"]
VERDICTS = ("degrades", "improves", "holds", "n/a")


def cluster_mean_ci(values: Sequence[float], cards: Sequence[Any], n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of `values`, resampling cards with all their values (NaN,
    NaN with fewer than two cards or no resamples)."""
    values, cards = np.asarray(values, dtype=float), np.asarray(cards).astype(str)
    labels, inverse = np.unique(cards, return_inverse=True)
    if n_boot <= 0 or len(labels) < 2:
        return float("nan"), float("nan")
    sums, counts = np.zeros((len(labels), 1)), np.zeros(len(labels))
    np.add.at(sums, inverse, values[:, None])
    np.add.at(counts, inverse, 1.0)
    lo, hi = ratio_ci(sums, counts, n_boot, seed, confidence)
    return float(lo[0]), float(hi[0])


def session_change_verdict(first: Sequence[float], last: Sequence[float], cards: Sequence[Any], *, n_boot: int = 1000,
                           seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Whether a target's support changes across its courses: each course's score at its first session
    (`first`) and at its last (`last`), paired, and the card each course played (`cards`, the unit
    resampled). Returns n, first and last (means), change (mean of last - first), its CI (ci_low,
    ci_high) and the verdict: degrades (CI below 0) | improves (above) | holds | n/a (no CI: fewer than
    two cards). The verdict a validity registry checks against planted truth."""
    first, last = np.asarray(first, dtype=float), np.asarray(last, dtype=float)
    if not (len(first) == len(last) == len(cards)):
        raise ValueError(f"first, last and cards differ in length ({len(first)}, {len(last)}, {len(cards)})")
    change = last - first
    lo, hi = cluster_mean_ci(change, cards, n_boot, seed, confidence) if len(change) else (float("nan"), float("nan"))
    verdict = "n/a" if np.isnan(lo) else "degrades" if hi < 0 else "improves" if lo > 0 else "holds"
    return {"n": int(len(change)), "first": float(first.mean()) if len(first) else float("nan"),
            "last": float(last.mean()) if len(last) else float("nan"),
            "change": float(change.mean()) if len(change) else float("nan"), "ci_low": lo, "ci_high": hi,
            "verdict": verdict}


def session_values(dialogues: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """One row per scored session of a course: KEYS, PLACE, `value` (the mean of its seven dimensions'
    scores x 25, those without a usable score left out) and `continuity` (x 25; NaN where not scored)."""
    cols = [*KEYS, *PLACE, "value", "continuity"]
    if dialogues.empty or scores.empty or "course_id" not in dialogues.columns:
        return pd.DataFrame(columns=cols)
    d = dialogues[dialogues["course_id"].notna() & dialogues["session"].notna()]
    d = d[["dialogue_id", "course_id", "session", "card_id", "target_memory"]].drop_duplicates("dialogue_id")
    s = scores[scores["dimension"].isin([*DIMENSION_NAMES, CONTINUITY]) & scores["score"].notna()]
    s = s.drop(columns=[c for c in ("card_id", "course_id", "session", "target_memory") if c in s.columns])
    s = s.merge(d, on="dialogue_id")
    if s.empty:
        return pd.DataFrame(columns=cols)
    s = s.assign(session=s["session"].astype(int), target_memory=s["target_memory"].fillna("none"),
                 card_id=s["card_id"].fillna(s["course_id"]))
    by = [*KEYS, *PLACE]
    seven = s[s["dimension"].isin(DIMENSION_NAMES)].groupby(by, dropna=False)["score"].mean().mul(TABLE_SCALE)
    cont = s[s["dimension"] == CONTINUITY].groupby(by, dropna=False)["score"].mean().mul(TABLE_SCALE)
    out = pd.concat([seven.rename("value"), cont.rename("continuity")], axis=1).reset_index()
    return out[cols].sort_values([*KEYS, "course_id", "session"], kind="stable").reset_index(drop=True)


def session_table(values: pd.DataFrame, measure: str = "value", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per KEYS and session: n sessions scored on `measure` (value | continuity), their mean and its CI over cards."""
    rows = []
    scored = values[values[measure].notna()] if not values.empty else values
    for key, g in scored.groupby([*KEYS, "session"], sort=True):
        lo, hi = cluster_mean_ci(g[measure].to_numpy(float), g["card_id"].to_numpy(), n_boot, seed)
        rows.append({**dict(zip([*KEYS, "session"], key)), "n": len(g), "mean": float(g[measure].mean()),
                     "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=[*KEYS, "session", "n", "mean", "ci_low", "ci_high"])


def session_change(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per KEYS: each course's seven-dimension value at its last scored session minus its first, paired by
    course, with the CI over cards and the verdict (session_change_verdict)."""
    cols = [*KEYS, "n", "first_session", "last_session", "first", "last", "change", "ci_low", "ci_high", "verdict"]
    rows = []
    scored = values[values["value"].notna()] if not values.empty else values
    for key, g in scored.groupby(KEYS, sort=True):
        by = g.sort_values("session").groupby("course_id")
        first, last = by.first(), by.last()
        both = first.add_suffix("_first").join(last.add_suffix("_last"))
        both = both[both["session_last"] > both["session_first"]]
        if both.empty:
            continue
        v = session_change_verdict(both["value_first"], both["value_last"], both["card_id_first"].to_numpy(),
                                   n_boot=n_boot, seed=seed)
        rows.append({**dict(zip(KEYS, key)), **v, "first_session": int(both["session_first"].min()),
                     "last_session": int(both["session_last"].max())})
    return pd.DataFrame(rows, columns=cols)


def _ci(lo: float, hi: float) -> str:
    return "-" if np.isnan(lo) else f"[{lo:.1f}, {hi:.1f}]"


def memory_left_out(dialogues: pd.DataFrame) -> int:
    """Later sessions whose target held fewer earlier sessions than there were (memory 'transcripts'
    that did not all fit its context): what the target did not see, counted."""
    if dialogues.empty or "memory_sessions" not in dialogues.columns:
        return 0
    d = dialogues[(dialogues["target_memory"] == "transcripts") & dialogues["session"].notna()
                  & (dialogues["status"] == "ok")]
    return int((d["memory_sessions"].fillna(0) < d["session"] - 1).sum())


def sessions_section(dialogues: pd.DataFrame, all_scores: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    s = section("sessions", "Courses of sessions (beyond the paper)")
    values = session_values(dialogues, all_scores)
    courses = dialogues[dialogues["course_id"].notna()] if "course_id" in dialogues.columns else dialogues.iloc[0:0]
    s["blocks"].append(text(
        f"Each card was run as a course of sessions with the same target ({courses['course_id'].nunique()} courses, "
        f"{len(courses)} sessions): between two sessions the seeker's situation moved on, and the target kept what "
        "its memory setting says (none, its own notes, or the earlier transcripts). Each session is scored as a "
        "dialogue: the mean of the seven dimensions x 25 per session, and the change from each course's first "
        "session to its last, paired by course, with bootstrap 95% CIs over cards; continuity (does the target "
        "follow up on, remember and build on the previous session) is scored from session 2 on, when asked for "
        "(esc-eval score --dimensions continuity). Table 2 pools every session as a dialogue."))
    left_out = memory_left_out(dialogues)
    if left_out:
        s["blocks"].append(text(f"In {left_out} later sessions the target's context held fewer earlier sessions than "
                                "there were (memory 'transcripts': the oldest left out to fit; `memory_sessions`)."))
    if values.empty:
        s["blocks"].append(text("No scored sessions: score the run (esc-eval score)."))
        return s
    change, by_session = session_change(values, n_boot, seed), session_table(values, "value", n_boot, seed)
    cont = session_table(values, "continuity", n_boot, seed)
    s["blocks"].append(table(["Language", "Target", "Memory", "Judge", "n", "First", "Last", "Change", "95% CI", "Verdict"],
                             [[r["language"], r["target_model"], r["target_memory"], r["judge"], r["n"],
                               round(r["first"], 1), round(r["last"], 1), round(r["change"], 1),
                               _ci(r["ci_low"], r["ci_high"]), r["verdict"]] for _, r in change.iterrows()],
                             {0, 1, 2, 3, 8, 9}, caption="Change from the first session to the last", id="sessions-change"))
    s["blocks"].append(table(["Language", "Target", "Memory", "Judge", "Session", "n", "Mean", "95% CI"],
                             [[r["language"], r["target_model"], r["target_memory"], r["judge"], r["session"], r["n"],
                               round(r["mean"], 1), _ci(r["ci_low"], r["ci_high"])] for _, r in by_session.iterrows()],
                             {0, 1, 2, 3, 7}, caption="Score by session (mean of the seven dimensions x 25)", id="sessions"))
    if not cont.empty:
        s["blocks"].append(table(["Language", "Target", "Memory", "Judge", "Session", "n", "Continuity", "95% CI"],
                                 [[r["language"], r["target_model"], r["target_memory"], r["judge"], r["session"], r["n"],
                                   round(r["mean"], 1), _ci(r["ci_low"], r["ci_high"])] for _, r in cont.iterrows()],
                                 {0, 1, 2, 3, 7}, caption="Continuity by session (x 25)", id="sessions-continuity"))
    s["data"] = {"change": json.loads(change.to_json(orient="records")),
                 "by_session": json.loads(by_session.to_json(orient="records")),
                 "continuity": json.loads(cont.to_json(orient="records")), "memory_left_out": left_out}
    return s


def has_courses(ctx: ReportContext) -> bool:
    d = ctx.dialogues
    return bool(not d.empty and "course_id" in d.columns and d["course_id"].notna().any())


# beyond the paper: courses of sessions (analysis/results/section_registry.py)
register_section("sessions", 965, lambda c: sessions_section(c.dialogues, c.all_scores, c.n_boot, c.seed),
                 when=has_courses)


def _planted_check(r):
    """One planted replicate (analysis/checks), on data drawn here, not through the jobs (the scenario
    "drawn"): `size` courses, one per card, each card's level u ~ N(62.5, 15) (x25 scale), its first
    session u + N(0, 10), its last u + change + N(0, 10); change 0 (null) or -6.25, a quarter point
    (planted). session_change_verdict's "degrades"/"improves" is the flag; its CI should hold the change."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome, within

    change = -0.25 * TABLE_SCALE if r.variant == PLANTED else 0.0
    rng = np.random.default_rng([r.seed, r.size, 7])
    level = rng.normal(62.5, 15.0, r.size)
    first, last = level + rng.normal(0, 10.0, r.size), level + change + rng.normal(0, 10.0, r.size)
    out = session_change_verdict(first, last, [f"c{i}" for i in range(r.size)], n_boot=r.n_boot, seed=r.seed)
    covered = within(out["ci_low"], out["ci_high"], change)
    if out["verdict"] == "n/a":
        return Outcome(covered=covered)
    return Outcome(flag=out["verdict"] == "degrades" if r.variant == PLANTED else out["verdict"] != "holds",
                   covered=covered)


register_check(VerdictCheck(
    "session-change", "Change across a course's sessions", "esc_eval.analysis.courses.sessions.session_change_verdict",
    ("section:sessions",), "drawn", "session_drop", _planted_check,
    flag="degrades / improves (the first-to-last change's 95% CI over cards excludes 0)",
    interval="the mean change x25, 95% percentile bootstrap CI over cards",
    unit="courses (one card each) per target; drawn directly, not through the jobs"))
