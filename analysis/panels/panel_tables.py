"""The panel analysis in one call (panel scores, agreement, boards, self-preference) and its tables as
(caption, headers, rows): the CLI's Markdown and the report's section are made from the same tables,
and report.json / panel.json from `panel_data`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from esc_eval.analysis.panels.agreement import ALPHA_BOOT, panel_agreement
from esc_eval.analysis.panels.judge_boards import JudgeBoards, judge_boards
from esc_eval.analysis.panels.panel_scores import PanelScores, panel_scores
from esc_eval.analysis.panels.panel_spec import PanelSpec, panel_spec, target_families
from esc_eval.analysis.results.blocks import cell
from esc_eval.analysis.results.leaderboard import format_cell
from esc_eval.analysis.results.outputs import markdown_table
from esc_eval.sim.judging.dimensions import dimension_title

NOT_COMPARABLE = ("A panel's scores are not comparable with one judge's: they are another judge (a combination), "
                  "so compare models under the same panel, never a panel's number with a single judge's.")
RULE_TEXT = {"mean": "the weighted mean of the judges' expected scores (labels where a judge gave no P(0..4))",
             "trimmed_mean": "the weighted mean after dropping the highest and the lowest judge (3+ judges on an item)",
             "median": "the weighted low median of the judges' labels",
             "majority": "the label with the most weight (a tie goes to the lower label)"}


@dataclass
class PanelAnalysis:
    spec: PanelSpec
    panel: PanelScores
    agreement: dict
    boards: JudgeBoards
    target_families: dict


def analyse_panel(scores: pd.DataFrame, manifests: Mapping[str, dict] | None = None, *, judges: list[str] | None = None,
                  weights: Mapping[str, float] | None = None, families: Mapping[str, str] | None = None,
                  rule: str | None = None, min_judges: int | None = None, n_boot: int = 1000, alpha_boot: int = ALPHA_BOOT,
                  seed: int = 0) -> PanelAnalysis:
    """Everything the panel command and section show; bad input fails (one line) before anything is computed."""
    spec = panel_spec(scores, manifests, judges=judges, weights=weights, families=families, rule=rule,
                      min_judges=min_judges)
    panel = panel_scores(scores, spec)
    fams = target_families(manifests, families)
    return PanelAnalysis(spec, panel, panel_agreement(scores, spec, n_boot=alpha_boot, seed=seed),
                         judge_boards(scores, panel.scores, spec, fams, n_boot=n_boot, seed=seed), fams)


def _f(v, digits: int = 3) -> str:
    return "n/a" if v is None or v != v else f"{v:.{digits}f}"


def intro(a: PanelAnalysis) -> str:
    judges = ", ".join(f"{j.judge} (weight {j.weight:g}{', family ' + j.family if j.family else ''})" for j in a.spec.judges)
    cov = a.panel.coverage.set_index("dimension").loc["all"]
    left = (f" {int(cov['n_left_out'])} of {int(cov['n_items'])} dialogue x dimension items had fewer than "
            f"{a.spec.quorum} judges' usable scores and are left out (the coverage table)." if cov["n_left_out"] else "")
    return (f"Panel `{a.spec.judge_id}` of {len(a.spec.judges)} judges: {judges}. Rule: {RULE_TEXT[a.spec.rule]}; "
            f"an item needs {a.spec.quorum} judge(s).{left} {NOT_COMPARABLE}")


def tables(a: PanelAnalysis) -> list[tuple[str, list[str], list[list], set[int]]]:
    """(caption, headers, rows, text columns) of every table, in the order shown."""
    judges = a.spec.names
    out = []
    cov = a.panel.coverage
    out.append(("Coverage: items (dialogue x dimension), scored by the panel, left out, and each judge's missing items",
                ["Dimension", "Items", "Scored", "Left out", *[f"Missing: {j}" for j in judges]],
                [[_title(r["dimension"]), r["n_items"], r["n_scored"], r["n_left_out"], *[r[f"missing:{j}"] for j in judges]]
                 for _, r in cov.iterrows()], {0}))
    ag = a.agreement
    out.append(("Agreement between the judges: Krippendorff's alpha (ordinal) [95% bootstrap CI over cards] and "
                "the mean pairwise kappa (quadratic)", ["Dimension", "Dialogues", "Pairable items", "Alpha", "Mean kappa", "Note"],
                [[_title(r["dimension"]), r["n_dialogues"], r["n_pairable"], _ci(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
                  _f(r["mean_kappa"]), r["note"]] for _, r in ag["alpha"].iterrows()], {0, 5}))
    pairs = ag["pairs"]
    out.append(("Quadratic-weighted kappa per judge pair", ["Pair", *[_title(d) for d in dict.fromkeys(pairs["dimension"])]],
                [[f"{x} / {y}", *[_f(v) for v in g["kappa"]]] for (x, y), g in pairs.groupby(["judge_a", "judge_b"], sort=False)],
                {0}))
    if len(ag["outliers"]):
        out.append(("Each judge left out: the pooled alpha without it, its change with the change's one-sided lower "
                    "bound (5% over the judges, Bonferroni; t times the sd of a bootstrap over cards), whether it stands out (bound "
                    "above 0), and its mean kappa with the others",
                    ["Judge", "Alpha without", "Change", "Lower bound", "Stands out", "Mean kappa with the others"],
                    [[r["judge"], _f(r["alpha_without"]), _signed(r["alpha_change"]), _signed(r["change_lo"]),
                      "yes" if r["stands_out"] else "no", _f(r["mean_kappa_with_others"])]
                     for _, r in ag["outliers"].iterrows()], {0, 4}))
    b = a.boards.boards
    for language, g in b.groupby("language", sort=True):
        cols = [a.spec.judge_id, *judges]
        rows = []
        for model in g[g["judge"] == a.spec.judge_id]["model"].tolist() + sorted(set(g["model"]) - set(
                g[g["judge"] == a.spec.judge_id]["model"])):
            row = [model]
            for j in cols:
                r = g[(g["model"] == model) & (g["judge"] == j)]
                row.append("n/a" if r.empty else f"{format_cell(r['Average'].iloc[0], r['Average_lo'].iloc[0], r['Average_hi'].iloc[0])}"
                           f" (#{r['rank'].iloc[0]:g})" + (" *" if r["self_preference"].iloc[0] else ""))
            rows.append(row)
        taus = a.boards.taus[a.boards.taus["language"] == language].set_index("judge")["kendall_tau"]
        rows.append(["Kendall's tau with the panel", "", *[_f(taus.get(j)) for j in judges]])
        out.append((f"Average (x25) [95% CI] (#rank) per judge, {language}; * = the judge shares the target's family",
                    ["Model", *cols], rows, {0}))
    sp = a.boards.self_preference
    if len(sp):
        out.append(("Self-preference: a target of a judge's family, the judge's own-family offset against the panel's "
                    "other judges (x25, 95% cluster-bootstrap CI over cards; a test at 5% per pair) and the panel's "
                    "rank without that judge (a rank change counts only with a verdict that excludes 0)",
                    ["Language", "Model", "Judge", "Family", "Judge's Average (#rank)", "Panel (#rank)",
                     "Panel without the judge (#rank)", "Rank change", "Own-family offset [95% CI]", "Verdict"],
                    [[r["language"], r["model"], r["judge"], r["family"], f"{_f(r['judge_average'], 2)} (#{_rank(r['judge_rank'])})",
                      f"{_f(r['panel_average'], 2)} (#{_rank(r['panel_rank'])})",
                      f"{_f(r['panel_average_without'], 2)} (#{_rank(r['panel_rank_without'])})",
                      f"{r['rank_change']:+g}" if r["rank_change"] == r["rank_change"] else "n/a",
                      _ci(r["estimate"], r["ci_low"], r["ci_high"]), r["verdict"]] for _, r in sp.iterrows()],
                    {0, 1, 2, 3, 9}))
    return out


def notes(a: PanelAnalysis) -> list[str]:
    """The lines beside the tables: who disagrees most, self-preference found or not."""
    out = []
    worst = a.agreement["most_disagreeing"]
    if worst is not None:
        out.append(f"The judge that stands out: {worst['judge']} (the pooled alpha rises by "
                   f"{worst['alpha_change']:+.3f} to {worst['alpha_without']:.3f} without it, one-sided bound "
                   f"{worst['change_lo']:+.3f} > 0 at 5% over the judges; its mean kappa with the others "
                   f"{_f(worst['mean_kappa_with_others'])}).")
    elif a.agreement["note"]:
        out.append(a.agreement["note"] + ".")
    sp = a.boards.self_preference
    if len(sp):
        for (judge, family), g in sp.groupby(["judge", "family"], sort=False):
            out.append(f"Self-preference risk: judge {judge} (family {family}) scores its relatives "
                       f"{', '.join(sorted(set(g['model'])))}; the panel's ranking without it is shown beside.")
            for _, r in g.iterrows():
                out.append(_self_preference_line(r))
    elif not a.target_families or not any(j.family for j in a.spec.judges):
        out.append("Families unknown (no families in the manifests, no --family): self-preference not checked.")
    else:
        out.append("No target shares a judge's family: no self-preference to mark.")
    return out


def _self_preference_line(r) -> str:
    """The verdict of one marked (target, judge): a rank change is reported as the judge's doing only with a
    verdict whose interval excludes 0."""
    who = f"{r['judge']} on {r['model']} ({r['language']})"
    change = f"{r['rank_change']:+g}" if r["rank_change"] == r["rank_change"] else "n/a"
    if r["verdict"] not in ("favours its family", "disfavours its family", "no evidence"):
        return f"Self-preference of {who}: not tested ({r['note'] or r['verdict']}); rank change without it {change}."
    size = f"own-family offset {_ci(r['estimate'], r['ci_low'], r['ci_high'])} x25"
    if r["verdict"] == "no evidence":
        return (f"No evidence that {who} favours its family ({size}, 95% CI across 0); the panel's rank change "
                f"without it ({change}) is not attributed to self-preference.")
    return (f"Self-preference: {who} {r['verdict']} ({size}, 95% CI excludes 0); the panel's rank of "
            f"{r['model']} changes by {change} without it" + (" (flagged)." if r["rank_change_flagged"] else "."))


def panel_markdown(a: PanelAnalysis) -> str:
    parts = ["# Judge panel", "", intro(a), ""] + [f"- {n}" for n in notes(a)] + [""]
    for caption, headers, rows, _ in tables(a):
        parts += [f"**{caption}**", "", markdown_table(headers, [[cell(c) for c in r] for r in rows])]
    return "\n".join(parts)


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records", force_ascii=False, default_handler=str))


def panel_data(a: PanelAnalysis) -> dict:
    """What panel.json and report.json hold."""
    worst = a.agreement["most_disagreeing"]
    return {"judge": a.spec.judge_id, "rule": a.spec.rule, "min_judges": a.spec.quorum,
            "judges": [{"judge": j.judge, "weight": j.weight, "family": j.family, "model": j.model} for j in a.spec.judges],
            "target_families": a.target_families, "coverage": _records(a.panel.coverage),
            "alpha": _records(a.agreement["alpha"]), "pairs": _records(a.agreement["pairs"]),
            "outliers": _records(a.agreement["outliers"]),
            "most_disagreeing": json.loads(json.dumps(worst, default=float)) if worst else None,
            "boards": _records(a.boards.boards), "kendall_tau": _records(a.boards.taus),
            "self_preference": _records(a.boards.self_preference), "notes": notes(a)}


def _title(dimension: str) -> str:
    return "All (seven pooled)" if dimension == "all" else dimension_title(dimension)


def _ci(v, lo, hi) -> str:
    if v != v:
        return "n/a"
    return f"{v:.3f}" + ("" if lo != lo else f" [{lo:.3f}, {hi:.3f}]")


def _signed(v) -> str:
    return "n/a" if v is None or v != v else f"{v:+.3f}"


def _rank(v) -> str:
    return "n/a" if v is None or v != v else f"{v:g}"
