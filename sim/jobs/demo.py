"""The demo's pipeline: its defaults (what the benchmarks found on 2-core CPUs) and simulate -> score
on one pool, whose engines serve the dialogues and then the judge; `esc-eval demo` (run_demo) adds the
report, which analysis writes (sim may not import it: the CLI passes it in)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

from esc_eval.sim.jobs.config import PipelineConfig

# 4 cards x 2 targets: the demo within 3 minutes on the 2-core AVX2 EPYC (2:45 measured; 8 cards took
# 4:20 on the same layout): its scoring is bound by the judge's prefill, proportional to the dialogues.
DEMO_CARDS = 4
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


# How the embedded 135M model is kept from looping (greedy, the paper's decoding, as everywhere else): a
# repetition penalty, the plain-worded role prompt, the seeker's reply ended at its first line, and every
# reply cut at its cap cut back to its last full sentence. Measured on the demo's 8 cards x 2 targets
# (docs/guides/first-run.md): with the paper's prompt and no penalty all 16 were spoiled and every seeker
# repeated one sentence; sampling (0.7, penalty 1.15) stopped the loops, but every dialogue had turns cut
# at the cap, and the seeker still played the supporter. With 4 cards and the caps below: 1 of 8 spoiled on
# the AVX2 EPYC, 3-4 of 8 in fresh runs on the AVX-512 BF16 EPYC (2026-12-05; batched bf16 decoding differs
# run to run); a seeker capped at 32 tokens had one turn with no full sentence in it, so 40.
DEMO_STRATEGY = "plain"
DEMO_REPETITION_PENALTY = 1.2


def _demo_params(max_tokens: int, stop: list[str] | None = None):
    from esc_eval.serve.chat.interface import GenerationParams

    return GenerationParams(max_tokens=max_tokens, repetition_penalty=DEMO_REPETITION_PENALTY, stop=stop)


def demo_config(n_cards: int = DEMO_CARDS):
    """The demo's defaults, from what the benchmarks found on 2-core CPUs (README Performance):
    one engine on every core (one worker, `cpu_bind: all`), the CPU's best dtype
    (`auto`: float32 on AVX2, where bf16 is emulated 4-6x slower), the dialogue-first judge prompt
    so a dialogue's seven judge prompts share one cached prefix, and shorter replies than the
    paper's 512 tokens (40 for the seeker, 48 for the target: a dialogue's ten turns are decoded one
    after another, so its wall time is the sum of their caps) so it runs in minutes on CPU. Two targets: the embedded model with the
    release's system prompt and the same model told to be curt and of no help (TERSE_PROMPT, 24
    tokens), whose leaderboard rows differ for a reason; the leaderboard reads expected scores
    (the embedded judge's most likely label is 1 for everything). On a GPU node (the shared
    decision, serve/devices/accelerator.py): one worker holding one GPU, whose one engine (bfloat16,
    as `auto` resolves on a GPU) serves role, targets and judge; two zero-GPU workers would each start
    an engine on GPU 0 (Ray leaves them every GPU) at vLLM's 0.92 memory share, and the second fails."""
    import os

    from esc_eval.serve.devices.accelerator import decide_accelerator
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig

    cores = os.cpu_count() or 1
    # One engine on every core: the demo's dialogues are few, so its time is their turns' latency and the
    # engines' start. On the 2-core AVX2 EPYC (8 cards, float32, same texts): one engine on both cores
    # started in 38 s (two, one core each: 50 s), and played the dialogues in 100 s (115) and scored
    # them in 97 s (108); 4:20 in all against 4:53.
    # KV cache: the ExecutionConfig's default, this process's VLLM_CPU_KVCACHE_SPACE else 2 GiB (46k float32
    # tokens, more than the demo holds at once; with 1 GiB of bfloat16, the same tokens, it took 52 s on the
    # AVX-512 EPYC against 50 s with 3 GiB); the engine allocates and touches it at start: 11 s for 2 GiB,
    # 4.5 s for 1 GiB on the AVX2 EPYC.
    workers = 1
    execution = dict(workers=1, num_cpus_per_worker=float(cores), cpu_bind="all" if cores > 1 else "auto",
                     dtype="auto")
    if decide_accelerator().kind == "cuda":  # one worker either way: only where its engine runs changes
        execution = dict(workers=1, num_cpus_per_worker=1.0, num_gpus_per_worker=1.0, cpu_bind="auto", dtype="auto")
    # each worker gets its share of the dialogues (cards x the two targets) in one chunk
    per_worker = max(1, -(-2 * n_cards // workers))
    sim_cfg = SimulationConfig(
        cards="sample", languages=["en"], limit=n_cards,
        # a dialogue is 10 sequential turns: its wall time is the sum of their decode times
        role=ModelRef(model="vllm/embedded", params=_demo_params(40, stop=["\n"])),
        targets=[ModelRef(model="vllm/embedded", params=_demo_params(48)),
                 ModelRef(model="vllm/embedded", name=TERSE_TARGET, system_prompt=TERSE_PROMPT,
                          params=_demo_params(24))],
        strategies=[DEMO_STRATEGY], end_at_sentence=True,
        execution=ExecutionConfig(concurrency=max(8, per_worker), chunk_size=per_worker, **execution),
    )
    scoring = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded"), prompt_order="dialogue_first"),
                            execution=ExecutionConfig(concurrency=max(8, per_worker), chunk_size=per_worker, **execution))
    return PipelineConfig(simulation=sim_cfg, scoring=scoring)


def run_pipeline(cfg: PipelineConfig, out: str, progress: Callable[..., ContextManager[Any]] | None = None,
                 probe: Callable[[Any], Any] | None = None) -> tuple[dict, dict, Any]:
    """Simulate then score into the run folder `out` on one pool (the engines started for the dialogues
    also serve the judge). progress(kind, unit=...) opens what follows each job (sim/driver/progress.py
    job_progress); probe(pool), called before the pool closes, says where its engines ran. The two
    results and what probe returned (None without one)."""
    import contextlib

    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.pool.pool import WorkerPool

    progress = progress or (lambda *a, **k: contextlib.nullcontext())
    with WorkerPool(cfg.simulation.execution) as pool:
        with progress("simulate") as jp:
            sim_result = run_simulation(cfg.simulation, out, on_summary=jp.on_summary if jp else None,
                                        on_start=jp.on_start if jp else None, pool=pool)
        with progress("score", unit="dialogues") as jp:
            score_result = run_scoring(cfg.scoring, out, on_summary=jp.on_summary if jp else None,
                                       on_start=jp.on_start if jp else None, pool=pool)
        return sim_result, score_result, probe(pool) if probe else None


def run_demo(cards: int = DEMO_CARDS, out: str = "runs/demo", config: str | None = None, address: str | None = None,
             verbose: bool = False, probe: Callable[[Any], Any] | None = None,
             report: Callable[..., dict[str, Any]] | None = None) -> tuple[dict[str, Any], tuple[int, str] | None]:
    """`esc-eval demo`: the demo's config (or the pipeline YAML `config`), every model checked before
    anything starts, the pipeline with progress on the terminal, then report(out, judge_note, rule)
    (analysis/report/commands.py demo_report: the report and its leaderboard, the seeker-fidelity card;
    rule: the model registry's groups). The result and the verdict its exit status comes from
    (sim/driver/outcome.py: the simulation's, else the scoring's)."""
    from esc_eval.serve.config import load_config
    from esc_eval.serve.devices.cpu import cpu_info, resolve_dtype
    from esc_eval.serve.registry.registry import model_groups
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.outcome import outcome_line
    from esc_eval.sim.driver.progress import console, job_progress
    from esc_eval.sim.jobs.preflight import preflight_run

    cfg = load_config(config, PipelineConfig) if config else demo_config(cards)
    for ex in (cfg.simulation.execution, cfg.scoring.execution):
        pass_driver_env(ex, verbose)
        ex.ray_address = address or ex.ray_address
    # the machine (a GPU node whose torch cannot use its GPUs), then every model: one line each, nothing started
    preflight_run(cfg.simulation, cfg.scoring)
    sim_cfg = cfg.simulation
    console.print(f"[bold]esc-eval demo[/bold]: {cards} cards x {', '.join(t.target_name for t in sim_cfg.targets)} "
                  f"(role {sim_cfg.role.model}, judge {cfg.scoring.judge.model.model}) -> {out}")
    ex = sim_cfg.execution
    console.print(f"[dim]{ex.workers} worker(s), cpu_bind {ex.cpu_bind}, dtype {ex.dtype} -> "
                  f"{resolve_dtype(ex.dtype, gpu=ex.num_gpus_per_worker > 0)} on {cpu_info().describe()}[/dim]")
    sim_result, score_result, engines = run_pipeline(cfg, out, progress=job_progress, probe=probe)
    small = {sim_cfg.role.model, cfg.scoring.judge.model.model} == {"vllm/embedded"}
    paths = report(out, SMALL_MODELS_NOTE if small else None, model_groups) if report else {}
    result = {"run_dir": str(out), "simulation": sim_result, "scoring": score_result, "engines": engines,
              "files": {k: str(v) for k, v in paths.items()}}
    verdict = (outcome_line({"run_dir": str(out), **sim_result}, "dialogues", sim_cfg.execution.max_failure_rate)
               or outcome_line({"run_dir": str(out), **score_result}, "scores", cfg.scoring.execution.max_failure_rate))
    return result, verdict
