"""`esc-eval analysis length-bias` (beyond the paper): does the judge reward long answers, and does the
ranking hold with the target's length held fixed (analysis/ranking/length_bias.py)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import Windowed, emit

RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (with their dialogues).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]
Judge = Annotated[Optional[str], typer.Option("--judge", help="Only this judge's scores (default: each judge apart).")]


def length_bias(run_dirs: RunDirs, out: Out = None, judge: Judge = None, n_boot: NBoot = 1000, seed: Seed = 0,
                windowed: Windowed = "include") -> None:
    """Length bias per judge and dimension: Spearman's rho and the slope per 100 words of the target's
    answers, and the leaderboard with length held fixed (bootstrap CIs over dialogues): length_bias.md/.json."""
    from esc_eval.analysis.ranking.length_bias import length_bias_of_runs

    paths, markdown = length_bias_of_runs(run_dirs, out, judge, n_boot, seed, windowed)
    typer.echo(markdown, err=True)
    emit(paths)
