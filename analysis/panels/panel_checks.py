"""The planted-truth checks of the judge panel's verdicts (analysis/checks; `esc-eval bench validity`):
its agreement (alpha's interval and "the judge that disagrees most", agreement.py) and a panel judge's
self-preference (its own-family offset against the panel's other judges, judge_boards.py), read from
the duo scenario's panel of three planted judges as the report runs the panel (panel_tables.py)."""
from __future__ import annotations

import numpy as np

from esc_eval.analysis.checks.registry import (DUO_FAMILIES, DUO_PANEL, PLANTED, Outcome, PlantedRuns, VerdictCheck,
                                               register_check, within)
from esc_eval.analysis.panels.agreement import ALPHA_BOOT, alpha_from_coincidence
from esc_eval.analysis.panels.panel_tables import analyse_panel
from esc_eval.analysis.results.leaderboard import planted_scores
from esc_eval.analysis.results.loaders import load_manifests
from esc_eval.sim.judging.dimensions import TABLE_SCALE

BIG = 1e12  # the population as counts: alpha_from_coincidence's (n - 1) / n is then 1 to 12 places


def _true_alpha(r: PlantedRuns) -> float:
    """The panel's alpha in the population: alpha of the planted judges' population coincidence matrix
    (truth.py's panel_coincidence, exact)."""
    return float(alpha_from_coincidence(np.asarray(r.truth["panel_coincidence"], dtype=float) * BIG))


def _panel(r: PlantedRuns):
    """The panel analysis as the report runs it (alpha's resamples at most ALPHA_BOOT), once per replicate."""
    return r.once("panel", lambda: analyse_panel(planted_scores(r, None), load_manifests(r.path("runs")), judges=list(DUO_PANEL),
                                                 families=DUO_FAMILIES, n_boot=r.n_boot,
                                                 alpha_boot=min(r.n_boot, ALPHA_BOOT), seed=r.seed))


def agreement_check(r: PlantedRuns) -> Outcome:
    a = _panel(r)
    row = a.agreement["alpha"].set_index("dimension").loc["all"]
    truth = _true_alpha(r)
    worst = a.agreement["most_disagreeing"]  # named only when its gain's bound is above 0 (agreement.py)
    named = worst is not None
    flag = (named and worst["judge"] == "J3") if r.variant == PLANTED else named
    return Outcome(flag=flag, covered=within(row["alpha_lo"], row["alpha_hi"], truth))


def self_preference_check(r: PlantedRuns) -> Outcome:
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
    "panel-agreement", "Panel agreement and its outlier", "esc_eval.analysis.panels.agreement.panel_agreement",
    ("section:panels", "command:analysis panel"), "duo", "outlier", agreement_check,
    flag="a judge named as standing out (its leave-one-out alpha gain's one-sided bootstrap bound above 0 at 5%, "
         "Bonferroni over the judges; the planted noisy judge, when planted)",
    interval="Krippendorff's alpha (all seven), 95% CI"))
register_check(VerdictCheck(
    "self-preference", "Self-preference (panel)", "esc_eval.analysis.panels.judge_boards.judge_boards",
    ("section:panels", "command:analysis panel"), "duo", "self_preference", self_preference_check,
    flag="the judge favours / disfavours its family (own-family offset against the panel's other judges, 95% CI "
         "excludes 0; only then is the panel's rank change without it flagged)",
    interval="the own-family offset x25, 95% cluster-bootstrap-t CI over cards"))
