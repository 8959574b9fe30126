"""`esc-eval analysis pairwise-ratings` (beyond the paper): Bradley-Terry ratings of the targets from a judge's
pairwise verdicts (`esc-eval pairwise`), the position-bias audit and the tau with the pointwise ranking.

Reads the runs first and fails in one line (nothing written) on bad input: no pairwise rows, a judge
or dimension not in them, fewer than 2 targets."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit
from esc_eval.sim.runs.storage import join_location


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
    from esc_eval.analysis.pairwise.pairwise_analysis import analyse_pairwise, pairwise_markdown, write_pairwise
    from esc_eval.analysis.results.loaders import load_pairwise, load_scores

    result = analyse_pairwise(load_pairwise(run_dirs), load_scores(run_dirs), judge=judge, dimensions=dimension,
                              n_boot=n_boot, seed=seed)
    typer.echo(pairwise_markdown(result), err=True)
    emit(write_pairwise(result, out or join_location(run_dirs[0], "report")))
