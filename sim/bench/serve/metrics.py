"""The figures of `esc-eval bench serve`, computed as vLLM's `vllm bench serve` computes them
(vllm/benchmarks/serve.py `calculate_metrics`), with its field names where it has one:

  request_throughput, output_throughput, total_token_throughput   per second of the level's duration
  mean/median/std/p50/p90/p99 _ttft_ms, _tpot_ms, _itl_ms, _e2el_ms
  tpot = (e2el - ttft) / (output tokens - 1), over requests with more than one output token
  request_goodput: completed requests per second meeting every SLO (tpot counts as 0 for a
  one-token answer, as vLLM does)
Ours beside them: units (dialogues or judge items) completed and per second, TTFT by turn index
(a unit's k-th request: does the prefix cache hold a dialogue's history?), and failures grouped
by reason.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

import numpy as np

from esc_eval.sim.bench.serve.client import BenchInputError, RequestRecord

PERCENTILES = (50, 90, 99)
SLO_METRICS = ("ttft", "tpot", "e2el")
_SLO = re.compile(r"^\s*(?P<name>[a-z][a-z0-9_]*)\s*[:=]\s*(?P<value>[0-9]*\.?[0-9]+)\s*(?P<unit>ms|s)?\s*$")


def parse_slos(items: Iterable[str]) -> dict[str, float]:
    """'ttft:500', 'tpot:50ms', 'e2el:2s' -> {metric: milliseconds}; BenchInputError names the bad one."""
    out: dict[str, float] = {}
    for item in items:
        for part in str(item).split(","):
            if not part.strip():
                continue
            m = _SLO.match(part.lower())
            if not m or m.group("name") not in SLO_METRICS:
                raise BenchInputError(f"--slo {part.strip()!r}: expected METRIC:VALUE with METRIC one of "
                                      f"{', '.join(SLO_METRICS)} and VALUE in ms (or with 'ms'/'s'), e.g. ttft:500")
            value = float(m.group("value")) * (1000.0 if m.group("unit") == "s" else 1.0)
            out[m.group("name")] = value
    return out


def _stats(name: str, values: list[float]) -> dict[str, float]:
    arr = np.asarray(values or [0.0], dtype=float) * 1000.0
    out = {f"mean_{name}_ms": float(arr.mean()), f"median_{name}_ms": float(np.median(arr)),
           f"std_{name}_ms": float(arr.std())}
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(arr, p))
    return out


def ttft_by_turn(records: list[RequestRecord]) -> dict[str, dict[str, float]]:
    """Per turn index (a unit's k-th request, from 0): count, mean/median/p90 TTFT in ms, mean prompt tokens."""
    by: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.success:
            by.setdefault(r.turn, []).append(r)
    out = {}
    for turn in sorted(by):
        rs = by[turn]
        ttft = np.asarray([r.ttft for r in rs]) * 1000.0
        out[str(turn)] = {"count": len(rs), "mean_ttft_ms": float(ttft.mean()), "median_ttft_ms": float(np.median(ttft)),
                          "p90_ttft_ms": float(np.percentile(ttft, 90)),
                          "mean_prompt_tokens": float(np.mean([r.prompt_tokens for r in rs]))}
    return out


def failure_reasons(errors: Iterable[str], keep: int = 10) -> dict[str, int]:
    """Failures grouped by reason (the text before its details), most frequent first."""
    counts = Counter(" ".join(e.split())[:120] for e in errors if e)
    return dict(counts.most_common(keep))


def request_details(records: list[RequestRecord], level_start: float) -> dict[str, list]:
    """Per-request figures in launch order, named as `vllm bench serve --save-detailed` names them
    (seconds; start_times from the level's start; failed requests included, with their error)."""
    rs = sorted(records, key=lambda r: r.start_time)
    return {"units": [r.unit for r in rs], "turns": [r.turn for r in rs],
            "start_times": [r.start_time - level_start for r in rs], "ttfts": [r.ttft for r in rs],
            "itls": [list(r.itl) for r in rs], "e2els": [r.latency for r in rs],
            "input_lens": [r.prompt_tokens for r in rs], "output_lens": [r.output_tokens for r in rs],
            "errors": [r.error for r in rs]}


def level_metrics(records: list[RequestRecord], duration_s: float, slos: dict[str, float] | None = None,
                  units_completed: int = 0, units_failed: int = 0, unit_errors: Iterable[str] = ()) -> dict[str, Any]:
    """vLLM-style metrics of one load level from its request records."""
    ok = [r for r in records if r.success]
    failed = [r for r in records if not r.success]
    dur = max(duration_s, 1e-9)
    total_in = sum(r.prompt_tokens for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    out: dict[str, Any] = {
        "duration": duration_s, "completed": len(ok), "failed": len(failed),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur, "request_goodput": None,
        "output_throughput": total_out / dur, "total_token_throughput": (total_in + total_out) / dur,
        "units_completed": units_completed, "units_failed": units_failed, "unit_throughput": units_completed / dur,
    }
    if slos:
        good = 0
        for r in ok:
            values = {"ttft": r.ttft, "e2el": r.latency,
                      "tpot": (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0}
            good += all(values[k] * 1000.0 <= v for k, v in slos.items())
        out["request_goodput"] = good / dur
        out["slos_ms"] = dict(slos)
    out.update(_stats("ttft", [r.ttft for r in ok]))
    out.update(_stats("tpot", tpots))
    out.update(_stats("itl", [x for r in ok for x in r.itl]))
    out.update(_stats("e2el", [r.latency for r in ok]))
    out["ttft_by_turn"] = ttft_by_turn(records)
    out["failures"] = failure_reasons([r.error for r in failed])
    unit_reasons = failure_reasons(unit_errors)
    if unit_reasons:
        out["unit_failures"] = unit_reasons
    return out


def ratios(arm: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    """arm / base for the headline figures of one level (throughputs: >1 is better; latencies: <1)."""
    keys = ("request_throughput", "output_throughput", "total_token_throughput", "unit_throughput", "mean_ttft_ms",
            "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
    out: dict[str, float | None] = {}
    for k in keys:
        a, b = arm.get(k), base.get(k)
        out[k] = round(a / b, 3) if a is not None and b else None
    turns = {}
    for t, v in (arm.get("ttft_by_turn") or {}).items():
        b = (base.get("ttft_by_turn") or {}).get(t)
        if b and b["mean_ttft_ms"]:
            turns[t] = round(v["mean_ttft_ms"] / b["mean_ttft_ms"], 3)
    out["mean_ttft_ms_by_turn"] = turns
    return out
