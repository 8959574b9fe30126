"""The report's section on a judge panel ("panels", right after Table 2 and the human-score sections):
when the scores hold two or more judges of the seven dimensions, the panel (the manifests' panel, else
every judge with weight 1, the rule `mean`), the judges' agreement, each judge's leaderboard beside the
panel's, and self-preference. Its data (panel_tables.panel_data) goes into report.json under "panels"."""
from __future__ import annotations

from esc_eval.analysis.panels.agreement import ALPHA_BOOT
from esc_eval.analysis.panels.panel_spec import score_judges
from esc_eval.analysis.panels.panel_tables import analyse_panel, intro, notes, panel_data, tables
from esc_eval.analysis.results.blocks import Section, notice, section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.section_registry import ReportContext, register_section


def panels_section(ctx: ReportContext) -> Section:
    s = section("panels", "Judge panel: agreement, each judge's ranking, self-preference")
    try:
        a = analyse_panel(ctx.scores, ctx.manifests, n_boot=ctx.n_boot, alpha_boot=min(ctx.n_boot, ALPHA_BOOT),
                          seed=ctx.seed)
    except AnalysisInputError as e:  # e.g. the manifest's panel names a judge whose rows are absent
        s["notices"].append(notice(f"No panel: {e}.", "info"))
        return s
    s["blocks"].append(text(intro(a) + " `esc-eval analysis panel` picks the judges, weights, rule and quorum."))
    s["notices"] += [notice(n, "info") for n in notes(a)]
    for i, (caption, headers, rows, text_cols) in enumerate(tables(a)):
        s["blocks"].append(table(headers, rows, text_cols, caption=caption, id=f"panels-{i}"))
    s["data"] = panel_data(a)
    return s


def has_panel(ctx: ReportContext) -> bool:
    """Two or more judges (not recalibrated copies, not panels) scored the seven dimensions."""
    return len(score_judges(ctx.scores)) >= 2


# after Table 2 and the human-score sections, before the categories (analysis/results/section_registry.py)
register_section("panels", 270, panels_section, when=has_panel)
