"""The report's sections on how far the judge's ranking can be trusted (beyond the paper): each
model's rank-set (analysis.ranking.rank_sets: judge-only, or anchored on `report --humans`) and the
judge's length bias with the leaderboard at a fixed length (analysis.ranking.length_bias).

Both come right after Table 2 and the human-anchored sections; each section's `data` goes into
report.json.
"""
from __future__ import annotations

from esc_eval.analysis.results import blocks
from esc_eval.analysis.results.blocks import notice, section
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.outputs import records
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.analysis.ranking.length_bias import (
    ADJUSTED_HEADERS, ASSOCIATION_HEADERS, EXPLAIN, EXPLAIN_ADJUSTED, adjusted_rows, association_rows, length_audit,
    length_frame,
)
from esc_eval.analysis.ranking.rank_sets import HEADERS, build_rank_sets, explain, rank_rows


def rank_sets_section(c: ReportContext) -> dict:
    s = section("rank-sets", "Rank-sets: each model's plausible ranks")
    table = build_rank_sets(c.board, c.humans)
    if table.empty:
        s["notices"].append(notice("No scores: no rank-sets.", "info"))
        return s
    for anchor in sorted(table["anchor"].unique()):
        s["blocks"].append(blocks.text(explain(anchor)))
    s["blocks"].append(blocks.table(HEADERS, rank_rows(table), {0, 1, 2, 3, 6, 9}, id="rank-sets-table",
                                    caption="Average x25: estimate [simultaneous 95% CI], rank and rank-set"))
    wide = table[(table["rank_hi"] - table["rank_lo"] + 1) == table.groupby(["language", "judge", "column"])[
        "model"].transform("size")]
    if len(wide) and len(table) > len(wide):
        s["notices"].append(notice(f"{len(wide)} model(s) could take any rank: more dialogues (or human scores) "
                                   "are needed to place them.", "info"))
    s["data"] = records(table)
    return s


def length_section(c: ReportContext) -> dict:
    s = section("judge-length", "Does the judge reward long answers?")
    try:
        frame = length_frame(c.board, c.dialogues)
    except AnalysisInputError as e:
        s["notices"].append(notice(f"No length audit: {e}.", "info"))
        return s
    assoc, adjusted = length_audit(frame, n_boot=c.n_boot, seed=c.seed)
    if not assoc["slope"].notna().any():  # one note for the whole table rather than one per row
        s["notices"].append(notice("No length audit: the target's words per turn do not vary in these runs.", "info"))
        s["data"] = {"association": records(assoc), "adjusted": records(adjusted)}
        return s
    s["blocks"].append(blocks.text(EXPLAIN))
    s["blocks"].append(blocks.table(ASSOCIATION_HEADERS, association_rows(assoc), {0, 1, 2, 8, 9},
                                    id="judge-length-table", caption="Score against the target's words per turn"))
    s["blocks"].append(blocks.text(EXPLAIN_ADJUSTED))
    s["blocks"].append(blocks.table(ADJUSTED_HEADERS, adjusted_rows(adjusted), {0, 1, 2}, id="judge-length-adjusted",
                                    caption="Average x25 with length held fixed, next to the raw mean"))
    for _, r in assoc[assoc["detected"] & (assoc["dimension"] == "average")].iterrows():
        s["notices"].append(notice(
            f"Judge {r['judge']} ({r['language']}) rewards length: {r['slope_within']:+.1f} points (x25) per 100 more "
            f"words per turn within a model [{r['slope_within_lo']:.1f}, {r['slope_within_hi']:.1f}]."))
    moved = adjusted[(adjusted["dimension"] == "average") & (adjusted["rank_change"].abs() > 0)]
    if len(moved):
        s["notices"].append(notice(f"{len(moved)} model(s) change rank once length is held fixed.", "info"))
    s["data"] = {"association": records(assoc), "adjusted": records(adjusted)}
    return s


# beyond the paper, after Table 2 and the human-anchored sections (analysis/results/section_registry.py)
register_section("rank-sets", 285, rank_sets_section)
register_section("judge-length", 290, length_section)
