"""The terminal's side of the commands that show a leaderboard (leaderboard, report, demo, analysis
safety): Table 2 as a rich table, the lines beside it, the human-anchored means, the safety summary.
The files say everything these show (leaderboard.md with its CIs, leaderboard_humans.md, safety.md);
the terminal gets the short view, on the one console of esc-eval (sim/console.py: stderr)."""
from __future__ import annotations

from rich.table import Table

from esc_eval.sim.console import console


def show_leaderboard(table, score_kind: str = "label", title: str = "", rank_sets=None) -> None:
    """The leaderboard as a terminal table (the CIs are in leaderboard.md); rank_sets: the table with
    analysis.ranking.rank_sets.with_rank_sets's columns, shown in a Rank-set column."""
    from esc_eval.analysis.results.leaderboard import spoiled_cell
    from esc_eval.sim.judging.dimensions import DIMENSION_TITLES

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
        console.print(line, highlight=False, markup=False)


def show_anchored(anchored) -> None:
    """The human-anchored Average per model on the terminal (every column is in leaderboard_humans.md)."""
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
    """A leaderboard's tables on the terminal (analysis/report/from_runs.py LeaderboardFiles): Table 2 (with
    its rank-sets when given), the line beside it, the table without the spoiled dialogues, the
    human-anchored means, the safety summary (each where the result holds it)."""
    show_leaderboard(result.table, score_kind, rank_sets=rank_sets)
    show_line(result.line)
    show_line(result.windowed)
    show_line(result.self_preference)
    if result.kept is not None:
        show_leaderboard(result.kept, score_kind, title="Leaderboard without the dialogues the simulator spoiled")
        console.print(result.excluded)
    if result.anchored is not None:
        show_anchored(result.anchored)
    if result.safety is not None:
        show_safety(result.safety)


def show_safety(table) -> None:
    """The harm-weighted summary as a terminal table (the per-level means are in safety.md)."""
    from esc_eval.analysis.safety.crisis import pct_ci

    emerging = "emerging_responded" in table.columns  # risk that emerged mid-conversation: its column too
    t = Table(title="Crisis safety (x25; harm-weighted, apart from the seven dimensions)", pad_edge=False)
    for c in ("Model", "Judge", "n", "Safety [95% CI]", "Unweighted", "Failures (weighted)",
              *(["Responded after risk emerged"] if emerging else [])):
        t.add_column(c, justify="left" if c in ("Model", "Judge") else "right", overflow="fold")
    for _, r in table.iterrows():
        ci = "n/a" if r["safety"] != r["safety"] else f"{r['safety']:.1f}" + (
            "" if r["safety_lo"] != r["safety_lo"] else f" [{r['safety_lo']:.1f}, {r['safety_hi']:.1f}]")
        t.add_row(str(r["model"]), str(r["judge"]), str(r["n_scored"]), ci,
                  "-" if r["unweighted"] != r["unweighted"] else f"{r['unweighted']:.1f}",
                  pct_ci(r["failure_rate"], r["failure_rate_lo"], r["failure_rate_hi"]),
                  *([pct_ci(r["emerging_responded"], r["emerging_responded_lo"], r["emerging_responded_hi"])]
                    if emerging else []))
    console.print(t)


__all__ = ["show_anchored", "show_leaderboard", "show_leaderboard_files", "show_line", "show_safety"]
