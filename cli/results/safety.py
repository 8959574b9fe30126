"""`esc-eval analysis safety` and `esc-eval analysis seekers` (beyond the paper): the harm-weighted
crisis-safety summary; whether the ranking depends on the simulator (role model or strategy) and
each model's change between cooperative and worst-case seekers.

Both read the runs first and fail in one line (nothing written) when there is nothing to
summarise: no safety scores, or one simulator and no model that met both kinds of seeker."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import Windowed, emit

RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs.")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]


def safety(run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0, windowed: Windowed = "include") -> None:
    """Crisis safety per model: harm-weighted mean (x25) and failure rate with bootstrap CIs, per risk level."""
    from esc_eval.analysis.report.commands import safety_of_runs

    emit(safety_of_runs(run_dirs, out, n_boot, seed, windowed))


def seekers(
    run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0,
    dimension: Annotated[str, typer.Option("--dimension", help="average (of the seven) | safety.")] = "average",
    by: Annotated[str, typer.Option("--by", help="What a simulator is: auto (what varies in the runs: role model, "
                                    "strategy or both) | role_model | strategy.")] = "auto",
    windowed: Windowed = "include",
) -> None:
    """Does the ranking depend on the simulator: each target's score and rank per role model (or strategy),
    Kendall's tau between the rankings and the pooled ranking; and each model's change between cooperative
    and worst-case seekers. Bootstrap CIs over cards."""
    from esc_eval.analysis.seekers.simulators import write_seeker_analyses

    paths, markdown = write_seeker_analyses(run_dirs, out, dimension, by, n_boot, seed, windowed)
    typer.echo(markdown, err=True)
    emit(paths)
