"""Each judge's leaderboard next to the panel's, and self-preference.

Boards: per language, each target's Average (mean of the seven x 25) with its bootstrap CI under
every judge of the panel and under the panel (build_leaderboard, so the numbers are Table 2's; under
the mean rules each judge's on the values the panel averaged: expected scores where it gave P(0..4)), its
rank per judge (1 = highest; ties share their average rank), and Kendall's tau-b (scipy) of each
judge's ranking against the panel's.

Self-preference: a target whose family (base-model lineage) is a judge's family may be favoured by
that judge. Such a (target, judge) is marked, with the judge's rank of the target, the panel's rank,
and the panel's rank without that judge (the same rule over the others; point ranks), and the change
(without - with: positive = the target falls when its relative leaves the panel). Whether the judge
favours its relative is a test at 5% per marked pair: its own-family offset (self_preference.py's
difference in differences: the judge's Average minus the panel's other judges' on the relative's
dialogues, minus the same on targets of other families, x25) with its 95% cluster-bootstrap-t interval
over cards; verdict "favours its family" / "disfavours its family" when the interval excludes 0, else
"no evidence". The rank change is flagged (`rank_change_flagged`) only when the verdict is one of the
two and the rank changes: a rank change alone is chance where two targets are close (the validity
bench measured it raised in 25-42% of runs with nothing planted, docs/guides/validity.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from esc_eval.analysis.panels.panel_scores import aggregate, latest_rows
from esc_eval.analysis.panels.panel_spec import PanelSpec
from esc_eval.analysis.panels.self_preference import CHECK_PANEL, dialogue_averages, size_self_preference
from esc_eval.analysis.judgments.expected_scores import expected_scores
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.rank_stats import kendall_tau, ranks

BOARD_COLUMNS = ["language", "model", "judge", "n_dialogues", "Average", "Average_lo", "Average_hi", "rank",
                 "self_preference"]
TAU_COLUMNS = ["language", "judge", "n_models", "kendall_tau"]
MEAN_RULES = ("mean", "trimmed_mean")
SELF_COLUMNS = ["language", "model", "judge", "family", "judge_average", "judge_rank", "panel_average", "panel_rank",
                "panel_average_without", "panel_rank_without", "rank_change", "estimate", "ci_low", "ci_high",
                "verdict", "rank_change_flagged", "note"]
FLAGGED = ("favours its family", "disfavours its family")  # the verdicts that flag a rank change


@dataclass
class JudgeBoards:
    """The boards (BOARD_COLUMNS), the taus against the panel (TAU_COLUMNS), the self-preference marks (SELF_COLUMNS)."""

    boards: pd.DataFrame
    taus: pd.DataFrame
    self_preference: pd.DataFrame


def rank_desc(values: pd.Series) -> pd.Series:
    """Rank 1 = the highest value; ties share their average rank; NaN last (results/rank_stats.py)."""
    return pd.Series(ranks(values.to_numpy(float)), index=values.index)


def _averages(scores: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    lb = build_leaderboard(scores, n_boot=n_boot, seed=seed)
    return lb[["language", "model", "judge", "n_dialogues", "Average", "Average_lo", "Average_hi"]]


def self_preference_pairs(models: list[str], spec: PanelSpec, target_families: dict[str, str]) -> list[tuple[str, str, str]]:
    """(model, judge, family) for every target whose known family is a panel judge's known family."""
    return [(m, j.judge, j.family) for m in models for j in spec.judges
            if j.family and target_families.get(m) and str(target_families[m]).lower() == str(j.family).lower()]


def judge_boards(scores: pd.DataFrame, panel: pd.DataFrame, spec: PanelSpec, target_families: dict[str, str] | None = None,
                 n_boot: int = 1000, seed: int = 0) -> JudgeBoards:
    """The boards, taus and marks (module docstring) from the judges' rows (`scores`) and the panel's (`panel`)."""
    target_families = target_families or {}
    rows = latest_rows(scores, spec.names)
    shown = rows
    if spec.rule in MEAN_RULES:  # each judge's board on the values the panel averaged (expected where given)
        shown = expected_scores(rows).drop(columns="score_kind")
    board = _averages(pd.concat([shown, panel], ignore_index=True), n_boot, seed)
    board = board.assign(rank=board.groupby(["language", "judge"], group_keys=False)["Average"].apply(rank_desc))
    marks = self_preference_pairs(sorted(board["model"].unique()), spec, target_families)
    marked = {(m, j) for m, j, _ in marks}
    board["self_preference"] = [(m, j) in marked for m, j in zip(board["model"], board["judge"])]
    order = {j: i for i, j in enumerate([spec.judge_id, *spec.names])}
    board = board.assign(_o=board["judge"].map(order)).sort_values(["language", "_o", "rank", "model"], kind="stable")
    board = board.drop(columns="_o").reset_index(drop=True)[BOARD_COLUMNS]
    taus = []
    for language, g in board.groupby("language", sort=True):
        ref = g[g["judge"] == spec.judge_id].set_index("model")["Average"]
        for j in spec.names:
            mine = g[g["judge"] == j].set_index("model")["Average"]
            both = ref.index.intersection(mine.index)
            taus.append({"language": language, "judge": j, "n_models": int(len(both)),
                         "kendall_tau": kendall_tau(ref[both].to_numpy(), mine[both].to_numpy())})
    sized = _offsets(shown, spec, marks, target_families, n_boot, seed)
    return JudgeBoards(board, pd.DataFrame(taus, columns=TAU_COLUMNS), _self_preference(rows, board, spec, marks, sized))


def _offsets(shown: pd.DataFrame, spec: PanelSpec, marks, target_families: dict[str, str], n_boot: int,
             seed: int) -> dict[tuple[str, str, str], dict]:
    """(language, model, judge) -> the own-family offset against the panel's other judges not known to share
    the family (estimate, ci_low, ci_high, verdict, note: self_preference.size_self_preference)."""
    if not marks:
        return {}
    avg = dialogue_averages(shown)
    fams = {j.judge: j.family for j in spec.judges}
    out = {}
    for model, judge, family in marks:
        others = [j for j in spec.names if j != judge and str(fams.get(j) or "").lower() != family.lower()]
        for language in sorted(avg.loc[(avg["judge"] == judge) & (avg["target_model"] == model), "language"].unique()):
            a = avg[avg["language"] == language]
            mine = a[a["judge"] == judge].set_index("dialogue_id")
            if not others:
                out[(language, model, judge)] = {"verdict": "n/a", "note": "no other judge outside its family"}
                continue
            ref = a[a["judge"].isin(others)].groupby("dialogue_id")["value"].mean()
            r = size_self_preference(mine, ref, model, family, target_families, n_boot, seed, check=CHECK_PANEL)
            out[(language, model, judge)] = {**{k: r.get(k, float("nan")) for k in ("estimate", "ci_low", "ci_high")},
                                             "verdict": r["verdict"], "note": r.get("note", "")}
    return out


def _self_preference(rows: pd.DataFrame, board: pd.DataFrame, spec: PanelSpec, marks, sized: dict) -> pd.DataFrame:
    out = []
    for judge in dict.fromkeys(j for _, j, _ in marks):
        keep = [i for i, n in enumerate(spec.names) if n != judge]
        others = [spec.names[i] for i in keep]
        without = aggregate(rows, spec, others, np.asarray(spec.weights)[keep], spec.quorum).scores
        avg = _averages(without, 0, 0)
        avg = avg.assign(rank=avg.groupby("language", group_keys=False)["Average"].apply(rank_desc))
        avg = avg.set_index(["language", "model"])
        for model, _, family in [m for m in marks if m[1] == judge]:
            for language in sorted(board.loc[board["model"] == model, "language"].unique()):
                b = board[board["language"] == language].set_index(["model", "judge"])
                mine, pan = b.loc[(model, judge)] if (model, judge) in b.index else None, b.loc[(model, spec.judge_id)] \
                    if (model, spec.judge_id) in b.index else None
                w = avg.loc[(language, model)] if (language, model) in avg.index else None
                get = lambda r, c: float(r[c]) if r is not None else float("nan")  # noqa: E731
                out.append({"language": language, "model": model, "judge": judge, "family": family,
                            "judge_average": get(mine, "Average"), "judge_rank": get(mine, "rank"),
                            "panel_average": get(pan, "Average"), "panel_rank": get(pan, "rank"),
                            "panel_average_without": get(w, "Average"), "panel_rank_without": get(w, "rank"),
                            "rank_change": get(w, "rank") - get(pan, "rank")})
                test = sized.get((language, model, judge), {"verdict": "n/a", "note": "none of its dialogues scored by the judge"})
                out[-1].update({"estimate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), **test})
                change = out[-1]["rank_change"]
                out[-1]["rank_change_flagged"] = bool(out[-1]["verdict"] in FLAGGED and change == change and change != 0)
    return pd.DataFrame(out, columns=SELF_COLUMNS)
