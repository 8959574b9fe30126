"""The planted-truth check of one judge's self-preference sized against people (analysis/panels/
self_preference.py, the report's self-preference section): a lab with one judge of its target's family.
It lives here, not beside the analysis, because it reads people's scores through analysis/trust, a
sibling of panels that panels may not import; ranking is the lowest room above both."""
from __future__ import annotations

from esc_eval.analysis.checks.registry import (DUO_FAMILIES, PLANTED, Outcome, PlantedRuns, VerdictCheck, register_check,
                                               within)
from esc_eval.analysis.panels.self_preference import PEOPLE, self_preference
from esc_eval.analysis.results.leaderboard import planted_scores
from esc_eval.analysis.results.loaders import load_manifests
from esc_eval.analysis.trust.human_scores import human_scores_of
from esc_eval.sim.judging.dimensions import TABLE_SCALE


def _planted_check(r: PlantedRuns) -> Outcome:
    """The duo's judge J1 (family b) alone, as a lab with one judge of its target's family runs it, sized
    against people's scores of the same dialogues; the truth: J1's planted gap to people on B (its own
    family) minus that on A."""
    marks = self_preference(planted_scores(r, "J1"), load_manifests(r.path("runs")),
                            r.once("humans", lambda: human_scores_of(r.path("humans"))), families=DUO_FAMILIES,
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
    "self_preference", _planted_check,
    flag="favours / disfavours its family (difference in differences against people, 95% CI excludes 0)",
    interval="the self-preference x25, 95% bootstrap-t CI over cards"))
