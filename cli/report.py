"""`esc-eval report` and `esc-eval leaderboard`: the paper's Table 2 and the HTML/Markdown report.

Both group models (close / open / domain) by one rule, the model registry's
(`serve.registry.registry.model_groups`), which this layer passes into the analysis functions.
"""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit

# Strings, not Paths: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]
Panel = Annotated[Optional[str], typer.Option("--panel", help="Add the runs' judge panel as one more judge, its score per "
                                              "dialogue and dimension by this rule: mean | median | majority | "
                                              "trimmed_mean (the panel: the scoring's, else every judge; `analysis panel`).")]
Humans = Annotated[Optional[str], typer.Option("--humans", help="Human scores to anchor the means on (PPI): an annotate store (annotations.sqlite, or a run folder holding one), filled annotation sheets (a folder of annotate_*.csv or a CSV) or annotate export's table.")]
Study = Annotated[Optional[str], typer.Option("--study", help="Only this study of the annotate store (default: every study).")]
OneAnnotator = Annotated[bool, typer.Option("--allow-one-annotator", help="Accept human scores that all come from one annotator.")]
HumanSeekerFile = Annotated[Optional[str], typer.Option("--human-seekers", help="Real help-seekers' dialogues in ESConv's format: adds the section 'Is the simulated seeker like a person?' (esc-eval analysis fidelity without a judge).")]
ScoreKind = Annotated[str, typer.Option("--scores", help="label (the judge's most likely label, the paper's) | expected (sum of k x P(k) where the judge gave P(0..4)).")]


def check_rule(panel: Optional[str]) -> Optional[str]:
    """--panel's rule, checked at the door (None: no panel)."""
    from esc_eval.sim.judging.panel import PANEL_RULES

    if panel is not None and panel not in PANEL_RULES:
        raise typer.BadParameter(f"--panel {panel!r}: a rule is one of {', '.join(PANEL_RULES)}")
    return panel


def read_humans(humans: Optional[str], study: Optional[str], allow_one: bool):
    """The --humans source, read and checked at the door (None when not given)."""
    if humans is None:
        if study is not None:
            raise typer.BadParameter("--study needs --humans")
        return None
    from esc_eval.analysis.trust.human_scores import load_human_scores

    return load_human_scores(humans, study=study, allow_one_annotator=allow_one)


def registry_rule(models: list[str]) -> dict[str, str]:
    """The one grouping rule (Table 2's close / open / domain): the model registry's."""
    from esc_eval.serve.registry.registry import model_groups

    return model_groups(models)


def show_leaderboard(table, score_kind: str = "label", title: str = "", rank_sets=None) -> None:
    """The leaderboard as a terminal table (the CIs are in leaderboard.md); rank_sets: the table with
    analysis.trust.rank_sets.with_rank_sets's columns, shown in a Rank-set column."""
    from rich.table import Table

    from esc_eval.analysis.results.leaderboard import spoiled_cell
    from esc_eval.sim.judging.dimensions import DIMENSION_TITLES
    from esc_eval.sim.pool.progress import console

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
        from esc_eval.sim.pool.progress import console

        console.print(line, highlight=False, markup=False)


def show_anchored(anchored) -> None:
    """The human-anchored Average per model on the terminal (every column is in leaderboard_humans.md)."""
    from rich.table import Table

    from esc_eval.sim.pool.progress import console

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
    from esc_eval.cli.safety import show_safety
    from esc_eval.sim.pool.progress import console

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
                     panel: str | None = None):
    """The report's files (analysis/report/from_runs.py) and its leaderboard on the terminal; the paths."""
    from esc_eval.analysis.report.from_runs import write_report_files

    result = write_report_files(run_dirs, out, registry_rule, n_boot, seed, samples, humans, score_kind,
                                human_seekers=human_seekers, judge_note=judge_note, panel=check_rule(panel))
    show_leaderboard(result.table, score_kind)
    show_line(result.line)
    if result.anchored is not None:
        show_anchored(result.anchored)
    return result.paths


def leaderboard(
    run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0,
    by: Annotated[Optional[str], typer.Option(
        "--by", help="Split by a card attribute: category (Table 9's top level), category_2, category_3, language; or "
        "round (a folder from `score --by-round`).")] = None,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    exclude_spoiled: Annotated[bool, typer.Option(
        "--exclude-spoiled", help="Also the table without the dialogues the simulator spoiled, next to the one with "
        "them (leaderboard_without_spoiled.md/.csv).")] = False,
    panel: Panel = None,
    rank_sets: Annotated[bool, typer.Option(
        "--rank-sets", help="Each model's set of plausible ranks on the Average, all holding at once with 95% "
        "probability (leaderboard_rank_sets.md/.csv); judge-only, or anchored on --humans.")] = False,
) -> None:
    """The paper's Table 2: mean x 25 per dimension with bootstrap 95% CIs (leaderboard.md/.csv); with
    --humans also each model's human-scale mean by PPI (leaderboard_humans.md/.csv); with --rank-sets
    each model's rank-set (leaderboard_rank_sets.md/.csv)."""
    from esc_eval.analysis.report.from_runs import write_leaderboard_by_files, write_leaderboard_files
    from esc_eval.sim.pool.progress import console

    human = read_humans(humans, study, allow_one_annotator)
    extra: dict = {}  # --rank-sets: the sets, in the JSON beside the paths
    if by:
        if human is not None:
            raise typer.BadParameter("--by does not take --humans: anchor the whole leaderboard (without --by)")
        if exclude_spoiled:
            raise typer.BadParameter("--by does not take --exclude-spoiled: compare the whole leaderboard (without --by)")
        if rank_sets:
            raise typer.BadParameter("--by does not take --rank-sets: rank the whole leaderboard (without --by)")
        result = write_leaderboard_by_files(run_dirs, out, by, registry_rule, n_boot, seed, scores)
        for value, table in result.by.items():
            console.print(f"[bold]{result.table.columns[0]}: {value}[/bold] ({int(table['n_dialogues'].sum())} dialogues)")
            show_leaderboard(table, scores)
        show_line(result.line)
    else:
        result = write_leaderboard_files(run_dirs, out, registry_rule, n_boot, seed, human, scores, exclude_spoiled,
                                         panel=check_rule(panel))
        ranked = None
        if rank_sets:
            from esc_eval.analysis.report.from_runs import board_scores
            from esc_eval.analysis.results.outputs import records
            from esc_eval.analysis.trust.rank_sets import build_rank_sets, with_rank_sets, write_rank_sets
            from esc_eval.sim.runs.storage import join_location

            sets = build_rank_sets(board_scores(run_dirs, scores), human)
            result.paths.update({f"rank_sets_{k}": v for k, v in write_rank_sets(
                sets, result.table, out or join_location(run_dirs[0], "report")).items()})
            ranked, extra = with_rank_sets(result.table, sets), {"rank_sets": records(sets)}
        show_leaderboard_files(result, scores, rank_sets=ranked)
    emit({**{k: str(v) for k, v in result.paths.items()}, **extra})


def report(
    run_dirs: RunDirs,
    out: Out = None,
    n_boot: NBoot = 1000,
    seed: Seed = 0,
    samples: Annotated[int, typer.Option("--samples", help="Sample dialogues shown in the report.")] = 3,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    human_seekers: HumanSeekerFile = None, panel: Panel = None,
) -> None:
    """Leaderboard with CIs, plots, failures, throughput, samples: report.html + report.md; with
    --humans also the human-anchored leaderboard (PPI) and each judge's calibration; with
    --human-seekers the simulated seekers next to real ones."""
    human = read_humans(humans, study, allow_one_annotator)
    seekers = None
    if human_seekers is not None:  # a bad file: one line, before anything is written
        from esc_eval.analysis.seekers.esconv import read_human_seekers

        seekers = read_human_seekers(human_seekers)
    emit({k: str(v) for k, v in write_report_for(run_dirs, out, n_boot, seed, samples, human, scores,
                                                 human_seekers=seekers, panel=panel).items()})
