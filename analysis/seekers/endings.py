"""How the dialogues ended, per target (the report's section, beyond the paper): the seeker ended it
helped (resolved) or gave up, it was still going at the round cap, or it outgrew a model's context,
with the round it ended in.

A dialogue ends before its cap only when its seeker ends it (runs made with `seeker_stop`,
sim/dialogue/seeker_stop.py) or its context is full (long runs), so the section appears when a run
was made with `seeker_stop` or a dialogue ended either way.
"""
from __future__ import annotations

import json

import pandas as pd

from esc_eval.analysis.results.blocks import pct, section, table, text
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.sim.dialogue.ending import AT_CAP, CONTEXT_FULL
from esc_eval.sim.dialogue.seeker_stop import END_REASONS

REASONS = (*END_REASONS, AT_CAP, CONTEXT_FULL)
TITLES = {"resolved": "Resolved", "gave_up": "Gave up", AT_CAP: "Still going at the cap", CONTEXT_FULL: "Context full"}
COLUMNS = ["language", "target_model", "n_dialogues", *REASONS, "resolved_share", "gave_up_share", "median_end_round",
           "round_cap"]


def ending_counts(dialogues: pd.DataFrame) -> pd.DataFrame:
    """COLUMNS per (language, target) over completed dialogues that record how they ended."""
    if dialogues.empty or "end_reason" not in dialogues.columns:
        return pd.DataFrame(columns=COLUMNS)
    done = dialogues[(dialogues["status"] == "ok") & dialogues["end_reason"].notna()]
    rows = []
    for (language, target), g in done.groupby(["language", "target_model"], sort=True):
        counts = g["end_reason"].value_counts()
        capped = g[g["end_reason"] == AT_CAP]["end_round"]
        rows.append({"language": language, "target_model": target, "n_dialogues": len(g),
                     **{r: int(counts.get(r, 0)) for r in REASONS},
                     "resolved_share": counts.get("resolved", 0) / len(g), "gave_up_share": counts.get("gave_up", 0) / len(g),
                     "median_end_round": float(g["end_round"].median()),
                     "round_cap": int(capped.max()) if len(capped) else None})
    return pd.DataFrame(rows, columns=COLUMNS)


def endings_section(dialogues: pd.DataFrame) -> dict:
    s = section("endings", "How the dialogues ended (beyond the paper)")
    counts = ending_counts(dialogues)
    s["blocks"].append(text("With `seeker_stop`, the simulated seeker may end the conversation itself: with "
                            "<END:resolved> when it feels helped, <END:gave_up> when it wants to leave "
                            "(sim/dialogue/seeker_stop.py). A dialogue it did not end was still going at the run's "
                            "round cap, or ended when its next call would not fit a model's context (context full). "
                            "Completed dialogues only."))
    if counts.empty:
        s["blocks"].append(text("No completed dialogue records how it ended (runs made before esc-eval recorded it)."))
        return s
    s["blocks"].append(table(["Language", "Target", "Dialogues", *[TITLES[r] for r in REASONS], "Resolved share",
                              "Gave-up share", "Median end round"],
                             [[r["language"], r["target_model"], r["n_dialogues"], *[r[x] for x in REASONS],
                               pct(r["resolved_share"]), pct(r["gave_up_share"]), r["median_end_round"]]
                              for _, r in counts.iterrows()], {0, 1}, caption="How the dialogues ended, per target",
                             id="endings"))
    s["data"] = {"counts": json.loads(counts.to_json(orient="records"))}
    return s


def has_endings(ctx: ReportContext) -> bool:
    """A run made with seeker_stop, or a dialogue its seeker ended or that outgrew the context."""
    made_with = any(((m or {}).get("simulation") or {}).get("inputs", {}).get("seeker_stop") for m in ctx.manifests.values())
    d = ctx.dialogues
    ended = not d.empty and "end_reason" in d.columns and d["end_reason"].isin((*END_REASONS, CONTEXT_FULL)).any()
    return bool(made_with or ended)


# beyond the paper: who ended each dialogue (analysis/results/section_registry.py)
register_section("endings", 950, lambda c: endings_section(c.dialogues), when=has_endings)
