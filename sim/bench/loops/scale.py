"""`esc-eval bench score` at the users' scale: re-scoring the paper's 8.5K dialogues.

- `scale_dialogues`: N dialogues with the official samples' length distribution: the official
  dialogues repeated, copy k of dialogue k mod n, its first turn marked with the copy number so
  no two copies share a cacheable prefix (a repeat must not score for free from the cache).
- `prefill_accounting`: per dialogue, the judge's prompt tokens for the seven dimensions and the
  part an ideal prefix cache cannot serve, for both prompt orders: rubric-first (the paper's: the
  rubric prefix is shared with the same dimension's prompt of the dialogue before, the dialogue
  is read seven times) and dialogue-first (the dialogue is read once, then each rubric).
- `measure_scale`: the production scoring path (ScoringJob on the Ray pool, one engine per core)
  over those dialogues for at most `budget_s` seconds after engine start -> dialogues/hour.
- `project_gpu`: hours for 8.5K dialogues x 7 dimensions with a 7B judge on one H100 and one
  8xH100 node from the uncached prefill tokens and a published prefill rate (ASSUMED_H100_PREFILL).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from esc_eval.serve.devices.cpu import KV_CACHE_ENV
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.prompts import judge_messages
from esc_eval.sim.pool.config import ExecutionConfig

PAPER_DIALOGUES = 8500  # the paper's dialogues re-scored by ESC-RANK (Section 4)
COPY_MARK = "case"  # a repeated dialogue's first turn opens "(case k)": copies distinct, prefix caches honest
# A published H100 figure for a 7B model: TensorRT-LLM's performance table (release 0.5.0),
# LLaMA 7B, FP8, one H100, batch 64, 2,048 input and 128 output tokens: 2,058 output tokens/s,
# i.e. 16.1 requests/s x 2,048 = 32.9K input tokens/s. That time also decoded 128 tokens per
# request, so it is a lower bound of the prefill rate (a 1-token judge call is almost all prefill).
ASSUMED_H100_PREFILL = {
    "tokens_per_s": round(2058 / 128 * 2048),
    "source": "https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/release/0.5.0/docs/source/performance.md",
    "derivation": "TensorRT-LLM 0.5.0 performance table, H100 FP8, LLaMA 7B, batch 64, input 2048, output 128: "
                  "2,058 output tok/s -> 16.1 req/s x 2,048 input tokens (a lower bound: decode time included)",
}


def _turns(row: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["speaker"], t["text"]) for t in row["turns"]]


def scale_dialogues(rows: list[dict[str, Any]], n: int, mark: str = COPY_MARK) -> Iterator[dict[str, Any]]:
    """n dialogue rows from `rows` repeated (lazily: 8.5K rows of turns need not sit in memory twice),
    copy k's first turn opening with "(mark k)"."""
    if not rows:
        raise ValueError("no dialogues to repeat")
    for k in range(n):
        base = rows[k % len(rows)]
        turns = [dict(t) for t in base["turns"]]
        turns[0]["text"] = f"({mark} {k}) {turns[0]['text']}"
        yield {**base, "turns": turns, "dialogue_id": f"{base['dialogue_id']}-{mark}{k}", "card_id": f"{base['card_id']}-{mark}{k}"}


def _lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefill_accounting(rows: list[dict[str, Any]], judge: JudgeConfig, tokenizer) -> dict[str, Any]:
    """Judge prompt tokens per dialogue (7 dimensions) and those an ideal prefix cache cannot serve,
    for both prompt orders, tokenized with `tokenizer`'s chat template."""

    def ids(dim: str, row: dict[str, Any], order: str) -> list[int]:
        msgs = judge_messages(dim, _turns(row), row["language"], rubric=judge.rubric, rendering=judge.rendering, order=order)
        text = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in msgs], tokenize=False,
                                             add_generation_prompt=True)
        return tokenizer.encode(text, add_special_tokens=False)

    out: dict[str, Any] = {}
    for order in ("rubric_first", "dialogue_first"):
        prompts = [{dim: ids(dim, r, order) for dim in judge.dimensions} for r in rows]
        total, uncached = [], []
        for i, per in enumerate(prompts):
            # an ideal prefix cache holds the previous dialogue's prompts: in both orders a prompt can
            # reuse what it shares with the same dimension's prompt there (the rubric, rubric-first;
            # the official opener turn, either way); dialogue-first, the dialogue's own first prompt too
            other = prompts[i - 1] if i > 0 else None
            first_dim = judge.dimensions[0]
            total.append(sum(len(p) for p in per.values()))
            n_uncached = 0
            for d, p in per.items():
                shared = _lcp(p, other[d]) if other else 0
                if order == "dialogue_first" and d != first_dim:
                    shared = max(shared, _lcp(p, per[first_dim]))
                n_uncached += len(p) - shared
            uncached.append(n_uncached)
        out[order] = {"prompt_tokens_per_dialogue": round(statistics.fmean(total)),
                      "uncached_prefill_tokens_per_dialogue": round(statistics.fmean(uncached)),
                      "by_language": {lang: round(statistics.fmean(u for u, r in zip(uncached, rows) if r["language"] == lang))
                                      for lang in sorted({r["language"] for r in rows})}}
    out["dialogue_first_saving"] = round(out["rubric_first"]["uncached_prefill_tokens_per_dialogue"]
                                         / max(1, out["dialogue_first"]["uncached_prefill_tokens_per_dialogue"]), 2)
    return out


def project_gpu(accounting: dict[str, Any], dialogues: int = PAPER_DIALOGUES,
                prefill_tokens_per_s: float | None = None) -> dict[str, Any]:
    """Hours to score `dialogues` x 7 dimensions on one H100 and on one 8xH100 node (8 data-parallel
    replicas, linear scaling assumed), from the uncached prefill tokens per dialogue."""
    rate = float(prefill_tokens_per_s or ASSUMED_H100_PREFILL["tokens_per_s"])
    rows: dict[str, Any] = {}
    for order in ("rubric_first", "dialogue_first"):
        tokens = dialogues * accounting[order]["uncached_prefill_tokens_per_dialogue"]
        one = tokens / rate / 3600
        rows[order] = {"prefill_tokens": tokens, "hours_1xH100": round(one, 2), "hours_8xH100_node": round(one / 8, 3),
                       "minutes_8xH100_node": round(one / 8 * 60, 1)}
    return {"dialogues": dialogues, "dimensions": 7, "judge": "a 7B model (the paper's ESC-RANK: InternLM2-7B-Chat)",
            "assumed_prefill_tokens_per_s_per_H100": rate,
            "source": ASSUMED_H100_PREFILL["source"] if prefill_tokens_per_s is None else "given with --gpu-prefill-rate",
            "derivation": ASSUMED_H100_PREFILL["derivation"] if prefill_tokens_per_s is None else None,
            "by_prompt_order": rows,
            "caveats": ["token counts use the embedded model's tokenizer (SmolLM2), not the 7B judge's; SmolLM2 splits "
                        "Chinese into far more tokens than InternLM2's tokenizer, so zh counts overstate the work",
                        "decode is one token per call (logprob method) and is ignored",
                        "8xH100: 8 independent replicas, perfect data-parallel scaling"]}


def _budgeted(items: Iterable[dict[str, Any]], deadline: float) -> Iterator[dict[str, Any]]:
    """Stop handing out items once `deadline` (time.monotonic) has passed; those in flight finish."""
    for item in items:
        if time.monotonic() >= deadline:
            return
        yield item


def _scoring_item(row: dict[str, Any], judge: JudgeConfig) -> dict[str, Any]:
    return {"run_id": row.get("run_id") or "bench-scale", "dialogue_id": row["dialogue_id"],
            "target_model": row.get("target_model") or "official", "language": row["language"],
            "turns": row["turns"], "status": "ok", "todo": {judge.judge_id: list(judge.dimensions)}}


def _score_on_pool(rows: list[dict[str, Any]], items: Iterable[dict[str, Any]], judge: JudgeConfig, dtype: str,
                   workers: int, concurrency: int, kv_cache_gb: int, chunk_size: int,
                   budget_s: float | None = None) -> tuple[Any, float, dict[str, Any]]:
    """ScoringJob on a fresh Ray pool of `workers` engines, one per core: one marked copy of a
    dialogue of `rows` per worker first (engines up before the clock, and nothing the measured
    items could reuse from the cache), then the clock runs over `items`, handed out for at most
    `budget_s` s when given. Returns the pool's stats, the wall seconds and the set-up."""
    from esc_eval.sim.pool.pool import WorkerPool
    from esc_eval.sim.pool.on_ray import ensure_ray
    from esc_eval.sim.jobs.scoring import ScoringJob

    ex = ExecutionConfig(workers=workers, concurrency=concurrency, chunk_size=chunk_size, log_to_driver=False,
                         num_cpus_per_worker=min(1.0, (os.cpu_count() or 1) / workers), dtype=dtype,
                         cpu_bind="per_worker" if workers > 1 else "auto", flush_rows=512, flush_seconds=30,
                         env={KV_CACHE_ENV: str(kv_cache_gb)})
    cfg = ScoringConfig(judge=judge, execution=ex)
    ensure_ray(ex)
    with tempfile.TemporaryDirectory(prefix="esc-bench-scale-") as folder, WorkerPool(ex) as pool:
        tmp = Path(folder)
        # chunks of 1 go to the least-loaded worker: each engine gets one warm-up dialogue
        warm = [_scoring_item(r, judge) for r in scale_dialogues(rows, workers, mark="warm-up")]
        pool.run(ScoringJob(cfg), warm, str(tmp / "warm"), execution=ex.model_copy(update={"chunk_size": 1}))
        started = time.monotonic()
        if budget_s is not None:
            items = _budgeted(items, started + budget_s)
        stats = pool.run(ScoringJob(cfg), items, str(tmp / "run"))
        wall = time.monotonic() - started
    setup = {"workers": workers, "cpu_bind": ex.cpu_bind, "concurrency_per_worker": concurrency,
             "kv_cache_gb_per_engine": kv_cache_gb, "chunk_size": chunk_size}
    return stats, wall, setup


def _workers(workers: int) -> int:
    return workers or (os.cpu_count() or 1)


def measure_scale(rows: list[dict[str, Any]], n: int, judge: JudgeConfig, dtype: str, budget_s: float,
                  workers: int = 0, concurrency: int = 4, kv_cache_gb: int = 3) -> dict[str, Any]:
    """Score up to n repeated dialogues through the production path (ScoringJob on the Ray pool, one
    engine per core, bound to it) for at most `budget_s` s after the engines are up."""
    workers = _workers(workers)
    items = (_scoring_item(r, judge) for r in scale_dialogues(rows, n))
    stats, wall, setup = _score_on_pool(rows, items, judge, dtype, workers, concurrency, kv_cache_gb, chunk_size=4,
                                        budget_s=budget_s)
    dph = stats.done / wall * 3600 if wall > 0 else 0.0
    return {"path": "ScoringJob on the Ray pool (the service's scoring path)", **setup,
            "requested_dialogues": n, "scored_dialogues": stats.done, "failed": stats.failed,
            "budget_s": budget_s, "wall_s": round(wall, 1), "dialogues_per_hour": round(dph, 1),
            "prompt_tokens_per_s": round(stats.tokens / wall, 1) if wall > 0 else None,
            "hours_for_requested": round(n / dph, 2) if dph else None,
            "complete": stats.done >= n}


def measure_service(rows: list[dict[str, Any]], judge: JudgeConfig, dtype: str, workers: int = 0,
                    concurrency: int = 4, kv_cache_gb: int = 3) -> dict[str, Any]:
    """Score `rows` once through the production path (what `esc-eval score` runs: ScoringJob on the
    Ray pool, one engine per core), each dialogue its own chunk so they spread over the engines."""
    workers = _workers(workers)
    stats, wall, setup = _score_on_pool(rows, [_scoring_item(r, judge) for r in rows], judge, dtype, workers,
                                        concurrency, kv_cache_gb, chunk_size=1)
    return {"path": "ScoringJob on the Ray pool (the service's scoring path)", **setup,
            "dialogues": len(rows), "scored_dialogues": stats.done, "failed": stats.failed,
            "wall_s": round(wall, 3), "prompt_tokens": stats.tokens,
            "prompt_tokens_per_s": round(stats.tokens / wall, 1) if wall > 0 else None}
