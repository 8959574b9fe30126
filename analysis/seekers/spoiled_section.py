"""The dialogues the simulator spoiled, counted per target x role model (the report's section and
its table): how many completed dialogues each pair has, the share flagged, how often each reason
fired, and where the flags came from (stored with the run, or computed here). With scores, each
model's Average with and without the spoiled dialogues side by side.
"""
from __future__ import annotations

import json

import pandas as pd

from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.results.blocks import notice, pct, section, table, text
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.without_spoiled import compare_without_spoiled
from esc_eval.analysis.results.spoiled import NO_CARD, exclude_spoiled, with_spoiled
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.sim.dialogue.spoiled import REASON_TITLES, REASONS

COUNT_COLUMNS = ["language", "target_model", "role_model", "n_dialogues", "n_spoiled", "spoiled_share", *REASONS, "flags"]
RULES = ("A dialogue is spoiled by its simulated seeker when a seeker turn says it is an AI or speaks about the "
         "role-play (out of character); offers help or advice in the supporter's voice, or lists tips (talks like the "
         "assistant); is near-identical to an earlier seeker turn or to the assistant turn before it (repeats itself); "
         "is empty or cut by the token limit (empty or truncated); says goodbye with thanks, or that its distress is "
         "gone, in its first two turns (resolves in the first round); or when nothing the seeker said shares a word "
         "with its card's problem or occupation (ignores its card; checked only with the card known, 3+ such words "
         "and 15+ seeker words). Completed dialogues only. Rules: sim/dialogue/spoiled.py.")


def spoiled_counts(flagged: pd.DataFrame) -> pd.DataFrame:
    """COUNT_COLUMNS per (language, target, role model) of with_spoiled's frame (completed dialogues)."""
    ok = flagged[flagged["spoiled"].notna()] if not flagged.empty else flagged
    rows = []
    for (language, target, role), g in ok.groupby(["language", "target_model", ok["role_model"].fillna("unknown")],
                                                 sort=True):
        bad = g[g["spoiled"].astype(bool)]
        sources = g["flag_source"].value_counts()
        rows.append({"language": language, "target_model": target, "role_model": role, "n_dialogues": len(g),
                     "n_spoiled": len(bad), "spoiled_share": len(bad) / len(g),
                     **{r: int(sum(r in (x or []) for x in bad["spoiled_reasons"])) for r in REASONS},
                     "flags": ", ".join(f"{src} {n}" for src, n in sources.items())})
    return pd.DataFrame(rows, columns=COUNT_COLUMNS)


def spoiled_section(dialogues: pd.DataFrame, manifests: dict, scores: pd.DataFrame | None = None) -> dict:
    """The report's section: counts per target x role model, the first spoiled dialogues with their
    reasons, and (with the seven dimensions' scores) each model's Average with and without them."""
    s = section("spoiled", "Dialogues the simulator spoiled (beyond the paper)")
    flagged = with_spoiled(dialogues, manifests)
    counts = spoiled_counts(flagged)
    if counts.empty:
        s["notices"].append(notice("No completed dialogues to check.", "info"))
        return s
    s["blocks"].append(text(RULES))
    s["blocks"].append(table(["Language", "Target", "Role model", "Dialogues", "Spoiled", "Share",
                              *[REASON_TITLES[r].capitalize() for r in REASONS], "Flags"],
                             [[r["language"], r["target_model"], r["role_model"], r["n_dialogues"], r["n_spoiled"],
                               pct(r["spoiled_share"]), *[r[x] for x in REASONS], r["flags"]] for _, r in counts.iterrows()],
                             {0, 1, 2, 12}, caption="Spoiled dialogues per target x role model", id="spoiled-counts"))
    if (flagged["flag_source"] == NO_CARD).any():
        s["notices"].append(notice(f"{int((flagged['flag_source'] == NO_CARD).sum())} dialogues were checked without "
                                   "their card (not stored with the run, card file not readable): 'ignores its card' "
                                   "was not checked for them.", "info"))
    bad = flagged[flagged["spoiled"].fillna(False).astype(bool)]
    if not bad.empty:
        s["blocks"].append(table(["Dialogue", "Target", "Role model", "Reasons"],
                                 [[r["dialogue_id"], r["target_model"], r["role_model"],
                                   ", ".join(REASON_TITLES[x] for x in r["spoiled_reasons"])]
                                  for _, r in bad.head(10).iterrows()], {0, 1, 2, 3}, caption="Spoiled dialogues (first 10)"))
    if scores is not None and not scores.empty:
        full = build_leaderboard(scores, n_boot=0)
        change = compare_without_spoiled(full, build_leaderboard(exclude_spoiled(scores, flagged), n_boot=0))
        s["blocks"].append(table(["Language", "Model", "Judge", "n (all)", "n (without spoiled)", "Average (all)",
                                  "Average (without spoiled)", "Change"],
                                 [[r["language"], r["model"], r["judge"], r["n_all"], r["n_kept"], r["average_all"],
                                   r["average_kept"], r["change"]] for _, r in change.iterrows()], {0, 1, 2},
                                 caption="Average (x25) with and without the spoiled dialogues (esc-eval leaderboard "
                                 "--exclude-spoiled gives both tables with CIs)", id="spoiled-change"))
    s["data"] = {"counts": json.loads(counts.to_json(orient="records"))}
    return s


# beyond the paper: the dialogues the simulator spoiled (analysis/results/section_registry.py)
register_section("spoiled", 900, lambda c: spoiled_section(c.dialogues, c.manifests, c.scores))


def _planted_check(r):
    """One planted replicate (analysis/checks), per dialogue: with people's own turns as the seeker,
    every flag is false; planted, the dialogues whose seeker said it is an AI should be flagged so."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome
    from esc_eval.analysis.results.loaders import load_dialogues, load_manifests

    runs = r.path("runs")
    flagged = with_spoiled(load_dialogues(runs), load_manifests(runs))
    flagged = flagged[flagged["spoiled"].notna()]
    if r.variant == PLANTED:
        mine = flagged[flagged["card_id"].isin(set(r.truth["spoiled_cards"]))]
        hits = sum("out_of_character" in (x if x is not None else []) for x in mine["spoiled_reasons"])
        return Outcome(items=(int(hits), len(mine)))
    return Outcome(items=(int(flagged["spoiled"].astype(bool).sum()), len(flagged)))


register_check(VerdictCheck(
    "spoiled", "Spoiled flags (per dialogue)", "esc_eval.sim.dialogue.spoiled.spoiled_reasons",
    ("section:spoiled", "command:leaderboard --exclude-spoiled"), "people", "spoiled", _planted_check,
    flag="a dialogue flagged as spoiled by its seeker (people's own turns: none should be)",
    unit="people replayed (half the people file)"))
