"""`esc-eval demo`: the whole pipeline on the embedded model (simulate -> score -> leaderboard + report)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from esc_eval.cli.common import exit_for_outcome, console_env, emit

DEMO_CARDS = 8
# The demo's second target: the embedded model told to be of no help, so the table has two rows
# that differ for a reason (the first keeps the release's "You are a helpful assistant!").
TERSE_TARGET = "vllm/embedded+terse"
TERSE_PROMPT = ("You are a busy assistant who does not care about the user's feelings. Answer in one short "
                "sentence. Do not show sympathy, do not ask questions and do not give advice.")
# Beside the demo's table (terminal, leaderboard.md, report) when its models are the embedded one.
SMALL_MODELS_NOTE = (
    "No human scores beside this judge, and none would rescue it: the demo's judge and seeker are the embedded "
    "SmolLM2-135M-Instruct, far too small to judge emotional support or to play a person in distress. The "
    "difference between its two rows is no finding; the demo shows that the pipeline runs end to end.")


def demo_config(n_cards: int = DEMO_CARDS):
    """The demo's defaults, from what the benchmarks found on 2-core CPUs (README Performance):
    one engine per core (2 workers, each engine bound to its own core), the CPU's best dtype
    (`auto`: float32 on AVX2, where bf16 is emulated 4-6x slower), the dialogue-first judge prompt
    so a dialogue's seven judge prompts share one cached prefix, and shorter replies than the
    paper's 512 tokens so it runs in minutes on CPU. Two targets: the embedded model with the
    release's system prompt and the same model told to be curt and of no help (TERSE_PROMPT, 24
    tokens), whose leaderboard rows differ for a reason; the leaderboard reads expected scores
    (the embedded judge's most likely label is 1 for everything). On a GPU node (the shared
    decision, serve/devices/accelerator.py): one worker holding one GPU, whose one engine (bfloat16,
    as `auto` resolves on a GPU) serves role, targets and judge; two zero-GPU workers would each start
    an engine on GPU 0 (Ray leaves them every GPU) at vLLM's 0.92 memory share, and the second fails."""
    import os

    from esc_eval.serve.chat.interface import GenerationParams
    from esc_eval.serve.devices.accelerator import decide_accelerator
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig

    cores = os.cpu_count() or 1
    workers = max(1, min(cores, 2))  # one engine per core; more engines than dialogues buys nothing here
    execution = dict(workers=workers, num_cpus_per_worker=1.0 if cores >= workers else cores / workers,
                     cpu_bind="per_worker" if workers > 1 else "auto", dtype="auto",
                     env={"VLLM_CPU_KVCACHE_SPACE": "3"})
    if decide_accelerator().kind == "cuda":
        workers = 1
        execution = dict(workers=1, num_cpus_per_worker=1.0, num_gpus_per_worker=1.0, cpu_bind="auto", dtype="auto")
    # each worker gets its share of the dialogues (cards x the two targets) in one chunk
    per_worker = max(1, -(-2 * n_cards // workers))
    sim_cfg = SimulationConfig(
        cards="sample", languages=["en"], limit=n_cards,
        # a dialogue is 10 sequential turns: its wall time is the sum of their decode times
        role=ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=48)),
        targets=[ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=72)),
                 ModelRef(model="vllm/embedded", name=TERSE_TARGET, system_prompt=TERSE_PROMPT,
                          params=GenerationParams(max_tokens=24))],
        execution=ExecutionConfig(concurrency=max(8, per_worker), chunk_size=per_worker, **execution),
    )
    scoring = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded"), prompt_order="dialogue_first"),
                            execution=ExecutionConfig(concurrency=max(8, per_worker), chunk_size=per_worker, **execution))
    return PipelineConfig(simulation=sim_cfg, scoring=scoring)


def demo(
    cards: int = typer.Option(DEMO_CARDS, "--cards", "-n", help="Number of shipped sample cards to play."),
    out: str = typer.Option("runs/demo", "--out", "-o", help="Run folder or storage URI (re-running resumes)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Pipeline YAML (sim.jobs.config.PipelineConfig) to replace the demo defaults."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
) -> None:
    """The whole pipeline on the embedded model: simulate -> score -> leaderboard + report."""
    from esc_eval.analysis.seekers.esconv import read_human_seekers, sample_file
    from esc_eval.cli.report import write_report_for
    from esc_eval.serve.devices.cpu import cpu_info, resolve_dtype
    from esc_eval.sim.jobs.preflight import preflight_run
    from esc_eval.sim.jobs.config import PipelineConfig
    from esc_eval.serve.config import load_config
    from esc_eval.sim.pool.pool import WorkerPool
    from esc_eval.sim.pool.progress import console, job_progress
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation

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
    # One pool for both phases: the engines started for the dialogues also serve the judge.
    with WorkerPool(sim_cfg.execution) as pool:
        with job_progress("simulate") as jp:
            sim_result = run_simulation(sim_cfg, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
        with job_progress("score", unit="dialogues") as jp:
            score_result = run_scoring(cfg.scoring, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
        engines = _engines(pool)
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
    from esc_eval.sim.pool.progress import console

    try:
        card = fidelity_card(seeker_fidelity(load_dialogues([out]), seekers))
    except AnalysisInputError as e:  # no completed dialogue: the outcome check below says why
        card = f"No seeker-fidelity card: {e}."
    console.print(card + "(people: the shipped sample of 16 dialogues, this project's own writing, not ESConv)",
                  highlight=False, markup=False, soft_wrap=True)  # a table line is not wrapped


def _engines(pool) -> list[dict]:
    """Where the demo's engines ran (device, dtype, KV cache), as the engines themselves report it
    (esc-eval check reads this: on a GPU node, cuda and bfloat16)."""
    from esc_eval.sim.bench.gpu.engine_probe import probe_workers

    try:
        return [{k: e.get(k) for k in ("model", "device", "dtype", "kv_cache")} for e in probe_workers(pool)]
    except Exception as e:  # noqa: BLE001 - the demo's result stands without it
        return [{"error": f"{type(e).__name__}: {e}"}]
