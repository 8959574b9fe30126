"""Checks held here until their analyses declare their own (their rooms are being reworked:
Table 2 and its loaders, the rank-sets and the length audit, the judge panel). Each is
registered under the id its analysis will keep, so the analysis's own `register_check` replaces it.

  leaderboard-ci   Table 2's Average [95% CI] (analysis/results/leaderboard.py build_leaderboard)
  rank-sets        each model's rank-set, simultaneous 95% (analysis/ranking/rank_sets.py)
  length-bias      "rewards length" and the within-model slope's CI (analysis/ranking/length_bias.py)
  panel-agreement  the panel's alpha [95% CI] and "the judge that disagrees most" (analysis/panels)
  self-preference  a panel judge's own-family offset against the others, which flags the rank change of
                   its relative without it (analysis/panels/judge_boards.py)
  self-preference-one  one judge of a target's family sized against people's scores
                   (analysis/panels/self_preference.py; held here: it reads people's scores through
                   analysis/trust, a sibling of panels that panels may not import)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from esc_eval.analysis.checks.registry import (PLANTED, Outcome, PlantedRuns, VerdictCheck, held, register_check,
                                               true_ranks, within)
from esc_eval.analysis.results.loaders import load_dialogues, load_manifests, load_scores
from esc_eval.sim.judging.dimensions import TABLE_SCALE

JUDGE = "J2"  # the duo's judge the single-judge checks read (sim/bench/planted/scenarios.py)
PANEL = ["J1", "J2", "J3"]


def _scores(r: PlantedRuns, judge: str | None = JUDGE) -> pd.DataFrame:
    s = r.once("scores", lambda: load_scores(r.path("runs")))
    return s[s["judge"] == judge] if judge else s[s["judge"].isin(PANEL)]


def leaderboard_ci(r: PlantedRuns) -> Outcome:
    from esc_eval.analysis.results.leaderboard import build_leaderboard

    lb = r.once(f"leaderboard:{JUDGE}", lambda: build_leaderboard(_scores(r), n_boot=r.n_boot, seed=r.seed))
    lb = lb.set_index("model")
    truth = r.truth["judge_mean"][JUDGE]
    return Outcome(intervals=held([within(lb.loc[m, "Average_lo"], lb.loc[m, "Average_hi"], TABLE_SCALE * truth[m])
                                   for m in truth if m in lb.index]))


def rank_sets(r: PlantedRuns) -> Outcome:
    from esc_eval.analysis.ranking.rank_sets import build_rank_sets

    table = build_rank_sets(_scores(r)).set_index("model")
    truth = true_ranks(r.truth["judge_mean"][JUDGE])
    covered = all(table.loc[m, "rank_lo"] <= truth[m] <= table.loc[m, "rank_hi"] for m in truth)
    ordered = bool(table.loc["A", "rank_hi"] < table.loc["B", "rank_lo"])  # A placed above B, sets apart
    apart = ordered or bool(table.loc["B", "rank_hi"] < table.loc["A", "rank_lo"])
    return Outcome(flag=ordered if r.variant == PLANTED else apart, covered=covered)


def length_bias(r: PlantedRuns) -> Outcome:
    from esc_eval.analysis.ranking.length_bias import length_audit, length_frame, words_per_turn

    dialogues = load_dialogues(r.path("runs"))
    frame = length_frame(_scores(r), dialogues)
    assoc, _ = length_audit(frame[frame["dimension"] == "average"], n_boot=r.n_boot, seed=r.seed)  # the row it flags on
    row = assoc[assoc["dimension"] == "average"].iloc[0]
    # The truth per 100 of the analysis's words per turn: the planted slope per word of a reply, times
    # how a reply's words move words per turn in these dialogues (the opener counts as a turn).
    words = pd.Series(r.truth["reply_words"], dtype=float)
    wpt = words_per_turn(dialogues).reindex(words.index)
    by = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")["target_model"].reindex(words.index)
    frame = pd.DataFrame({"w": words, "wpt": wpt, "model": by}).dropna()
    dev = frame.groupby("model")[["w", "wpt"]].transform(lambda x: x - x.mean())
    per_wpt = float((dev["w"] * dev["wpt"]).sum() / (dev["wpt"] ** 2).sum())
    truth = r.truth["length_slope"][JUDGE] * per_wpt * 100 * TABLE_SCALE
    covered = within(row["slope_within_lo"], row["slope_within_hi"], truth)
    return Outcome(flag=bool(row["detected"]) if np.isfinite(row["slope_within_lo"]) else None, covered=covered)


_ALPHA: dict[str, float] = {}


def _true_alpha(r: PlantedRuns) -> float:
    """The panel's alpha in the population: the analysis's own alpha of a large draw of the planted
    judges' labels (one per variant: what is planted does not change with the replicate)."""
    from esc_eval.analysis.panels.agreement import alpha_ordinal

    if r.variant not in _ALPHA:
        _ALPHA[r.variant] = alpha_ordinal(np.asarray(r.truth["samples"]["panel_labels"], dtype=float))
    return _ALPHA[r.variant]


def _panel(r: PlantedRuns):
    """The panel analysis as the report runs it (alpha's resamples at most 200), once per replicate."""
    from esc_eval.analysis.panels.panel_tables import analyse_panel

    return r.once("panel", lambda: analyse_panel(_scores(r, None), load_manifests(r.path("runs")), judges=PANEL,
                                                 families={"A": "a", "B": "b"}, n_boot=r.n_boot,
                                                 alpha_boot=min(r.n_boot, 200), seed=r.seed))


def panel_agreement(r: PlantedRuns) -> Outcome:
    a = _panel(r)
    row = a.agreement["alpha"].set_index("dimension").loc["all"]
    truth = _true_alpha(r)
    worst = a.agreement["most_disagreeing"]  # named only when its gain's bound is above 0 (agreement.py)
    named = worst is not None
    flag = (named and worst["judge"] == "J3") if r.variant == PLANTED else named
    return Outcome(flag=flag, covered=within(row["alpha_lo"], row["alpha_hi"], truth))


def self_preference(r: PlantedRuns) -> Outcome:
    """J1 (family b) in the panel: the verdict on its own-family offset against J2 and J3 (what flags the rank
    change, judge_boards.py), its interval against the planted difference in differences."""
    a = _panel(r)
    sp = a.boards.self_preference
    mine = sp[(sp["judge"] == "J1") & (sp["model"] == "B")]
    if mine.empty:
        return Outcome()
    row = mine.iloc[0]
    # the panel's rule here is the mean, which reads each judge's expected score from its P(0..4), not its label
    jm = r.truth["judge_expected"] if a.spec.rule in ("mean", "trimmed_mean") else r.truth["judge_mean"]
    rest = lambda m: (jm["J2"][m] + jm["J3"][m]) / 2  # noqa: E731
    truth = TABLE_SCALE * ((jm["J1"]["B"] - rest("B")) - (jm["J1"]["A"] - rest("A")))
    covered = within(row["ci_low"], row["ci_high"], truth)
    if row["verdict"] not in ("favours its family", "disfavours its family", "no evidence"):
        return Outcome(covered=covered)
    flag = row["verdict"] == "favours its family" if r.variant == PLANTED else row["verdict"] != "no evidence"
    return Outcome(flag=flag, covered=covered)


register_check(VerdictCheck(
    "leaderboard-ci", "Table 2's intervals", "esc_eval.analysis.results.leaderboard.build_leaderboard",
    ("section:leaderboard", "section:by-category", "command:leaderboard"),
    "duo", "quality_gap", leaderboard_ci, interval="each target's Average x25, 95% bootstrap CI over cards"))
register_check(VerdictCheck(
    "rank-sets", "Rank-sets (judge-only)", "esc_eval.analysis.ranking.rank_sets.build_rank_sets",
    ("section:rank-sets",), "duo", "quality_gap", rank_sets,
    flag="the two targets' rank-sets apart (an order claimed)", interval="every target's true rank in its set, at once"))
register_check(VerdictCheck(
    "length-bias", "Length bias of the judge", "esc_eval.analysis.ranking.length_bias.length_audit",
    ("section:judge-length", "command:analysis length-bias"), "duo", "length", length_bias,
    flag="the judge rewards length (Average: within-model slope's CI excludes 0)",
    interval="the within-model slope per 100 words x25, 95% CI"))
register_check(VerdictCheck(
    "panel-agreement", "Panel agreement and its outlier", "esc_eval.analysis.panels.agreement.panel_agreement",
    ("section:panels", "command:analysis panel"), "duo", "outlier", panel_agreement,
    flag="a judge named as standing out (its leave-one-out alpha gain's one-sided bootstrap bound above 0 at 5%, "
         "Bonferroni over the judges; the planted noisy judge, when planted)",
    interval="Krippendorff's alpha (all seven), 95% CI"))
register_check(VerdictCheck(
    "self-preference", "Self-preference (panel)", "esc_eval.analysis.panels.judge_boards.judge_boards",
    ("section:panels", "command:analysis panel"), "duo", "self_preference", self_preference,
    flag="the judge favours / disfavours its family (own-family offset against the panel's other judges, 95% CI "
         "excludes 0; only then is the panel's rank change without it flagged)",
    interval="the own-family offset x25, 95% cluster-bootstrap-t CI over cards"))


def self_preference_one(r: PlantedRuns) -> Outcome:
    """The duo's judge J1 (family b) alone, as a lab with one judge of its target's family runs it, sized
    against people's scores of the same dialogues; the truth: J1's planted gap to people on B (its own
    family) minus that on A."""
    from esc_eval.analysis.panels.self_preference import PEOPLE, self_preference
    from esc_eval.analysis.trust.human_scores import human_scores_of

    marks = self_preference(_scores(r, "J1"), load_manifests(r.path("runs")),
                            r.once("humans", lambda: human_scores_of(r.path("humans"))), families={"A": "a", "B": "b"},
                            n_boot=r.n_boot, seed=r.seed)
    row = marks[(marks["model"] == "B") & (marks["reference"] == PEOPLE)]
    if row.empty:
        return Outcome()
    row = row.iloc[0]
    jm, people = r.truth["judge_mean"]["J1"], r.truth["people_mean"]
    truth = TABLE_SCALE * ((jm["B"] - people["B"]) - (jm["A"] - people["A"]))
    covered = within(row["ci_low"], row["ci_high"], truth)
    if row["verdict"] not in ("favours its family", "disfavours its family", "no evidence"):
        return Outcome(covered=covered)
    flag = row["verdict"] == "favours its family" if r.variant == PLANTED else row["verdict"] != "no evidence"
    return Outcome(flag=flag, covered=covered)


register_check(VerdictCheck(
    "self-preference-one", "Self-preference of one judge (against people)",
    "esc_eval.analysis.panels.self_preference.self_preference", ("section:self-preference",), "duo",
    "self_preference", self_preference_one,
    flag="favours / disfavours its family (difference in differences against people, 95% CI excludes 0)",
    interval="the self-preference x25, 95% bootstrap-t CI over cards"))
