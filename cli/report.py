"""`esc-eval report` and `esc-eval leaderboard`: the paper's Table 2 and the HTML/Markdown report.

Both group models (close / open / domain) by one rule, the model registry's
(`serve.registry.model_groups`), which this layer passes into the analysis functions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit
from esc_eval.sim.storage import OutputFolder, join_location

# Strings, not Paths: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]


def registry_groups(models) -> dict[str, str]:
    """The one grouping rule: the registry's Table 2 group of every model it knows."""
    from esc_eval.serve.registry import model_groups

    return model_groups(sorted({str(m) for m in models}))


def show_leaderboard(table) -> None:
    """The leaderboard as a terminal table (the CIs are in leaderboard.md)."""
    from rich.table import Table

    from esc_eval.sim.dimensions import DIMENSION_TITLES
    from esc_eval.sim.progress import console

    cols = [*DIMENSION_TITLES.values(), "Average"]
    t = Table(title="Leaderboard: mean score x 25 (CIs in leaderboard.md)", pad_edge=False)
    for c in ["Lang", "Group", "Model", "n", *[c[:3] for c in cols], "Fail"]:
        t.add_column(c, justify="right" if c not in ("Lang", "Group", "Model") else "left", overflow="fold")
    for _, r in table.iterrows():
        vals = ["-" if r[c] != r[c] else f"{r[c]:.1f}" for c in cols]  # NaN -> "-"
        t.add_row(r["language"], r["group"], r["model"], str(r["n_dialogues"]), *vals, f"{r['parse_failure_rate']:.0%}")
    console.print(t)


def write_leaderboard_for(run_dirs: list[str], out: Optional[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Path]:
    from esc_eval.analysis import build_leaderboard, load_scores, write_leaderboard

    scores = load_scores(run_dirs)
    table = build_leaderboard(scores, groups=registry_groups(scores["target_model"].dropna()), n_boot=n_boot, seed=seed)
    from esc_eval.analysis import load_manifests
    from esc_eval.analysis.usage_report import add_usage_columns

    paths = write_leaderboard(add_usage_columns(table, load_manifests(run_dirs)), out or join_location(run_dirs[0], "report"))
    show_leaderboard(table)
    from esc_eval.cli.safety import write_safety_for

    # beyond the paper, apart from Table 2: safety.md/.csv beside it when the runs hold safety scores
    paths.update({f"safety_{k}": v for k, v in write_safety_for(run_dirs, out, n_boot, seed, required=False).items()})
    return paths


def write_report_for(run_dirs: list[str], out: Optional[str], n_boot: int = 1000, seed: int = 0,
                     samples: int = 3) -> dict[str, Path]:
    """The report (which writes the leaderboard once) and the leaderboard on the terminal."""
    from esc_eval.analysis import build_leaderboard, load_scores
    from esc_eval.analysis.report import write_report

    scores = load_scores(run_dirs)
    groups = registry_groups(scores["target_model"].dropna())
    table = build_leaderboard(scores, groups=groups, n_boot=n_boot, seed=seed)
    paths = write_report(run_dirs, out, groups=groups, leaderboard=table, n_boot=n_boot, seed=seed, n_samples=samples)
    show_leaderboard(table)
    return paths


def write_leaderboard_by_for(run_dirs: list[str], out: Optional[str], by: str, n_boot: int = 1000,
                             seed: int = 0) -> dict[str, Path]:
    """Table 2 per value of a card attribute: leaderboard_by_<by>.md/.csv, and one terminal table per value."""
    from esc_eval.analysis import build_leaderboard_by, leaderboard_by_markdown, load_dialogues, load_scores
    from esc_eval.sim.progress import console

    scores = load_scores(run_dirs)
    table = build_leaderboard_by(scores, load_dialogues(run_dirs), by,
                                 groups=registry_groups(scores["target_model"].dropna()), n_boot=n_boot, seed=seed)
    with OutputFolder(out or join_location(run_dirs[0], "report")) as folder:
        md, csv = folder / f"leaderboard_by_{by}.md", folder / f"leaderboard_by_{by}.csv"
        md.write_text(f"# Leaderboard by {by} (mean score x 25, bootstrap 95% CI)\n\n" + leaderboard_by_markdown(table, by),
                      encoding="utf-8")
        table.to_csv(csv, index=False)
        paths = folder.finals({"markdown": md, "csv": csv})
    name = table.columns[0]
    for value, g in table.groupby(name, sort=True):
        console.print(f"[bold]{name}: {value}[/bold] ({int(g['n_dialogues'].sum())} dialogues)")
        show_leaderboard(g)
    return paths


def leaderboard(
    run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0,
    by: Annotated[Optional[str], typer.Option(
        "--by", help="Split by a card attribute: category (Table 9's top level), category_2, category_3, language.")] = None,
) -> None:
    """The paper's Table 2: mean x 25 per dimension with bootstrap 95% CIs (leaderboard.md/.csv)."""
    if by:
        emit({k: str(v) for k, v in write_leaderboard_by_for(run_dirs, out, by, n_boot, seed).items()})
        return
    emit({k: str(v) for k, v in write_leaderboard_for(run_dirs, out, n_boot, seed).items()})


def report(
    run_dirs: RunDirs,
    out: Out = None,
    n_boot: NBoot = 1000,
    seed: Seed = 0,
    samples: Annotated[int, typer.Option("--samples", help="Sample dialogues shown in the report.")] = 3,
) -> None:
    """Leaderboard with CIs, plots, failures, throughput, samples: report.html + report.md."""
    emit({k: str(v) for k, v in write_report_for(run_dirs, out, n_boot, seed, samples).items()})
