"""The terminal's side of the commands that show a leaderboard (report, leaderboard, demo): Table 2
as a rich table, the lines beside it, and the report written with its leaderboard shown."""
from __future__ import annotations

from typing import Optional

import typer


def check_rule(panel: Optional[str]) -> Optional[str]:
    """--panel's rule, checked at the door (None: no panel)."""
    from esc_eval.sim.judging.panel import PANEL_RULES

    if panel is not None and panel not in PANEL_RULES:
        raise typer.BadParameter(f"--panel {panel!r}: a rule is one of {', '.join(PANEL_RULES)}")
    return panel


def registry_rule(models: list[str]) -> dict[str, str]:
    """The one grouping rule (Table 2's close / open / domain): the model registry's."""
    from esc_eval.serve.registry.registry import model_groups

    return model_groups(models)


def show_leaderboard(table, score_kind: str = "label", title: str = "", rank_sets=None) -> None:
    """The leaderboard as a terminal table (the CIs are in leaderboard.md); rank_sets: the table with
    analysis.ranking.rank_sets.with_rank_sets's columns, shown in a Rank-set column."""
    from rich.table import Table

    from esc_eval.analysis.results.leaderboard import spoiled_cell
    from esc_eval.sim.judging.dimensions import DIMENSION_TITLES
    from esc_eval.sim.driver.progress import console

    cols = [*DIMENSION_TITLES.values(), "Average"]
    what = "mean expected score" if score_kind == "expected" else "mean score"
    t = Table(title=title or f"Leaderboard: {what} x 25 (CIs in leaderboard.md)", pad_edge=False)
    ranked = rank_sets is not None  # the Average's rank-set beside each row (leaderboard_rank_sets.md says how sure)
    table = rank_sets if ranked else table
    judges = "judge" in table.columns and table["judge"].nunique() > 1  # a panel, or runs scored by several judges
    for c in ["Lang", "Group", "Model", *(["Judge"] if judges else []), "n", "Spoiled", *[c[:3] for c in cols], "Fail",
              *(["Rank-set"] if ranked else [])]:
        t.add_column(c, justify="right" if c not in ("Lang", "Group", "Model", "Judge") else "left", overflow="fold")
    for _, r in table.iterrows():
        vals = ["-" if r[c] != r[c] else f"{r[c]:.1f}" for c in cols]  # NaN -> "-"
        t.add_row(r["language"], r["group"], r["model"], *([str(r["judge"])] if judges else []), str(r["n_dialogues"]),
                  spoiled_cell(r), *vals, f"{r['parse_failure_rate']:.0%}",
                  *([f"{r['rank_set']} ({r['rank_anchor']})"] if ranked else []))
    console.print(t)


def show_line(line: str) -> None:
    """A line beside the terminal's table (e.g. that the judge has no human scores beside it)."""
    if line:
        from esc_eval.sim.driver.progress import console

        console.print(line, highlight=False, markup=False)


def show_anchored(anchored) -> None:
    """The human-anchored Average per model on the terminal (every column is in leaderboard_humans.md)."""
    from rich.table import Table

    from esc_eval.sim.driver.progress import console

    t = Table(title="Average on the human scale (PPI, 95% CI) next to the judge's", pad_edge=False)
    for c in ["Lang", "Model", "Judge", "Human scores", "Judge mean [CI]", "PPI [CI]", "Humans only [CI]"]:
        t.add_column(c, justify="left" if c in ("Lang", "Model", "Judge") else "right", overflow="fold")

    def ci(v, lo, hi) -> str:
        return "-" if v != v else (f"{v:.1f}" if lo != lo else f"{v:.1f} [{lo:.1f}, {hi:.1f}]")  # NaN -> "-"

    for _, r in anchored[anchored["column"] == "Average"].iterrows():
        t.add_row(r["language"], r["model"], r["judge"], str(r["n_human"]), ci(r["judge_mean"], r["judge_lo"], r["judge_hi"]),
                  ci(r["ppi"], r["ppi_lo"], r["ppi_hi"]), ci(r["human_mean"], r["human_lo"], r["human_hi"]))
    console.print(t)


def show_leaderboard_files(result, score_kind: str, rank_sets=None) -> None:
    """A leaderboard's tables on the terminal: Table 2 (with its rank-sets when given), the line beside it,
    the table without the spoiled dialogues, the human-anchored means, the safety summary (each where the
    result holds it)."""
    from esc_eval.sim.driver.progress import console

    show_leaderboard(result.table, score_kind, rank_sets=rank_sets)
    show_line(result.line)
    if result.kept is not None:
        show_leaderboard(result.kept, score_kind, title="Leaderboard without the dialogues the simulator spoiled")
        console.print(result.excluded)
    if result.anchored is not None:
        show_anchored(result.anchored)
    if result.safety is not None:
        show_safety(result.safety)


def write_report_for(run_dirs: list[str], out: Optional[str], n_boot: int = 1000, seed: int = 0, samples: int = 3,
                     humans=None, score_kind: str = "label", human_seekers=None, judge_note: str | None = None,
                     panel: str | None = None, embedding=None):
    """The report's files (analysis/report/from_runs.py) and its leaderboard on the terminal; the paths."""
    from esc_eval.analysis.report.from_runs import write_report_files

    result = write_report_files(run_dirs, out, registry_rule, n_boot, seed, samples, humans, score_kind,
                                human_seekers=human_seekers, judge_note=judge_note, panel=check_rule(panel),
                                embedding=embedding)
    show_leaderboard(result.table, score_kind)
    show_line(result.line)
    if result.anchored is not None:
        show_anchored(result.anchored)
    return result.paths




def show_safety(table) -> None:
    """The harm-weighted summary as a terminal table (the per-level means are in safety.md)."""
    from rich.table import Table

    from esc_eval.analysis.safety.crisis import pct_ci
    from esc_eval.sim.driver.progress import console

    t = Table(title="Crisis safety (x25; harm-weighted, apart from the seven dimensions)", pad_edge=False)
    for c in ("Model", "Judge", "n", "Safety [95% CI]", "Unweighted", "Failures (weighted)"):
        t.add_column(c, justify="left" if c in ("Model", "Judge") else "right", overflow="fold")
    for _, r in table.iterrows():
        ci = "n/a" if r["safety"] != r["safety"] else f"{r['safety']:.1f}" + (
            "" if r["safety_lo"] != r["safety_lo"] else f" [{r['safety_lo']:.1f}, {r['safety_hi']:.1f}]")
        t.add_row(str(r["model"]), str(r["judge"]), str(r["n_scored"]), ci,
                  "-" if r["unweighted"] != r["unweighted"] else f"{r['unweighted']:.1f}",
                  pct_ci(r["failure_rate"], r["failure_rate_lo"], r["failure_rate_hi"]))
    console.print(t)


def read_humans(humans: Optional[str], study: Optional[str], allow_one: bool):
    """The --humans source, read and checked at the door (None when not given)."""
    if humans is None:
        if study is not None:
            raise typer.BadParameter("--study needs --humans")
        return None
    from esc_eval.analysis.trust.human_scores import load_human_scores

    return load_human_scores(humans, study=study, allow_one_annotator=allow_one)
