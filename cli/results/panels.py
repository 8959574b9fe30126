"""`esc-eval analysis panel`: several judges' scores of the same dialogues read as a panel: the
panel's score per dialogue and dimension by a rule, the judges' agreement, each judge's leaderboard
beside the panel's, and self-preference (a judge of a target's own family). Bad input (a judge named
twice or absent from the rows, a weight not positive, fewer than 2 judges) fails in one line before
anything is written."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import Windowed, emit

RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs holding several judges' score rows.")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]


def panel(
    run_dirs: RunDirs,
    rule: Annotated[Optional[str], typer.Option("--rule", help="mean | median | majority | trimmed_mean (default: the "
                                                "manifest's panel rule, else mean).")] = None,
    judge: Annotated[Optional[list[str]], typer.Option("--judge", help="A judge of the panel, as in the score rows "
                                                       "(repeat; default: the manifest's panel, else every judge).")] = None,
    weight: Annotated[Optional[list[str]], typer.Option("--weight", help="ID=W: a judge's weight, W > 0 (repeat; "
                                                        "default: the manifest's, else 1).")] = None,
    family: Annotated[Optional[list[str]], typer.Option("--family", help="MODEL=FAM: the base-model family of a target "
                                                        "or a judge, for self-preference (repeat; adds to the manifests').")] = None,
    min_judges: Annotated[Optional[int], typer.Option("--min-judges", help="Judges an item needs for a panel score "
                                                      "(default: every judge of the panel).")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the leaderboards' CIs (0 = none).")] = 1000,
    alpha_boot: Annotated[int, typer.Option("--alpha-boot", help="Bootstrap resamples for alpha's CI (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstraps.")] = 0,
    out: Out = None,
    windowed: Windowed = "include",
) -> None:
    """A judge panel: the panel's scores by a rule, Krippendorff's alpha and pairwise kappa between the judges,
    each judge's leaderboard and ranking beside the panel's (Kendall's tau), and self-preference marks.
    Writes panel.md, panel.json and the panel's score rows (panel_scores.csv, panel_scores.parquet)."""
    from esc_eval.analysis.panels.panel_runs import panel_command

    markdown, paths = panel_command(run_dirs, out, judges=judge, weights=weight, families=family, rule=rule,
                                    min_judges=min_judges, n_boot=n_boot, alpha_boot=alpha_boot, seed=seed,
                                    windowed=windowed)
    typer.echo(markdown, err=True)
    emit(paths)
