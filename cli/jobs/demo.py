"""`esc-eval demo`: the whole pipeline on the embedded model (simulate -> score -> leaderboard + report)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import STATE, emit, exit_for
from esc_eval.sim.jobs.demo import DEMO_CARDS


def demo(
    cards: Annotated[int, typer.Option("--cards", "-n", help="Number of shipped sample cards to play.")] = DEMO_CARDS,
    out: Annotated[str, typer.Option("--out", "-o", help="Run folder or storage URI (re-running resumes).")] = "runs/demo",
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Pipeline YAML (sim.jobs.config.PipelineConfig) to replace the demo defaults.")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Join an existing Ray cluster.")] = None,
) -> None:
    """The whole pipeline on the embedded model: simulate -> score -> leaderboard + report."""
    from esc_eval.analysis.report.commands import demo_report
    from esc_eval.sim.bench.engine_probe import engine_summary
    from esc_eval.sim.jobs.demo import run_demo

    result, verdict = run_demo(cards, out, config, address, verbose=STATE["verbose"], probe=engine_summary,
                               report=demo_report)
    emit(result)
    exit_for(verdict)
