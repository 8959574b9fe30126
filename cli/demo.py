"""`esc-eval demo`: the whole pipeline on the embedded model (simulate -> score -> leaderboard + report)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from esc_eval.cli.common import console_env, emit

DEMO_CARDS = 8


def demo_config(n_cards: int = DEMO_CARDS):
    """The demo's defaults: shorter replies than the paper's 512 tokens so it runs in minutes on CPU."""
    from esc_eval.serve.chat import GenerationParams
    from esc_eval.sim.config import ExecutionConfig, JudgeConfig, ModelRef, PipelineConfig, ScoringConfig, SimulationConfig

    sim_cfg = SimulationConfig(
        cards="sample", languages=["en"], limit=n_cards,
        role=ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=96)),
        targets=[ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=160))],
        execution=ExecutionConfig(workers=1, concurrency=32, chunk_size=4),
    )
    scoring = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded")),
                            execution=ExecutionConfig(workers=1, concurrency=16, chunk_size=4))
    return PipelineConfig(simulation=sim_cfg, scoring=scoring)


def demo(
    cards: int = typer.Option(DEMO_CARDS, "--cards", "-n", help="Number of shipped sample cards to play."),
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", help="Run folder (re-running resumes)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Pipeline YAML (sim.config.PipelineConfig) to replace the demo defaults."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
) -> None:
    """The whole pipeline on the embedded model: simulate -> score -> leaderboard + report."""
    from esc_eval.cli.report import write_report_for
    from esc_eval.sim.config import PipelineConfig, load_config
    from esc_eval.sim.pool import WorkerPool
    from esc_eval.sim.progress import console, job_progress
    from esc_eval.sim.scoring import run_scoring
    from esc_eval.sim.simulation import run_simulation

    cfg = load_config(config, PipelineConfig) if config else demo_config(cards)
    for ex in (cfg.simulation.execution, cfg.scoring.execution):
        console_env(ex)
        ex.ray_address = address or ex.ray_address
    sim_cfg = cfg.simulation
    console.print(f"[bold]esc-eval demo[/bold]: {cards} cards x {', '.join(t.model for t in sim_cfg.targets)} "
                  f"(role {sim_cfg.role.model}, judge {cfg.scoring.judge.model.model}) -> {out}")
    # One pool for both phases: the engines started for the dialogues also serve the judge.
    with WorkerPool(sim_cfg.execution) as pool:
        with job_progress("simulate") as jp:
            sim_result = run_simulation(sim_cfg, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
        with job_progress("score", unit="dialogues") as jp:
            score_result = run_scoring(cfg.scoring, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
    paths = write_report_for([out], None)
    emit({"run_dir": str(out), "simulation": sim_result, "scoring": score_result,
          "files": {k: str(v) for k, v in paths.items()}})
