"""`esc-eval demo`: the whole pipeline on the embedded model (simulate -> score -> leaderboard + report)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import exit_for_outcome, console_env, emit
from esc_eval.sim.jobs.demo import DEMO_CARDS, SMALL_MODELS_NOTE, demo_config, run_pipeline


def demo(
    cards: Annotated[int, typer.Option("--cards", "-n", help="Number of shipped sample cards to play.")] = DEMO_CARDS,
    out: Annotated[str, typer.Option("--out", "-o", help="Run folder or storage URI (re-running resumes).")] = "runs/demo",
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Pipeline YAML (sim.jobs.config.PipelineConfig) to replace the demo defaults.")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Join an existing Ray cluster.")] = None,
) -> None:
    """The whole pipeline on the embedded model: simulate -> score -> leaderboard + report."""
    from esc_eval.analysis.seekers.esconv import read_human_seekers, sample_file
    from esc_eval.cli.display import write_report_for
    from esc_eval.serve.devices.cpu import cpu_info, resolve_dtype
    from esc_eval.sim.jobs.preflight import preflight_run
    from esc_eval.sim.jobs.config import PipelineConfig
    from esc_eval.serve.config import load_config
    from esc_eval.sim.driver.progress import console, job_progress

    cfg = load_config(config, PipelineConfig) if config else demo_config(cards)
    for ex in (cfg.simulation.execution, cfg.scoring.execution):
        console_env(ex)
        ex.ray_address = address or ex.ray_address
    # the machine (a GPU node whose torch cannot use its GPUs), then every model: one line each, nothing started
    preflight_run(cfg.simulation, cfg.scoring)
    sim_cfg = cfg.simulation
    console.print(f"[bold]esc-eval demo[/bold]: {cards} cards x {', '.join(t.target_name for t in sim_cfg.targets)} "
                  f"(role {sim_cfg.role.model}, judge {cfg.scoring.judge.model.model}) -> {out}")
    ex = sim_cfg.execution
    console.print(f"[dim]{ex.workers} worker(s), cpu_bind {ex.cpu_bind}, dtype {ex.dtype} -> "
                  f"{resolve_dtype(ex.dtype, gpu=ex.num_gpus_per_worker > 0)} on {cpu_info().describe()}[/dim]")
    sim_result, score_result, engines = run_pipeline(cfg, out, progress=job_progress, probe=_engines)
    seekers = read_human_seekers(sample_file())  # our own writing in ESConv's format, not ESConv (its data/README.md)
    small = {sim_cfg.role.model, cfg.scoring.judge.model.model} == {"vllm/embedded"}
    paths = write_report_for([out], None, score_kind="expected", human_seekers=seekers,
                             judge_note=SMALL_MODELS_NOTE if small else None)
    show_fidelity_card(out, seekers)
    emit({"run_dir": str(out), "simulation": sim_result, "scoring": score_result, "engines": engines,
          "files": {k: str(v) for k, v in paths.items()}})
    exit_for_outcome({"run_dir": str(out), **sim_result}, "dialogues", sim_cfg.execution.max_failure_rate)
    exit_for_outcome({"run_dir": str(out), **score_result}, "scores", cfg.scoring.execution.max_failure_rate)


def show_fidelity_card(out: str, seekers) -> None:
    """The role model's seeker-fidelity card against the shipped human sample, on the terminal (the
    report holds the same comparison in full)."""
    from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues
    from esc_eval.analysis.seekers.fidelity_report import fidelity_card, seeker_fidelity
    from esc_eval.sim.driver.progress import console

    try:
        card = fidelity_card(seeker_fidelity(load_dialogues([out]), seekers))
    except AnalysisInputError as e:  # no completed dialogue: the outcome check below says why
        card = f"No seeker-fidelity card: {e}."
    console.print(card + "(people: the shipped sample of 16 dialogues, this project's own writing, not ESConv)",
                  highlight=False, markup=False, soft_wrap=True)  # a table line is not wrapped


def _engines(pool) -> list[dict]:
    """Where the demo's engines ran (device, dtype, KV cache), as the engines themselves report it
    (esc-eval check reads this: on a GPU node, cuda and bfloat16)."""
    from esc_eval.sim.bench.engine_probe import probe_workers

    try:
        return [{k: e.get(k) for k in ("model", "device", "dtype", "kv_cache")} for e in probe_workers(pool)]
    except Exception as e:  # noqa: BLE001 - the demo's result stands without it
        return [{"error": f"{type(e).__name__}: {e}"}]
