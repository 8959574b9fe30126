"""sim.bench.gpu: `esc-eval bench gpu`: scoring and simulation through the pool on whatever this
machine has, against a minimal vLLM reference on the same engines (reference.py), with vLLM's own
token counts from wherever our engines live (sim/bench/engine_probe.py) and the card's prefill-FLOP bound
(hardware.py)."""
from esc_eval.sim.bench.gpu.hardware import machine, model_params, peak_bf16, prefill_bound_s, versions
from esc_eval.sim.bench.engine_probe import EngineProbe, counts_delta, probe_engines, probe_replicas, probe_workers
from esc_eval.sim.bench.gpu.reference import model_setup, score_reference, simulation_reference
from esc_eval.sim.bench.gpu.bench import GpuBenchConfig, failed_phases, run_bench_gpu

__all__ = [
    "EngineProbe", "GpuBenchConfig", "counts_delta", "failed_phases", "machine", "model_params", "model_setup",
    "peak_bf16", "prefill_bound_s", "probe_engines", "probe_replicas", "probe_workers", "run_bench_gpu",
    "score_reference", "simulation_reference", "versions",
]
