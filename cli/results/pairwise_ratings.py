"""`esc-eval analysis pairwise-ratings` (beyond the paper): Bradley-Terry ratings of the targets from a judge's
pairwise verdicts (`esc-eval pairwise`), the position-bias audit and the tau with the pointwise ranking.

Reads the runs first and fails in one line (nothing written) on bad input: no pairwise rows, a judge
or dimension not in them, fewer than 2 targets."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit


def pairwise(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders or storage URIs holding pairwise verdict rows.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Only this judge's verdicts (default: every judge, each apart).")] = None,
    dimension: Annotated[Optional[list[str]], typer.Option("--dimension", help="Only these dimensions (repeat the option; default: all).")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples of the cards for the intervals (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")] = None,
) -> None:
    """Pairwise ratings: Bradley-Terry on an Elo scale with bootstrap intervals over cards, position bias,
    Kendall's tau with the pointwise ranking; writes pairwise.md, pairwise.json and pairwise_ratings.csv."""
    from esc_eval.analysis.pairwise.pairwise_analysis import pairwise_of_runs

    markdown, paths = pairwise_of_runs(run_dirs, judge=judge, dimensions=dimension, n_boot=n_boot, seed=seed, out=out)
    typer.echo(markdown, err=True)
    emit(paths)
