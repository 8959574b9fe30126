"""`esc-eval bench sim|score|decode|gpu|serve|view`: benchmarks printing JSON (`-o FILE` keeps it).

The measurements live in sim/bench/; these commands only parse options and call them."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Optional

import typer

from esc_eval.cli.common import local_out

app = typer.Typer(no_args_is_help=True, help="Benchmarks printing JSON.")


def _write(result: dict[str, Any], out: Optional[Path]) -> None:
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


def _dtype(value: str) -> str:
    """The --dtype option checked at the door (one line naming the option on a bad value)."""
    from esc_eval.serve.devices.cpu import DtypeError, check_dtype_option

    try:
        return check_dtype_option(value, where="--dtype")
    except DtypeError as e:
        raise typer.BadParameter(str(e)) from None


@app.command("sim")
def bench_sim(
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    fake_dialogues: int = typer.Option(8500, help="(a) dialogues through the fixed-latency fake backend (0 = skip)."),
    fake_latency: float = typer.Option(1.0, help="(a) seconds per fake model call."),
    saturation_latency: float = typer.Option(0.05, help="(a) latency of a second fake run that makes the pool CPU-bound; its calls/s is `fake_calls_per_s` (0 = skip)."),
    workers: int = typer.Option(2, help="(a, c) worker actors."),
    memory_items: int = typer.Option(100_000, help="(c) items streamed to check driver memory (0 = skip)."),
    embedded_dialogues: int = typer.Option(128, help="(b) dialogues in flight on the embedded model (0 = skip)."),
    reference_dialogues: int = typer.Option(4, help="(b) dialogues through the reference loop."),
    max_tokens: int = typer.Option(128, help="(b) max new tokens per turn, both sides (the release: 512; at 512 "
                                   "SmolLM2 decodes to the cap and 128 dialogues outgrow a 24 GiB machine's KV cache)."),
    concurrency: int = typer.Option(128, help="(b) dialogues in flight in our engine."),
    shared_cards: Optional[Path] = typer.Option(None, help="(b) folder with the official card_high_en.json (default: ../shared/data/esc-eval/cards if present)."),
    kv_cache_gb: int = typer.Option(12, help="(b) VLLM_CPU_KVCACHE_SPACE of our engines together, GiB (split between them, at least 2 each)."),
    engines: int = typer.Option(0, help="(b) vLLM engines (worker actors), each bound to its own core; 0 = one per core."),
    compiled: bool = typer.Option(True, "--compiled/--eager", help="(b) compiled vLLM engines (slower start, excluded from the timing; faster steps)."),
    dtype: str = typer.Option("auto", "--dtype", help="(b) model dtype of both sides: auto (bfloat16 only with "
                              "AVX512-BF16/AMX, else float32), float32 or bfloat16."),
    via_driver: bool = typer.Option(False, "--via-driver", help="(a) also with every row and turn checkpoint shipped "
                                    "through the writer actor on the driver's node (a multi-node run's path)."),
    storage_uri: Optional[str] = typer.Option(None, "--storage-uri", help="(a) also with the run folder under this "
                                              "storage URI (e.g. s3://bucket/prefix; credentials from the environment)."),
) -> None:
    """Simulation throughput: fake backend, embedded model vs the release's loop, driver memory."""
    from esc_eval.sim.bench.loops.simulation import run_bench_sim

    _write(run_bench_sim(fake_dialogues=fake_dialogues, fake_latency=fake_latency, saturation_latency=saturation_latency, workers=workers, memory_items=memory_items, embedded_dialogues=embedded_dialogues, reference_dialogues=reference_dialogues, max_tokens=max_tokens, concurrency=concurrency, shared_cards=shared_cards, kv_cache_gb=kv_cache_gb, engines=engines, compiled=compiled, dtype=_dtype(dtype), via_driver=via_driver, storage_uri=storage_uri), out)


@app.command("score")
def bench_score(
    dialogues: int = typer.Option(4, "--dialogues", "-n", help="Dialogues to score (the README's figure: 4 official "
                                  "samples, 2 per engine on 2 cores). More than the source holds (e.g. 8500): scale mode, the source repeated "
                                  "through the service's scoring path for --budget-s, dialogues/hour."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    source: Optional[Path] = typer.Option(None, "--source", help="Run folder or official dialogue JSON (default: ../shared samples, else runs/demo, else fake dialogues)."),
    reference_dialogues: int = typer.Option(2, "--reference-dialogues", help="Dialogues the generating reference runs on (it decodes up to 512 tokens per call); 0 = all."),
    max_new_tokens: int = typer.Option(512, "--max-new-tokens", help="Generation cap of the reference (the release: 512)."),
    model: str = typer.Option("embedded", "--model", help="vLLM model folder, or 'embedded'."),
    prompt_order: Optional[str] = typer.Option(None, "--prompt-order", help="Judge prompt order for every phase: "
                                               "rubric_first (the paper's) or dialogue_first (a dialogue's prompts share "
                                               "a prefix); default: the model's registry entry (embedded: dialogue_first)."),
    dtype: str = typer.Option("auto", "--dtype", help="Model dtype of every engine: auto (bfloat16 only with "
                              "AVX512-BF16/AMX, else float32), float32 or bfloat16."),
    project_gpu: bool = typer.Option(False, "--project-gpu", help="Only count the judge's prefill tokens per dialogue "
                                     "(both prompt orders) and project 8.5K dialogues x 7 dimensions with a 7B judge on "
                                     "one H100 and one 8xH100 node (no engine started)."),
    budget_s: float = typer.Option(600.0, "--budget-s", help="Scale mode: seconds of scoring after engine start."),
    gpu_prefill_rate: Optional[float] = typer.Option(None, "--gpu-prefill-rate", help="Prefill tokens/s of one H100 "
                                                     "for the projection (default: the published figure in the JSON)."),
    workers: int = typer.Option(0, "--workers", help="Engines (Ray worker actors) of ours and of scale mode; 0 = one per core."),
) -> None:
    """Scoring throughput: ours (batched logprob, prefix cache) vs the official score.py loop."""
    from esc_eval.sim.bench.loops.scoring import bench_score as run

    run(dialogues=dialogues, out=out, source=source, reference_dialogues=reference_dialogues, max_new_tokens=max_new_tokens,
        model=model, prompt_order=prompt_order, dtype=_dtype(dtype), project_gpu=project_gpu, budget_s=budget_s,
        gpu_prefill_rate=gpu_prefill_rate, workers=workers)


@app.command("decode")
def bench_decode(
    contexts: str = typer.Option("64,512,1536", "--contexts", help="Prompt lengths in tokens, comma-separated (bench "
                                 "sim (b)'s turns start between about 150 and 1,500 tokens)."),
    streams: int = typer.Option(64, "--streams", help="Sequences decoded at once by the engine (bench sim (b): 64 per engine)."),
    new_tokens: int = typer.Option(128, "--new-tokens", help="Tokens generated per sequence and per reference call (bench sim (b): 128)."),
    dtype: str = typer.Option("auto", "--dtype", help="Model dtype of both sides: auto (bfloat16 only with AVX512-BF16/AMX, "
                              "else float32), float32 or bfloat16."),
    bind: str = typer.Option("0", "--bind", help="VLLM_CPU_OMP_THREADS_BIND of the engine (bench sim's engines: one core each)."),
    kv_cache_gb: int = typer.Option(8, "--kv-cache-gb", help="VLLM_CPU_KVCACHE_SPACE of the engine, GiB."),
    compiled: bool = typer.Option(True, "--compiled/--eager", help="Compiled engine, as bench sim (b) runs (slower start, not timed)."),
    target: float = typer.Option(20.0, "--target", help="The speedup the bound is checked against (issue 13: 20x)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
) -> None:
    """The most batching can buy on this CPU: one engine's decode rate per context vs the release loop's call."""
    from esc_eval.sim.bench.loops.decode import bench_decode as run

    try:
        ctx = tuple(int(c) for c in contexts.split(",") if c.strip())
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of token counts: {contexts!r}", param_hint="--contexts") from None
    if not ctx or min(ctx) < 2 or streams < 1 or new_tokens < 1:
        raise typer.BadParameter("contexts must be at least 2 tokens, streams and new tokens at least 1", param_hint="--contexts")
    _write(run(contexts=ctx, streams=streams, new_tokens=new_tokens, dtype=_dtype(dtype), bind=bind,
               kv_cache_gb=kv_cache_gb, compiled=compiled, target=target), out)


@app.command("gpu")
def bench_gpu(
    judge: str = typer.Option("vllm/embedded", "--judge", "-j", help="Judge of the scoring phase (registry name or "
                              "vLLM spec, e.g. vllm//models/j7b)."),
    role: str = typer.Option("vllm/embedded", "--role", help="Role-play model of the simulation phase."),
    target: str = typer.Option("vllm/embedded", "--target", "-t", help="Model under test of the simulation phase."),
    dialogues: Optional[int] = typer.Option(None, "--dialogues", "-n", help="Distinct dialogues scored (default: 2,000 "
                                            "on a GPU, 4 on the CPU)."),
    sim_dialogues: Optional[int] = typer.Option(None, "--sim-dialogues", help="Distinct dialogues simulated (default: "
                                                "256 on a GPU, 4 on the CPU)."),
    prompt_order: str = typer.Option("rubric_first,dialogue_first", "--prompt-order", help="Judge prompt orders, "
                                     "comma-separated: rubric_first (the paper's, `score`'s default), dialogue_first."),
    phases: str = typer.Option("scoring,simulation", "--phases", help="scoring, simulation or both, comma-separated."),
    source: Optional[Path] = typer.Option(None, "--source", help="Dialogues to score: run folder or official JSON "
                                          "(default: ../shared's official samples, else runs/demo); copies are tagged distinct."),
    cards: Optional[Path] = typer.Option(None, "--cards", help="Role cards (default: ../shared's official English cards, "
                                         "else the shipped samples); copies are tagged distinct."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Max new tokens per turn of role and target "
                                             "(default: as shipped, the registry's; a small CPU run uses fewer)."),
    dimensions: Optional[str] = typer.Option(None, "--dimensions", help="Dimensions scored, comma-separated (default: all seven)."),
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="Peak dense bf16 TFLOP/s for the prefill "
                                                "bound (default: the table's for the GPU; a CPU has none)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
) -> None:
    """Scoring and simulation on this machine's GPU (else its CPU): ours as `score` / `simulate` run them
    against vLLM's offline generate and a bare two-engine loop on the same engines."""
    import sys

    from esc_eval.serve.config import ConfigError, validate_config
    from esc_eval.sim.bench.gpu.bench import GpuBenchConfig, run_bench_gpu

    data = {"judge": judge, "role": role, "target": target, "dialogues": dialogues, "sim_dialogues": sim_dialogues,
            "prompt_orders": _csv(prompt_order, str, "--prompt-order"), "phases": _csv(phases, str, "--phases"),
            "source": str(source) if source else None, "cards": str(cards) if cards else None, "max_tokens": max_tokens,
            "dimensions": _csv(dimensions, str, "--dimensions"), "peak_tflops": peak_tflops}
    cfg = validate_config(GpuBenchConfig, {k: v for k, v in data.items() if v is not None}, "bench gpu", ConfigError)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)  # an unwritable folder fails now, not after the run

    def say(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    from esc_eval.sim.bench.gpu.bench import failed_phases

    result = run_bench_gpu(cfg, say)
    _write(result, out)
    failed = failed_phases(result)
    if failed:  # the JSON stays to read; its rates are no measurement
        sys.stderr.write("".join(f"error: {line}\n" for line in failed))
        raise typer.Exit(1)


def _csv(value: Optional[str], cast, option: str) -> Optional[list]:
    """A comma-separated option as a list (one line naming the option when a value does not parse)."""
    if value is None:
        return None
    try:
        return [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list: {value!r}", param_hint=option) from None


@app.command("serve")
def bench_serve(
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint under test, e.g. "
                                           "http://127.0.0.1:8000/v1 (esc-eval serve up, vllm serve, SGLang, TGI, an API)."),
    model: str = typer.Option("embedded", "--model", "-m", help="Model id the endpoint serves (with --routing: the registry model to deploy)."),
    workload: str = typer.Option("dialogues", "--workload", "-w", help="dialogues | judge | random."),
    concurrency: str = typer.Option("4", "--concurrency", "-c", help="Units in flight per level, comma-separated for a "
                                    "sweep (e.g. 1,4,16,64); a unit is a dialogue, a judged dialogue or a random request."),
    rate: Optional[str] = typer.Option(None, "--rate", help="New units per second (Poisson arrivals), comma-separated for a "
                                       "sweep (instead of --concurrency levels)."),
    max_concurrency: Optional[int] = typer.Option(None, "--max-concurrency", help="With --rate: at most this many units in flight."),
    num: Optional[int] = typer.Option(None, "--num", "-n", help="Units measured per level (default: 2 x concurrency, at least 4; 16 with --rate)."),
    duration: Optional[float] = typer.Option(None, "--duration", help="Seconds per level after which no new unit starts (instead of --num)."),
    warmup: int = typer.Option(1, "--warmup", help="Units run first at each level and left out of its figures."),
    max_tokens: int = typer.Option(128, "--max-tokens", help="Max new tokens per measured request (random: the output length)."),
    temperature: float = typer.Option(0.0, "--temperature", help="Sampling temperature of the measured requests."),
    rounds: int = typer.Option(5, "--rounds", help="dialogues: rounds per dialogue."),
    source: Optional[Path] = typer.Option(None, "--source", help="dialogues (replayed seeker) and judge: run folder or official dialogue JSON "
                                          "(default: ../shared official samples, else runs/demo)."),
    language: Optional[str] = typer.Option(None, "--language", help="Only dialogues / cards in this language (en or zh)."),
    role_url: Optional[str] = typer.Option(None, "--role-url", help="dialogues: endpoint of a live role model (default: replay the source's seeker turns)."),
    role_model: Optional[str] = typer.Option(None, "--role-model", help="dialogues: model id of the live role model."),
    role_max_tokens: int = typer.Option(128, "--role-max-tokens", help="dialogues: max new tokens of the live role model."),
    cards: str = typer.Option("sample", "--cards", help="dialogues with --role-url: role-card file or 'sample'."),
    strategy: str = typer.Option("official", "--strategy", help="dialogues with --role-url: role-play prompt strategy."),
    prompt_order: str = typer.Option("dialogue_first", "--prompt-order", help="judge: rubric_first, dialogue_first, or both "
                                     "comma-separated (one arm each: the prefix-cache effect)."),
    judge_method: str = typer.Option("logprob", "--judge-method", help="judge: logprob (one constrained token, esc-eval's default) or generate."),
    input_len: int = typer.Option(256, "--input-len", help="random: prompt tokens per request."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="random: local tokenizer folder (default for 'embedded': its own)."),
    ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos", help="random: decode exactly --max-tokens (vLLM's ignore_eos)."),
    slo: Optional[list[str]] = typer.Option(None, "--slo", help="Goodput SLO METRIC:VALUE in ms (ttft, tpot, e2el; e.g. ttft:500, e2el:2s); repeatable."),
    session_header: bool = typer.Option(True, "--session-header/--no-session-header", help="Send x-session-id (the dialogue's id) for sticky routing."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help="One x-session-id for every request (pins the run to one replica of a sticky router)."),
    routing: Optional[str] = typer.Option(None, "--routing", help="Deploy --model as a Serve app per routing mode "
                                          "(default, session, prefix_cache; comma-separated), fresh replicas each, and compare."),
    replicas: int = typer.Option(2, "--replicas", help="--routing: replicas per app (at least 2)."),
    kv_cache_gib: int = typer.Option(2, "--kv-cache-gib", help="--routing: VLLM_CPU_KVCACHE_SPACE per CPU replica, GiB."),
    max_num_seqs: int = typer.Option(64, "--max-num-seqs", help="--routing: vLLM batch size per replica."),
    address: Optional[str] = typer.Option(None, "--address", help="--routing: Ray cluster to deploy on (default: a local Ray for this run)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds before one measured request counts as failed."),
    seed: int = typer.Option(0, "--seed", help="Seed of random prompts and Poisson arrivals."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here, and the plots beside it (<stem>_*.png)."),
    save_detailed: bool = typer.Option(False, "--save-detailed", help="Also write per-request figures (ttfts, itls, e2els, lens, "
                                       "errors, launch order) in each level, as vllm bench serve --save-detailed does."),
) -> None:
    """Throughput of a serving stack under ESC-Eval's workloads (vLLM's metrics; sweeps; router comparisons)."""
    import logging
    import sys

    from esc_eval.cli.common import STATE
    from esc_eval.serve.config import validate_config
    from esc_eval.sim.bench.serve.bench import ServeBenchConfig, bench_serve as run

    if not STATE["verbose"]:  # one log line per measured request (httpx at INFO, once Ray set the root up) is noise
        logging.getLogger("httpx").setLevel(logging.WARNING)
    from esc_eval.sim.bench.serve.client import BenchInputError

    data = {"base_url": base_url, "model": model, "workload": workload, "concurrency": _csv(concurrency, int, "--concurrency"),
            "rate": _csv(rate, float, "--rate"), "max_concurrency": max_concurrency, "num": num, "duration_s": duration, "warmup": warmup,
            "max_tokens": max_tokens, "temperature": temperature, "rounds": rounds, "source": str(source) if source else None,
            "language": language, "role_url": role_url, "role_model": role_model, "role_max_tokens": role_max_tokens,
            "cards": cards, "strategy": strategy, "prompt_orders": _csv(prompt_order, str, "--prompt-order"),
            "judge_method": judge_method, "input_len": input_len, "tokenizer": tokenizer, "ignore_eos": ignore_eos,
            "slos": slo or [], "session_header": session_header, "session_id": session_id, "routing": _csv(routing, str, "--routing"),
            "replicas": replicas, "kv_cache_gib": kv_cache_gib, "max_num_seqs": max_num_seqs, "address": address,
            "timeout_s": timeout, "seed": seed, "save_detailed": save_detailed}
    cfg = validate_config(ServeBenchConfig, {k: v for k, v in data.items() if v is not None}, "bench serve", BenchInputError)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)  # an unwritable folder fails now, not after the load
    result = run(cfg, on_progress=_progress_printer())
    if routing:
        from esc_eval.serve.devices.cpu import resolve_dtype, runtime_summary

        result["machine"] = runtime_summary(resolve_dtype("auto"))  # the replicas ran here, dtype auto
    if out:
        from esc_eval.analysis.figures.bench_plots import bench_serve_plots

        result["plots"] = [str(p) for p in bench_serve_plots(result, out.with_suffix(""))]
    _write(result, out)
    if result["interrupted"]:
        sys.stderr.write("interrupted: wrote what was measured\n")
        raise SystemExit(130)  # typer.Exit under standalone_mode=False would return 0


def _progress_printer():
    """A progress line per level (and every 10 s while one runs) on stderr."""
    import sys

    def show(arm: str, run) -> None:
        ok = run.recorder.records
        done = "done" if run.finished else "running"
        sys.stderr.write(f"[bench serve] {arm} {run.shape.label()}: {done}, {run.units_completed} units ok, "
                         f"{run.units_failed} failed, {sum(r.success for r in ok)} requests, "
                         f"{run.duration_s:.0f} s\n")
        sys.stderr.flush()

    return show


@app.command("view")
def bench_view(
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    dialogues: int = typer.Option(100_000, help="Fake dialogues in the folder (7 scores each)."),
    models: int = typer.Option(14, help="Models the dialogues are spread over."),
    part_rows: int = typer.Option(64, help="Rows per Parquet part (the batch layer flushes every 64)."),
    folder: Optional[Path] = typer.Option(None, help="Run folder to open (built there first if it has no dialogues)."),
) -> None:
    """The viewer on a big folder of fake dialogues: time to the first page, search, peak RSS."""
    from esc_eval.analysis.bench.viewer import bench_viewer

    with _fake_folder(folder, dialogues, models, part_rows, "view") as (path, build_s):
        _write({"folder": str(path), "build_s": build_s, **bench_viewer([path])}, out)


@contextlib.contextmanager
def _fake_folder(folder: Optional[Path], dialogues: int, models: int, part_rows: int, what: str):
    """(the run folder, seconds it took to build or None): `folder` as given, built with fake
    dialogues if it holds none, or a temporary one removed afterwards."""
    import tempfile
    import time

    from esc_eval.analysis.results.fake_runs import write_fake_run

    tmp = None
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix=f"esc-eval-{what}-bench-")
        folder = Path(tmp.name) / "run"
    try:
        build_s = None
        if not list((folder / "dialogues").glob("part-*.parquet")):
            t0 = time.perf_counter()
            write_fake_run(folder, dialogues, [f"model-{i:02d}" for i in range(models)], part_rows=part_rows)
            build_s = round(time.perf_counter() - t0, 1)
        yield folder, build_s
    finally:
        if tmp is not None:
            tmp.cleanup()


@app.command("annotate")
def bench_annotate(
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    dialogues: int = typer.Option(8_500, help="Fake dialogues in the folder (7 scores each), like the paper's 8.5K."),
    models: int = typer.Option(14, help="Models the dialogues are spread over."),
    annotate: int = typer.Option(50, help="Dialogues one annotator scores during the measurement."),
    folder: Optional[Path] = typer.Option(None, help="Run folder to use (built there first if it has no dialogues)."),
) -> None:
    """The annotation server on a big folder: opening the next dialogue, saving an answer, live results."""
    from esc_eval.analysis.bench.annotation import bench_annotation

    with _fake_folder(folder, dialogues, models, 64, "annotate") as (path, build_s):
        _write({"folder": str(path), "build_s": build_s, **bench_annotation([path], dialogues=annotate)}, out)


@app.command("fidelity")
def bench_fidelity_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    simulated: int = typer.Option(8_500, help="Simulated dialogues (5 rounds each), like the paper's 8.5K."),
    human: int = typer.Option(1_300, help="Human dialogues in an ESConv-format file, like ESConv's 1,300."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples (the shipped default)."),
) -> None:
    """Seeker fidelity without a judge at the paper's scale: reading, features, comparison, writing."""
    from esc_eval.analysis.bench.fidelity import bench_fidelity
    from esc_eval.serve.devices.cpu import runtime_summary

    _write({"machine": runtime_summary(), **bench_fidelity(simulated, human, n_boot)}, out)


@app.command("trust")
def bench_trust_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=local_out, help="Also write the JSON here."),
    dialogues: int = typer.Option(8_500, help="Fake dialogues in the folder (7 scores with P(0..4) each), like the paper's 8.5K."),
    models: int = typer.Option(14, help="Models the dialogues are spread over."),
    human: int = typer.Option(500, help="Dialogues scored by two annotators (an annotate store)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Also time the report with --humans and open it in headless Chromium (when installed)."),
    folder: Optional[Path] = typer.Option(None, help="Run folder to use (built there first if it has no dialogues; the recalibrated judge's rows are added to it)."),
) -> None:
    """Calibration and the human-anchored (PPI) leaderboard at the paper's scale, and the report with --humans."""
    from esc_eval.analysis.bench.trust import bench_trust
    from esc_eval.serve.devices.cpu import runtime_summary

    with _fake_folder(folder, dialogues, models, 64, "trust") as (path, build_s):
        _write({"folder": str(path), "build_s": build_s, "machine": runtime_summary(),
                **bench_trust(path, n_human=human, report=report)}, out)
