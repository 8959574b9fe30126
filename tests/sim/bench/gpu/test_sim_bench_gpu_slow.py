"""bench gpu on the CPU, small: ours through the Ray pool as `score` / `simulate` run it, the references
on the session's engine (the simulation's: same engine arguments) and an offline LLM (scoring), the
JSON checked against itself: vLLM's counts agree with the rows, both sides read the same prompts."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_bench_gpu_on_the_cpu_measures_both_sides_from_vllms_counts(embedded_model, ray_local):
    from esc_eval.serve.backends.vllm_engine import resolve_model_path
    from esc_eval.sim.bench.gpu.bench import GpuBenchConfig, failed_phases, run_bench_gpu

    lines: list[str] = []
    cfg = GpuBenchConfig(dialogues=2, sim_dialogues=2, prompt_orders=["dialogue_first"], max_tokens=8,
                         dimensions=["Fluency", "Empathy"])
    parts: list[str] = []
    out = run_bench_gpu(cfg, say=lines.append, on_part=lambda name, part: parts.append(name))
    # each side's figures handed over as soon as measured (esc-eval check keeps them past a deadline)
    assert parts == ["simulation.ours", "scoring.dialogue_first.ours", "simulation.reference", "scoring.reference"]
    path = resolve_model_path("embedded")

    assert out["machine"]["device"] == "cpu" and out["machine"]["peak_bf16"] is None
    assert out["versions"]["vllm"] and out["versions"]["torch"] and out["versions"]["ray"]
    assert out["settings"]["dialogues"] == 2 and out["settings"]["dimensions"] == ["Fluency", "Empathy"]

    sim = out["simulation"]
    ours, ref = sim["ours"], sim["reference"]
    assert ours["completed"] == 2 and ours["failed"] == 0 and ref["completed"] == 2
    assert ref["engines"][path]["already_running"]  # the session's engine: the same engine arguments as ours
    assert [e["engine_kwargs"] for e in ours["engines"]] == [ref["engines"][path]["engine_kwargs"]]
    mine = ours["tokens"][path]
    # vLLM's own counts over the timed run: 2 dialogues x 10 calls, each call's generated tokens in the rows
    assert mine["requests"] == 20 and mine["generation_tokens"] == ours["generated_tokens_in_rows"]
    assert 0 < mine["uncached_prompt_tokens"] <= mine["prompt_tokens"]
    assert ref["tokens"][path]["requests"] == 20 and ref["tokens"][path]["generation_tokens"] <= 20 * 8
    for side in (ours, ref):
        assert side["dialogues_per_s"] > 0 and side["uncached_prefill_tokens_per_s"] > 0 and side["decode_tokens_per_s"] > 0
    assert sim["ours_vs_reference"]["dialogues_per_s"] > 0
    assert sim["prefill_bound"]["bound_s"] is None and "peak" in sim["prefill_bound"]["note"]  # a CPU: no peak

    sc = out["scoring"]["dialogue_first"]
    ours, ref = sc["ours"], sc["reference"]
    assert ours["scored"] == 2 and ours["failed"] == 0
    assert failed_phases(out) == [] and ours["outcome"]["error_rows"] == 0  # bench gpu exits 0 on this
    mine, theirs = ours["tokens"][path], ref["tokens"][path]
    # the same prompts on both sides: 2 dialogues x 2 dimensions, one answer token each
    assert mine["requests"] == theirs["requests"] == 4 and mine["generation_tokens"] == 4
    assert mine["prompt_tokens"] == theirs["prompt_tokens"] == ours["prompt_tokens_in_rows"]
    assert mine["cached_prompt_tokens"] > 0  # dialogue first: a dialogue's second prompt reuses its first
    assert ref["engine_start_s"] > 0 and ours["warm_up_s"] > 0
    assert [e["engine_kwargs"] for e in ours["engines"]] == [ref["engine_kwargs"]]  # the offline engine: ours' arguments
    assert sc["ours_vs_reference"]["uncached_prefill_tokens_per_s"] > 0
    assert any("scoring, reference" in line for line in lines)
