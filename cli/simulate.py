"""`esc-eval simulate`: 5-round dialogues between ESC-Role and the target models into a run folder."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from esc_eval.cli.common import console_env, default_out, emit, exit_for_outcome
from esc_eval.sim.runs.storage import redact_uri


def sim_overrides(cards, target, role, limit, language, address, workers, concurrency) -> dict[str, Any]:
    o: dict[str, Any] = {"cards": str(cards) if cards else None, "limit": limit,
                         "languages": [language] if language else None,
                         "execution.ray_address": address, "execution.workers": workers,
                         "execution.concurrency": concurrency}
    if target:
        o["targets"] = [{"model": t} for t in target]
    if role:
        o["role.model"] = role
    return o


def load_sim_config(config: Optional[Path], overrides: dict[str, Any]):
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.serve.config import load_config

    cfg = load_config(config, SimulationConfig, overrides)
    console_env(cfg.execution)
    return cfg


def simulate(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Simulation YAML (sim.jobs.config.SimulationConfig)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Run folder or storage URI, e.g. s3://bucket/prefix (re-running the same folder resumes)."),
    cards: Optional[Path] = typer.Option(None, "--cards", help="Card file (ours or official JSON); default: shipped samples."),
    target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Model under test (registry name or spec); repeatable."),
    role: Optional[str] = typer.Option(None, "--role", help="Role-play model (registry name or spec)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="Use at most N cards."),
    language: Optional[str] = typer.Option(None, "--language", help="Only cards in this language (en|zh)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker actors."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Dialogues in flight per worker."),
    keep_serving: bool = typer.Option(False, "--keep-serving", help="Leave the run's Serve deployments up after it (GPU clusters)."),
) -> None:
    """Run 5-round dialogues between ESC-Role and the target models into a run folder."""
    from esc_eval.sim.jobs.placed import placed_simulation
    from esc_eval.sim.pool.progress import console, job_progress
    from esc_eval.sim.jobs.simulation import run_simulation

    cfg = load_sim_config(config, sim_overrides(cards, target, role, limit, language, address, workers, concurrency))
    cfg.execution.placement.keep_serving |= keep_serving
    out = out or str(default_out("sim"))
    # where the models run (in the workers, or Serve deployments on GPU clusters) is planned first
    with placed_simulation(cfg, out, say=console.print) as cfg, job_progress("simulate") as jp:
        result = run_simulation(cfg, out, on_summary=jp.on_summary, on_start=jp.on_start)
    result = {"run_dir": redact_uri(out), **result}
    emit(result)
    exit_for_outcome(result, "dialogues", cfg.execution.max_failure_rate)
