"""Role-play evaluation: the paper's Table 1 and Figure 3 from judgments, and automatic
fidelity checks of the role model (the simulated seeker) on dialogue rows.

Table 1: six metrics rated 0-2 by judges (Coherence, Fluency, Thematic consistency,
Completeness, Emotional congruence, Humanoid; rules in the paper's Table 10), shown on a 0-10
scale (mean / 2 x 10) per role model and language, with their average.
Figure 3: pairwise "which dialogue is more human-like" judgments -> win / tie / loss rates.
Fidelity checks (heuristics, no model): a character break is a seeker turn that reveals an AI
("As an AI", "language model"), speaks about the role-play ("my character card") or talks like
the assistant ("How can I help you"); emotional drift is the slope of a small bilingual lexicon's
negativity over the seeker's rounds, and the share of dialogues that start negative and are no
longer negative by round 3 (Table 10: real people rarely turn from negative to positive within a
few rounds). The lexicons are sim/dialogue/seeker_lexicon.py's (the spoiled flags use them too).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.dialogue.seeker_lexicon import (BREAK_PATTERNS, NEGATIVE_EN, NEGATIVE_ZH, NEGATORS_EN,  # noqa: F401
                                                  NEGATORS_ZH, POSITIVE_EN, POSITIVE_ZH, negativity)
from esc_eval.sim.dialogue.seeker_lexicon import BREAK_RE as _BREAK_RE

ROLEPLAY_METRICS = {
    "coherence": "Cohe.", "fluency": "Flue.", "thematic_consistency": "Them.", "completeness": "Comp.",
    "emotional_congruence": "Emot.", "humanoid": "Huma.",
}
ROLEPLAY_SCALE = 10 / 2  # 0-2 ratings shown on 0-10


def roleplay_table(judgments: pd.DataFrame) -> pd.DataFrame:
    """judgments: rows role_model, language, metric (a ROLEPLAY_METRICS key), score 0-2 (one per
    judged dialogue). Returns per (role_model, language): each metric's mean x 5 (0-10), Average
    (mean of the six, NaN if one is missing) and n (judged dialogues)."""
    need = {"role_model", "language", "metric", "score"}
    if need - set(judgments.columns):
        raise AnalysisInputError(f"role-play judgments lack columns {sorted(need - set(judgments.columns))}")
    bad_metric = set(judgments["metric"]) - set(ROLEPLAY_METRICS)
    if bad_metric:
        raise AnalysisInputError(f"unknown role-play metrics {sorted(bad_metric)}; expected {list(ROLEPLAY_METRICS)}")
    s = pd.to_numeric(judgments["score"], errors="coerce")
    if (s.notna() & ~s.isin([0, 1, 2])).any() or (s.isna() & judgments["score"].notna()).any():
        raise AnalysisInputError("role-play scores must be integers 0-2 (the paper's 3-point scale)")
    j = judgments.assign(score=s)
    t = j.pivot_table(index=["role_model", "language"], columns="metric", values="score", aggfunc="mean") * ROLEPLAY_SCALE
    t = t.reindex(columns=list(ROLEPLAY_METRICS))
    t["Average"] = t.mean(axis=1, skipna=False)
    t = t.rename(columns=ROLEPLAY_METRICS)
    key = "dialogue_id" if "dialogue_id" in j.columns else None
    t["n"] = j.groupby(["role_model", "language"])[key].nunique() if key else j.groupby(["role_model", "language"]).size()
    return t.reset_index()


def roleplay_markdown(table: pd.DataFrame, languages: tuple[str, str] = ("zh", "en")) -> str:
    """Table 1 layout: one row per role model, cells 'ZH/EN' as in the paper."""
    cols = list(ROLEPLAY_METRICS.values()) + ["Average"]
    lines = ["| Model | " + " | ".join(c if c != "Average" else "Aver." for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    idx = table.set_index(["role_model", "language"])
    for model in dict.fromkeys(table["role_model"]):
        cells = []
        for c in cols:
            parts = []
            for lang in languages:
                v = idx[c].get((model, lang), np.nan)
                parts.append("n/a" if pd.isna(v) else f"{v:.1f}")
            cells.append("/".join(parts))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\nCells are {'/'.join(l.upper() for l in languages)}, 0-10.\n"


def win_rates(comparisons: pd.DataFrame) -> pd.DataFrame:
    """comparisons: rows agent_a, agent_b, winner ('a', 'b' or 'tie'). Returns, for each ordered
    pair (agent, opponent) that met, n, win, tie, loss as shares (Figure 3)."""
    need = {"agent_a", "agent_b", "winner"}
    if need - set(comparisons.columns):
        raise AnalysisInputError(f"comparisons lack columns {sorted(need - set(comparisons.columns))}")
    w = comparisons["winner"].astype(str).str.lower().str.strip()
    if not w.isin(["a", "b", "tie"]).all():
        raise AnalysisInputError(f"winner must be 'a', 'b' or 'tie', got {sorted(set(w) - {'a', 'b', 'tie'})}")
    rows = []
    for (a, b), g in comparisons.assign(winner=w).groupby(["agent_a", "agent_b"]):
        for agent, opp, mine, theirs in ((a, b, "a", "b"), (b, a, "b", "a")):
            rows.append({"agent": agent, "opponent": opp, "n": len(g), "win": (g["winner"] == mine).sum(),
                         "tie": (g["winner"] == "tie").sum(), "loss": (g["winner"] == theirs).sum()})
    df = pd.DataFrame(rows, columns=["agent", "opponent", "n", "win", "tie", "loss"])
    if df.empty:
        return df
    df = df.groupby(["agent", "opponent"], as_index=False)[["n", "win", "tie", "loss"]].sum()
    for c in ("win", "tie", "loss"):
        df[c] = df[c] / df["n"]
    return df


# --- automatic fidelity checks --------------------------------------------------------------
# The lexicons (BREAK_PATTERNS, the affect words, negativity) are imported from sim above, and stay
# importable from here.


def _seeker_turns(dialogues: pd.DataFrame):
    need = {"dialogue_id", "turns"}
    if need - set(dialogues.columns):
        raise AnalysisInputError(f"dialogue frame lacks columns {sorted(need - set(dialogues.columns))}")
    # Plain dicts per row (iterrows builds a Series per row: seconds at thousands of dialogues).
    cols = [c for c in ("dialogue_id", "turns", "status", "role_model", "language") if c in dialogues.columns]
    for values in zip(*(dialogues[c] for c in cols)):
        d = dict(zip(cols, values))
        if d.get("status", "ok") != "ok":
            continue
        seeker = [t for t in d["turns"] if t["speaker"] == "seeker"]
        for r, t in enumerate(seeker, start=1):
            yield d, r, t["text"] or ""


def character_breaks(dialogues: pd.DataFrame) -> pd.DataFrame:
    """One row per seeker turn that breaks character: dialogue_id, role_model, language, round,
    pattern (the first rule that matched), excerpt."""
    rows = []
    for d, r, text in _seeker_turns(dialogues):
        for rx in _BREAK_RE:
            m = rx.search(text)
            if m:
                lo = max(0, m.start() - 40)
                rows.append({"dialogue_id": d["dialogue_id"], "role_model": d.get("role_model"),
                             "language": d.get("language"), "round": r, "pattern": rx.pattern,
                             "excerpt": text[lo:m.end() + 40]})
                break
    return pd.DataFrame(rows, columns=["dialogue_id", "role_model", "language", "round", "pattern", "excerpt"])


def emotion_trajectories(dialogues: pd.DataFrame) -> pd.DataFrame:
    """Negativity of each seeker turn: dialogue_id, role_model, language, round, negativity."""
    rows = [{"dialogue_id": d["dialogue_id"], "role_model": d.get("role_model"), "language": d.get("language"),
             "round": r, "negativity": negativity(text)} for d, r, text in _seeker_turns(dialogues)]
    return pd.DataFrame(rows, columns=["dialogue_id", "role_model", "language", "round", "negativity"])


def _slopes(g: pd.DataFrame) -> pd.Series:
    """Least-squares slope of negativity over rounds per dialogue (NaN under 2 rounds), from
    grouped sums: one pass, not a regression per dialogue."""
    x, y = g["round"].astype(float), g["negativity"].astype(float)
    sums = pd.DataFrame({"dialogue_id": g["dialogue_id"], "n": 1.0, "x": x, "y": y, "xy": x * y, "xx": x * x}) \
        .groupby("dialogue_id").sum()
    den = sums["n"] * sums["xx"] - sums["x"] ** 2
    num = sums["n"] * sums["xy"] - sums["x"] * sums["y"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (num / den).where((sums["n"] >= 2) & (den != 0))


def fidelity_summary(dialogues: pd.DataFrame, by_round: int = 3) -> pd.DataFrame:
    """Per role model and language: n_dialogues, seeker_turns, break_rate (share of dialogues
    with a character break), breaks_per_turn, mean_slope (negativity per round; < 0 = the
    seeker cheers up), n_negative_start (round-1 negativity > 0), negativity_gone_share (of
    those, share with negativity <= 0 at round `by_round`), note."""
    traj = emotion_trajectories(dialogues)
    breaks = character_breaks(dialogues)
    if traj.empty:
        return pd.DataFrame(columns=["role_model", "language", "n_dialogues", "seeker_turns", "break_rate",
                                     "breaks_per_turn", "mean_slope", "n_negative_start", "negativity_gone_share",
                                     "note"])
    traj = traj.assign(role_model=traj["role_model"].fillna("unknown"), language=traj["language"].fillna("unknown"))
    breaks = breaks.assign(role_model=breaks["role_model"].fillna("unknown"), language=breaks["language"].fillna("unknown"))
    rows = []
    for (model, lang), g in traj.groupby(["role_model", "language"]):
        per = g.groupby("dialogue_id")
        slopes = _slopes(g)
        first = g[g["round"] == 1].set_index("dialogue_id")["negativity"]
        at = g[g["round"] == by_round].set_index("dialogue_id")["negativity"]
        start_neg = first[first > 0].index
        reached = [d for d in start_neg if d in at.index]
        b = breaks[(breaks["role_model"] == model) & (breaks["language"] == lang)]
        notes = []
        if not reached:
            notes.append(f"no dialogue starts negative and reaches round {by_round}")
        if slopes.notna().sum() == 0:
            notes.append("fewer than 2 seeker rounds: no slope")
        rows.append({
            "role_model": model, "language": lang, "n_dialogues": int(per.ngroups), "seeker_turns": int(len(g)),
            "break_rate": float(b["dialogue_id"].nunique() / per.ngroups),
            "breaks_per_turn": float(len(b) / len(g)),
            "mean_slope": float(slopes.mean()) if slopes.notna().any() else float("nan"),
            "n_negative_start": int(len(reached)),
            "negativity_gone_share": float((at[reached] <= 0).mean()) if reached else float("nan"),
            "note": "; ".join(notes),
        })
    return pd.DataFrame(rows)


def fidelity_summary_of_runs(run_dirs: list[str]) -> list[dict]:
    """`esc-eval analysis roleplay-fidelity`: fidelity_summary of the runs' dialogues, as JSON records."""
    import json

    from esc_eval.analysis.results.loaders import load_dialogues

    return json.loads(fidelity_summary(load_dialogues(run_dirs)).to_json(orient="records"))
