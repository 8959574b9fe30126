"""Windowed judgments, counted and filtered in one place: a judgment of a dialogue longer than the
judge's context was made on a window (sim/judging/window.py: the opener, round 1 and the last rounds;
the score row's `rounds_left_out` > 0 says how many rounds the judge did not read). Every reader of
score rows gets them through load_scores (loaders.py), which applies the filter here
(`windowed`: include | exclude | only, default include) and keeps the count in the frame's
`attrs["windowed"]`; every table, leaderboard and report says it in one line (`windowed_line`).

The unit is a judgment: one judge's rows of one dialogue (its dimensions are asked one prompt each,
and a long dialogue is windowed for some of them); it is windowed when any of its rows is, and the
filter keeps or drops all its rows together, so no dialogue is left with some dimensions. The share
of rounds not read: the rounds left out over the rounds of the dialogues judged (a dialogue's rounds
from its row: (n_turns) // 2, the opener and two turns a round, the seeker's last word a round of
its own); None where the dialogue rows are absent (official JSON, scores without their dialogues).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

WINDOWED_MODES = ("include", "exclude", "only")
DEFAULT_WINDOWED = "include"
UNIT = ["dialogue_id", "judge"]


class WindowedModeError(ValueError):
    """--windowed got a value other than include | exclude | only."""


def check_windowed(mode: str) -> str:
    if mode not in WINDOWED_MODES:
        raise WindowedModeError(f"--windowed {mode}: expected one of {', '.join(WINDOWED_MODES)}")
    return mode


def judgments(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per judgment (UNIT): `left_out` (the most rounds any of its rows left out; NaN when not
    recorded) and `n_rounds` (the dialogue's rounds; NaN when unknown)."""
    if scores.empty or not set(UNIT) <= set(scores.columns):
        return pd.DataFrame(columns=[*UNIT, "left_out", "n_rounds"])
    frame = scores.assign(left_out=pd.to_numeric(scores.get("rounds_left_out"), errors="coerce"),
                          n_rounds=pd.to_numeric(scores.get("n_rounds"), errors="coerce"))
    return frame.groupby(UNIT, dropna=False, sort=False).agg(left_out=("left_out", "max"),
                                                              n_rounds=("n_rounds", "max")).reset_index()


def windowed_counts(scores: pd.DataFrame, mode: str = DEFAULT_WINDOWED, left: int | None = None) -> dict[str, Any]:
    """What a table says of its windowed judgments: judgments, windowed, known (how many judgments
    recorded rounds_left_out), the share of rounds not read in the windowed ones and in all judged
    (NaN without the dialogues' rounds), the mode and, for exclude, how many were left out."""
    j = judgments(scores)
    known = j["left_out"].notna()
    windowed = j[j["left_out"] > 0]
    rounds = j[known & j["n_rounds"].notna()]
    # None (JSON null) where the dialogues' rounds are unknown
    share = lambda f: float(f["left_out"].sum() / f["n_rounds"].sum()) if f["n_rounds"].sum() > 0 else None  # noqa: E731
    return {"mode": mode, "judgments": int(len(j)), "known": int(known.sum()), "windowed": int(len(windowed)),
            "unread_share_windowed": share(windowed[windowed["n_rounds"].notna()]), "unread_share_all": share(rounds),
            "left_out_of_table": int(left or 0)}


def apply_windowed(scores: pd.DataFrame, mode: str = DEFAULT_WINDOWED) -> pd.DataFrame:
    """The rows of the judgments `mode` keeps (include: all; exclude: those the judge read whole, and
    those with nothing recorded; only: the windowed ones), with the count in attrs["windowed"]."""
    check_windowed(mode)
    counts = windowed_counts(scores, mode)
    if mode != "include" and not scores.empty:
        j = judgments(scores)
        picked = j[j["left_out"] > 0] if mode == "only" else j[~(j["left_out"] > 0)]
        keys = pd.MultiIndex.from_frame(picked[UNIT].astype(str))
        kept = pd.MultiIndex.from_frame(scores[UNIT].astype(str)).isin(keys)
        scores = scores[kept].reset_index(drop=True)
        counts["left_out_of_table"] = counts["windowed"] if mode == "exclude" else counts["judgments"] - counts["windowed"]
    scores.attrs["windowed"] = counts
    return scores


def windowed_line(counts: dict[str, Any] | pd.DataFrame) -> str:
    """The one line a table says of its windowed judgments (a frame: its attrs' count, else counted)."""
    if isinstance(counts, pd.DataFrame):
        counts = counts.attrs.get("windowed") or windowed_counts(counts)
    n, w, mode = counts["judgments"], counts["windowed"], counts["mode"]
    if not n:
        return ""
    if not counts["known"]:
        return (f"Windowed judgments: not recorded for these {n} judgments (scored before the rule, or official JSON): "
                "whether the judge read every round is unknown.")
    pct = lambda x: "an unknown share" if x is None or x != x else f"{100 * x:.0f}%"  # noqa: E731 - no dialogue rows
    if mode == "exclude":
        return (f"Windowed judgments: {counts['left_out_of_table']} of {n} left out (`--windowed exclude`): the "
                "judge had not read every round of those dialogues (their context was too long).")
    if mode == "only":
        return (f"Windowed judgments only (`--windowed only`): {w} of {n}, where the judge did not read "
                f"{pct(counts['unread_share_windowed'])} of the dialogues' rounds (its context was too long).")
    if not w:
        return f"Windowed judgments: none of {n} (the judge read every round of every dialogue)."
    return (f"Windowed judgments: {w} of {n} were made on a window of a dialogue too long for the judge, which did not "
            f"read {pct(counts['unread_share_windowed'])} of their rounds ({pct(counts['unread_share_all'])} of all "
            "rounds judged); they count here like whole readings. `--windowed exclude` leaves them out, "
            "`--windowed only` shows them alone.")


def windowed_columns(table: pd.DataFrame, scores: pd.DataFrame, keys: dict[str, str]) -> pd.DataFrame:
    """`table` with n_windowed and unread_share per row: `keys` maps the table's key columns to the
    score frame's (e.g. {"model": "target_model", "language": "language", "judge": "judge"})."""
    if table.empty:
        return table.assign(n_windowed=pd.Series(dtype=float), unread_share=pd.Series(dtype=float))
    extra = [c for c in keys.values() if c not in UNIT]
    j = judgments(scores).merge(scores[[*UNIT, *extra]].drop_duplicates(UNIT), on=UNIT, how="left")
    j = j.assign(w=(j["left_out"] > 0).astype(float).where(j["left_out"].notna()),
                 lo=j["left_out"].where(j["n_rounds"].notna()), nr=j["n_rounds"].where(j["left_out"].notna()))
    g = j.groupby(list(keys.values()), dropna=False).agg(n_windowed=("w", lambda s: s.sum(min_count=1)),
                                                        lo=("lo", "sum"), nr=("nr", "sum")).reset_index()
    g["unread_share"] = (g["lo"] / g["nr"]).where(g["nr"] > 0)
    g = g.rename(columns={v: k for k, v in keys.items()})[[*keys, "n_windowed", "unread_share"]]
    return table.drop(columns=["n_windowed", "unread_share"], errors="ignore").merge(g, on=list(keys), how="left")


def with_windowed(table: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Table 2 (leaderboard.py) with each row's windowed judgments: n_windowed, unread_share, and a
    note where there are some (a row of scores that record nothing keeps NaN and no note)."""
    keys = {"language": "language", "model": "target_model", "judge": "judge"}
    if table.empty or not set(keys.values()) <= set(scores.columns):
        return table
    frame = scores.assign(language=scores["language"].fillna("unknown"), judge=scores["judge"].fillna("unknown"))
    out = windowed_columns(table, frame, keys)
    for i, r in out.iterrows():
        if r["n_windowed"] > 0:
            share = ("" if r["unread_share"] != r["unread_share"]
                     else f": the judge did not read {100 * r['unread_share']:.0f}% of the rounds judged")
            note = f"{int(r['n_windowed'])} judgments windowed{share}"
            out.at[i, "notes"] = "; ".join(n for n in (str(r["notes"] or ""), note) if n)
    return out[list(table.columns)]
