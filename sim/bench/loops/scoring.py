"""`esc-eval bench score`: how much faster our scoring is than the official score.py loop.

Measured on one vLLM model (default: the embedded SmolLM2 judge), each phase alone on the machine:
  ours                  what `esc-eval score` runs: ScoringJob on the Ray pool, one engine per
                        core bound to it, prefix caching on, method logprob (one forward pass
                        per request, P("0".."4") at the answer), each dialogue its own chunk.
  ours_one_engine       the same 7 x N requests all in flight on one in-process engine (our CPU
                        layout, serve/engines/cpu_layout.py). Run twice, in the order ScoringJob submits
                        (dialogue-major) and sorted by dimension (the rubric prefix back to
                        back), the prefix cache reset before each, to measure whether ordering
                        matters.
  batched_no_cache      the same 7 x N requests, all in flight, on an engine with prefix caching
                        off: the engine's raw batched prefill rate.
  prefill_reference     the official score.py structure (one dialogue at a time, 7 sequential
                        calls) sending our single-token request: only batching, caching and
                        scheduling differ from ours.
  reference             the official score.py structure generating as it does: greedy until end
                        of sequence, capped at `max_new_tokens` (512), answer parsed with the
                        official rule (the first of 0,1,2,3,4 found in the answer). It decodes hundreds of tokens per call, so it
                        runs on `reference_dialogues` dialogues (the ones nearest the median
                        prompt length) and the speedup compares seconds per dialogue.
Every phase uses the judge prompt order given by --prompt-order: rubric_first (the paper's) or
dialogue_first (a dialogue's seven prompts share the dialogue as a cached prefix; ours sends one
first and the other six after it).
Scale mode (--dialogues above what the source holds, e.g. 8500; sim/bench/loops/scale.py): the source's
dialogues repeated through the service's scoring path (Ray pool, one engine per core) for a time
budget -> dialogues/hour, plus the prefill tokens per dialogue and a GPU projection; no references.
--project-gpu: only the token accounting and the projection (no engine). Every engine of a run
loads one dtype (--dtype, auto = the CPU's best), recorded with the CPU under "machine".
The references run on a separate engine instance with prefix caching disabled (engines are keyed
by their kwargs), so caching is one of the things that differ; it is bound to one core or to all
of them, whichever ran one reference call faster (a probe recorded in the JSON), in vLLM's own
process layout, so the reference has the machine as vLLM best uses it. Engine start and a one-token
warm-up per engine are excluded from every timing.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.serve.devices.cpu import DEFAULT_DTYPE
from esc_eval.serve.engines.cpu_layout import BIND_ENV, MULTIPROCESSING_ENV
from esc_eval.serve.engines.embedded import EMBEDDED
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.bench.dialogues import load_bench_dialogues
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.prompts import judge_messages
from esc_eval.sim.judging.score_parser import parse_score
from esc_eval.sim.pool.env import temporary_env

OFFICIAL_MAX_NEW_TOKENS = 512  # the paper's release caps generation at 512 new tokens (evaluate.py / score.py)
SCORE_DIALOGUES = 4  # `bench score` (the CLI reads these): the README's figure, 4 official samples, 2 per engine on 2 cores
SCORE_REFERENCE_DIALOGUES = 2  # the generating reference decodes up to 512 tokens a call: 2 give its rate
SCORE_BUDGET_S = 600.0  # scale mode: ten minutes of scoring give a steady dialogues/hour
SCORE_WORKERS = 0  # 0 = one engine (Ray worker actor) per core
# Pause between phases: an idle vLLM-CPU worker spins ~1 s after its last request (notes/cpu-stack.md), stealing the next phase's core.
PHASE_PAUSE_S = 2.0


# -- measurement ------------------------------------------------------------------------------
def _counting_model_class():
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel

    class CountingVLLM(VLLMChatModel):
        """VLLMChatModel that also sums the prefix-cache hits vLLM reports per request."""

        cached_tokens = 0

        async def _generate(self, prompt_ids, sp, adapter):
            final = await super()._generate(prompt_ids, sp, adapter)
            # Runs on the engine's loop thread only: no lock needed.
            self.cached_tokens += int(getattr(final, "num_cached_tokens", 0) or 0)
            return final

    return CountingVLLM


def _turns(row: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["speaker"], t["text"]) for t in row["turns"]]


def _on_loop(model, coro) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, model.host.loop).result()


def _start(model) -> float:
    started = time.perf_counter()
    model.host.ensure_started()
    return time.perf_counter() - started


async def _warm_up(model) -> None:
    await model.chat([ChatMessage(role="user", content="Hi")], GenerationParams(max_tokens=1))


def _phase(rows_or_results: list[dict[str, Any]], wall: float, model, cached_before: int) -> dict[str, Any]:
    prompt = sum(r.get("prompt_tokens") or 0 for r in rows_or_results)
    return {"wall_s": round(wall, 3), "requests": len(rows_or_results), "prompt_tokens": prompt,
            "prompt_tokens_per_s": round(prompt / wall, 1) if wall > 0 else None,
            "cached_prompt_tokens": model.cached_tokens - cached_before}


async def _ours(model, judge: JudgeConfig, rows, order: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(model.host.engine.reset_prefix_cache(), model.host.loop))
    before = model.cached_tokens
    started = time.perf_counter()
    if order == "dialogue_major":  # what ScoringJob does: each dialogue's 7 prompts together
        per = await asyncio.gather(*(score_dialogue(_turns(r), r["language"], judge, model) for r in rows))
        results = [dict(x, dialogue=i) for i, rs in enumerate(per) for x in rs]
    else:  # sorted by dimension: the same rubric prefix back to back
        work = [(dim, i, r) for dim in judge.dimensions for i, r in enumerate(rows)]
        per = await asyncio.gather(*(score_dialogue(_turns(r), r["language"], judge, model, [dim]) for dim, i, r in work))
        results = [dict(rs[0], dialogue=i) for (dim, i, r), rs in zip(work, per)]
    wall = time.perf_counter() - started
    phase = _phase(results, wall, model, before)
    phase["order"] = order
    phase["scored"] = sum(1 for x in results if x["parse_status"] == "ok")
    return phase, results


async def _sequential(model, judge: JudgeConfig, rows, indices: list[int],
                      generate_tokens: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """score.py's loop: for each dialogue (rows[i] for i in indices), for each dimension, one
    call, wait, parse."""
    before = model.cached_tokens
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i in indices:
        r = rows[i]
        for dim in judge.dimensions:
            if generate_tokens is None:  # our single-token request, one at a time
                (x,) = await score_dialogue(_turns(r), r["language"], judge, model, [dim])
                results.append(dict(x, dialogue=i, completion_tokens=1, finish_reason="length"))
                continue
            messages = judge_messages(dim, _turns(r), r["language"], rubric=judge.rubric, rendering=judge.rendering,
                                      order=judge.prompt_order)
            res = await model.chat(messages, GenerationParams(temperature=0.0, max_tokens=generate_tokens))
            parsed = parse_score(res.text, "compat")
            results.append({"dialogue": i, "dimension": dim, "score": parsed.score, "parse_status": parsed.status,
                            "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                            "finish_reason": res.finish_reason})
    wall = time.perf_counter() - started
    phase = _phase(results, wall, model, before)
    phase["scored"] = sum(1 for x in results if x["parse_status"] == "ok")
    phase["decoded_tokens_mean"] = round(statistics.fmean(x["completion_tokens"] for x in results), 1)
    if generate_tokens is not None:
        phase["hit_max_new_tokens"] = sum(1 for x in results if x["finish_reason"] == "length")
        phase["parse_failure_rate_compat"] = round(1 - phase["scored"] / len(results), 3)
    return phase, results


def _median_subset(rows: list[dict[str, Any]], k: int, tokens: list[int]) -> list[int]:
    """Indices of the k dialogues whose prompt lengths are nearest the median (a fair sample
    for a reference too slow to run on all of them)."""
    med = statistics.median(tokens)
    return sorted(sorted(range(len(rows)), key=lambda i: (abs(tokens[i] - med), i))[:k])


def _agreement(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> float | None:
    key = lambda x: (x["dialogue"], x["dimension"])  # noqa: E731
    sa = {key(x): x["score"] for x in a}
    pairs = [(sa[key(x)], x["score"]) for x in b if key(x) in sa and x["score"] is not None and sa[key(x)] is not None]
    return round(sum(p == q for p, q in pairs) / len(pairs), 3) if pairs else None


def registry_prompt_order(model: str) -> str:
    """The judge prompt order the registry declares for `model` (rubric_first when it is not there)."""
    from esc_eval.serve.registry.registry import default_registry

    from esc_eval.serve.chat.interface import UnknownModelError

    try:
        return default_registry().get(model).judge_prompt_order
    except UnknownModelError:  # a model folder, not a registry name
        return "rubric_first"


def _accounting(rows: list[dict[str, Any]], judge: JudgeConfig, model: str) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from esc_eval.serve.backends.vllm_engine import resolve_model_path
    from esc_eval.sim.bench.loops.scale import prefill_accounting

    return prefill_accounting(rows, judge, AutoTokenizer.from_pretrained(resolve_model_path(model)))


def run_bench(dialogues: int = SCORE_DIALOGUES, source: Path | None = None,
              reference_dialogues: int = SCORE_REFERENCE_DIALOGUES, max_new_tokens: int = OFFICIAL_MAX_NEW_TOKENS,
              model: str = EMBEDDED, prompt_order: str | None = None, dtype: str = DEFAULT_DTYPE, project_gpu: bool = False,
              budget_s: float = SCORE_BUDGET_S, gpu_prefill_rate: float | None = None, workers: int = SCORE_WORKERS) -> dict[str, Any]:
    """The measurement behind `bench_score` (a plain function: no printing).

    dialogues above the number available -> scale mode (sim/bench/loops/scale.py): the available ones
    repeated through the service's scoring path for at most `budget_s` s, no reference loops.
    project_gpu -> only the prefill token accounting and the GPU projection (no engine).
    workers: engines of ours and of scale mode (Ray worker actors, one per core when 0)."""
    from esc_eval.serve.devices.cpu import resolve_dtype, runtime_summary
    from esc_eval.sim.bench.loops.scale import PAPER_DIALOGUES, measure_scale, project_gpu as projection

    if dialogues < 1:
        raise ValueError("--dialogues must be at least 1")
    # in-process engines left at their default ("auto") resolve it to this same dtype; asked without it they
    # share an engine already running in this process with the same settings (one start fewer)
    engine_dtype = None if dtype in (None, "auto") else resolve_dtype(dtype)
    dtype = resolve_dtype(dtype)  # once: every engine of every phase loads the same dtype
    rows, src = load_bench_dialogues(dialogues, source)
    n = len(rows)
    k = n if reference_dialogues <= 0 else min(reference_dialogues, n)
    judge = JudgeConfig(model=ModelRef(model=f"vllm/{model}"), prompt_order=prompt_order or registry_prompt_order(model))
    out: dict[str, Any] = {"bench": "score", "model": f"vllm/{model}", "machine": runtime_summary(dtype), "source": src,
                           "judge": {"method": judge.method, "rubric": judge.rubric, "rendering": judge.rendering,
                                     "prompt_order": judge.prompt_order, "dimensions": len(judge.dimensions)}}
    if project_gpu and src["kind"] != "fake_generated" and n == dialogues:
        rows, src = load_bench_dialogues(10**9, source)  # count tokens over every dialogue the source has
        out["source"], n = src, len(rows)
    if project_gpu or dialogues > n:
        out["prefill"] = _accounting(rows, judge, model)
        out["gpu_projection"] = projection(out["prefill"], max(dialogues, PAPER_DIALOGUES) if dialogues > n else PAPER_DIALOGUES,
                                           gpu_prefill_rate)
        if project_gpu:
            out["mode"] = "projection"
            return out
    if dialogues > n:
        out["mode"] = "scale"
        out["scale"] = measure_scale(rows, dialogues, judge, dtype, budget_s, workers=workers)
        out["scale"]["source"] = (f"the {n} dialogues of {src['path']} repeated to {dialogues} (same length distribution), "
                                  "each copy marked so copies share no cacheable prefix")
        out["dialogues_per_hour"] = out["scale"]["dialogues_per_hour"]
        out["prefill_tokens_per_dialogue"] = out["prefill"][judge.prompt_order]["uncached_prefill_tokens_per_dialogue"]
        return out
    out["mode"] = "compare"
    out.update(_compare(rows, judge, model, dtype, k, max_new_tokens, workers, engine_dtype))
    return out


@contextlib.contextmanager
def _thread_bind(value: str | None):
    """VLLM_CPU_OMP_THREADS_BIND for the engines started inside (their core process reads it at
    spawn); None = vLLM's default (one core). The reference runs in vLLM's own process layout either
    way, not in ours (serve/engines/cpu_layout.py)."""
    with temporary_env(BIND_ENV, value), temporary_env(MULTIPROCESSING_ENV, "1"):
        yield


def _reference_bindings() -> dict[str, str | None]:
    cores = os.cpu_count() or 1
    binds: dict[str, str | None] = {"vllm_default": None}
    if cores > 1:
        binds[f"all_{cores}_cores"] = f"0-{cores - 1}"
    return binds


async def _probe_call(model, messages: list[ChatMessage], max_new_tokens: int) -> dict[str, Any]:
    await _warm_up(model)
    started = time.perf_counter()
    res = await model.chat(messages, GenerationParams(temperature=0.0, max_tokens=max_new_tokens))
    return {"wall_s": round(time.perf_counter() - started, 3), "decoded_tokens": res.completion_tokens}


def _dtype_kwargs(dtype: str | None) -> dict[str, str]:
    return {"dtype": dtype} if dtype else {}


def _fastest_reference_binding(Counting, model: str, dtype: str | None, messages: list[ChatMessage],
                               max_new_tokens: int) -> tuple[str, dict[str, Any]]:
    """The reference gets the machine the way it runs fastest: one generating call (the median
    dialogue's first dimension, greedy to EOS) timed on an engine under each thread binding. The
    winner's engine is left running for the reference phases (an engine start saved); the others
    are stopped."""
    from esc_eval.serve.backends.vllm_engine import shutdown_engine

    probes: dict[str, Any] = {}
    best: tuple[str, Any] | None = None
    for name, value in _reference_bindings().items():
        with _thread_bind(value):
            m = Counting(model, enable_prefix_caching=False, **_dtype_kwargs(dtype))
            try:
                start_s = _start(m)
                probes[name] = {"VLLM_CPU_OMP_THREADS_BIND": value or "(unset: vLLM's default)",
                                "engine_start_s": round(start_s, 1), **_on_loop(m, _probe_call(m, messages, max_new_tokens))}
            except BaseException:
                shutdown_engine(m.host)
                if best:
                    shutdown_engine(best[1].host)
                raise
        if best is None or probes[name]["wall_s"] < probes[best[0]]["wall_s"]:
            if best:
                shutdown_engine(best[1].host)
            best = (name, m)
        else:
            shutdown_engine(m.host)
        time.sleep(PHASE_PAUSE_S)
    assert best is not None
    return best[0], probes


def _compare(rows, judge: JudgeConfig, model: str, dtype: str, k: int, max_new_tokens: int,
             workers: int, engine_dtype: str | None = None) -> dict[str, Any]:
    """Compare mode: ours as `esc-eval score` runs it (the Ray pool, one engine per core) and on
    one in-process engine, against the score.py loop on one engine bound the way it runs fastest."""
    import ray

    from esc_eval.sim.bench.loops.scale import measure_service

    out: dict[str, Any] = {}
    n = len(rows)
    ray_was_up = ray.is_initialized()
    service = measure_service(rows, judge, dtype, workers=workers)
    if not ray_was_up:
        ray.shutdown()  # its workers' engines gone: the phases below get the whole machine
    time.sleep(PHASE_PAUSE_S)
    Counting = _counting_model_class()
    median_first = _median_subset(rows, 1, [sum(len(t["text"]) for t in r["turns"]) for r in rows])[0]
    probe_messages = judge_messages(judge.dimensions[0], _turns(rows[median_first]), rows[median_first]["language"],
                                    rubric=judge.rubric, rendering=judge.rendering, order=judge.prompt_order)
    bind_name, probes = _fastest_reference_binding(Counting, model, engine_dtype, probe_messages, max_new_tokens)
    out["reference_binding"] = {"chosen": bind_name, "probes": probes}
    # the probe's winning engine, still running (keyed by its kwargs and binding): distinct from ours_model's
    with _thread_bind(_reference_bindings()[bind_name]):
        ref_model = Counting(model, enable_prefix_caching=False, **_dtype_kwargs(engine_dtype))
    ref_start = probes[bind_name]["engine_start_s"]
    ours_model = Counting(model, **_dtype_kwargs(engine_dtype))  # default engine kwargs: prefix caching on, our CPU layout
    out["engine_start_s"] = {"ours_one_engine": round(_start(ours_model), 1), "reference": round(ref_start, 1)}

    async def main() -> None:
        await _warm_up(ours_model)
        await _warm_up(ref_model)
        one, one_rows = await _ours(ours_model, judge, rows, "dialogue_major")
        await asyncio.sleep(PHASE_PAUSE_S)
        dim_major, dim_rows = await _ours(ours_model, judge, rows, "dimension_major")
        await asyncio.sleep(PHASE_PAUSE_S)
        batched, _ = await _ours(ref_model, judge, rows, "dialogue_major")
        await asyncio.sleep(PHASE_PAUSE_S)
        prefill_ref, prefill_rows = await _sequential(ref_model, judge, rows, list(range(n)), None)
        tokens = [sum(x["prompt_tokens"] or 0 for x in one_rows if x["dialogue"] == i) for i in range(n)]
        subset = _median_subset(rows, k, tokens)
        await asyncio.sleep(PHASE_PAUSE_S)
        ref, ref_rows = await _sequential(ref_model, judge, rows, subset, max_new_tokens)
        ref.update(dialogues=len(subset), dialogue_ids=[f"{rows[i]['target_model']}_{rows[i]['language']}/{rows[i]['card_id']}" for i in subset],
                   prompt_tokens_per_dialogue=round(statistics.fmean(tokens[i] for i in subset)),
                   max_new_tokens=max_new_tokens)
        one.update(dialogues=n, prompt_tokens_per_dialogue=round(statistics.fmean(tokens)))
        prefill_ref["dialogues"] = n
        out["phases"] = {"ours": service, "ours_one_engine": one, "ours_one_engine_dimension_major": dim_major,
                         "batched_no_cache": batched, "prefill_reference": prefill_ref, "reference": ref}
        per = {"ours": service["wall_s"] / n, "ours_one_engine": one["wall_s"] / n,
               "prefill_reference": prefill_ref["wall_s"] / n, "reference": ref["wall_s"] / len(subset)}
        out["seconds_per_dialogue"] = {name: round(v, 3) for name, v in per.items()}
        out["speedup_vs_reference"] = round(per["reference"] / per["ours"], 2)
        out["speedup_vs_prefill_reference"] = round(per["prefill_reference"] / per["ours"], 2)
        out["one_engine_speedup_vs_reference"] = round(per["reference"] / per["ours_one_engine"], 2)
        out["one_engine_speedup_vs_prefill_reference"] = round(per["prefill_reference"] / per["ours_one_engine"], 2)
        out["reference_decoded_tokens_per_call"] = ref["decoded_tokens_mean"]
        out["prompt_tokens_per_s"] = {name: p["prompt_tokens_per_s"] for name, p in out["phases"].items()}
        out["engine_batched_prefill_tokens_per_s_no_cache"] = batched["prompt_tokens_per_s"]
        out["ordering"] = {"dialogue_major_s": one["wall_s"], "dimension_major_s": dim_major["wall_s"],
                           "dialogue_major_cached_tokens": one["cached_prompt_tokens"],
                           "dimension_major_cached_tokens": dim_major["cached_prompt_tokens"]}
        out["score_agreement"] = {"ours_vs_dimension_major": _agreement(one_rows, dim_rows),
                                  "ours_vs_prefill_reference": _agreement(one_rows, prefill_rows),
                                  "ours_vs_reference_compat": _agreement(one_rows, ref_rows)}

    asyncio.run(main())
    out["notes"] = [
        "ours: what `esc-eval score` runs (ScoringJob on the Ray pool, one vLLM engine per core bound to it, prefix "
        "caching on); one marked warm-up dialogue per engine and engine start are excluded from the timing",
        "ours_one_engine (and its dimension-major variant): the same requests on one in-process engine, vLLM's default "
        "binding (one core); prefix cache reset before each; all 7 x N requests in flight",
        "batched_no_cache, prefill_reference and reference run on a separate engine with enable_prefix_caching=False, "
        "so caching is one of the things that differ from ours; that engine is bound the way the reference ran "
        "fastest in a one-call probe (reference_binding)",
        f"reference runs on {k} of {n} dialogues (those nearest the median prompt length); "
        "speedup_vs_reference compares seconds per dialogue",
        "reference parses answers with the official rule (compat: the first of 0,1,2,3,4 found in the answer); ours reads P('0'..'4') in one forward pass",
    ]
    return out


def bench_score(dialogues: int = SCORE_DIALOGUES, out: Path | None = None, source: Path | None = None,
                reference_dialogues: int = SCORE_REFERENCE_DIALOGUES, max_new_tokens: int = OFFICIAL_MAX_NEW_TOKENS,
                model: str = EMBEDDED, prompt_order: str | None = None, dtype: str = DEFAULT_DTYPE, project_gpu: bool = False,
                budget_s: float = SCORE_BUDGET_S, gpu_prefill_rate: float | None = None, workers: int = SCORE_WORKERS) -> dict[str, Any]:
    """Scoring throughput: ours (batched logprob, prefix cache) vs the official score.py loop; the
    result is printed as JSON (and written to `out`)."""
    result = run_bench(dialogues, source, reference_dialogues, max_new_tokens, model, prompt_order, dtype, project_gpu,
                       budget_s, gpu_prefill_rate, workers)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
    return result
