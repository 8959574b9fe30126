"""bench gpu without an engine: the peak table, the prefill bound, vLLM's counts read through a stat
logger (stand-in stats objects of vLLM's shape), the per-side figures, distinct inputs, bad input.
The measurement itself on the real engine: test_sim_bench_gpu_slow.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from esc_eval.serve.engines.vllm_compat import TokenCounter, kv_cache_blocks, token_counter
from esc_eval.sim.bench.engine_probe import counts_delta
from esc_eval.sim.bench.gpu.bench import _rates, compare, distinct_cards, failed_phases
from esc_eval.sim.bench.gpu.hardware import peak_bf16, prefill_bound_s


@pytest.mark.parametrize("name, tflops", [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0), ("NVIDIA H200", 989.0),
    ("NVIDIA GH200 480GB", 989.0), ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA L40S", 362.0), ("NVIDIA L40", 181.0),
    ("NVIDIA L4", 121.0), ("NVIDIA A10G", 125.0), ("NVIDIA A10", 125.0), ("Tesla T4", None), (None, None)])
def test_peak_by_gpu_name_longest_model_first(name, tflops):
    peak = peak_bf16(name)
    assert (peak["tflops"] if peak else None) == tflops
    if peak:
        assert peak["source"].startswith("https://")


def test_prefill_bound_is_two_flops_per_parameter_and_uncached_token():
    # the figure: a 7.38B judge, ~10K uncached tokens per dialogue rubric-first, 8,500 dialogues, H100
    bound = prefill_bound_s({"j7b": 7.38e9}, {"j7b": 10_000 * 8500}, 989.0)
    assert bound / 60 == pytest.approx(21.1, abs=0.1)
    two = prefill_bound_s({"r": 13.1e9, "t": 7.38e9}, {"r": 1000, "t": 2000}, 100.0)
    assert two == pytest.approx((2 * 13.1e9 * 1000 + 2 * 7.38e9 * 2000) / 100e12)
    assert prefill_bound_s({"j": 1e9}, {"j": 5}, None) is None  # no peak (a CPU)
    assert prefill_bound_s({"j": None}, {"j": 5}, 100.0) is None  # parameters unknown
    assert prefill_bound_s({}, {"j": 0}, 100.0) == 0.0  # nothing to prefill


def _iteration(*reqs, preempted=(0, 0, 0)):
    finished = [SimpleNamespace(num_prompt_tokens=p, num_cached_tokens=c, num_generation_tokens=g) for p, c, g in reqs]
    sched = SimpleNamespace(prefix_cache_stats=SimpleNamespace(preempted_requests=preempted[0], preempted_queries=preempted[1],
                                                               preempted_hits=preempted[2]))
    return sched, SimpleNamespace(finished_requests=finished)


def test_token_counter_adds_finished_requests_as_the_manager_calls_it():
    manager = SimpleNamespace(stat_loggers=[object()])
    engine = SimpleNamespace(logger_manager=manager, vllm_config=SimpleNamespace(
        cache_config=SimpleNamespace(num_gpu_blocks=100, block_size=16)))
    counter = token_counter(engine)
    assert counter is token_counter(engine) and manager.stat_loggers[-1] is counter and len(manager.stat_loggers) == 2
    sched, it = _iteration((100, 64, 1), (50, 0, 7), preempted=(1, 40, 16))
    for logger in manager.stat_loggers[1:]:  # vLLM 0.26 and 0.32 pass these by keyword
        logger.record(scheduler_stats=sched, iteration_stats=it, mm_cache_stats=None, engine_idx=0)
    counter.record(None, None)  # a step with no stats
    counter.log()
    counter.log_engine_initialized()  # the manager's notifications: nothing to do
    assert counter.snapshot() == {"requests": 2, "prompt_tokens": 150, "cached_prompt_tokens": 64, "generation_tokens": 8,
                                  "recomputed_prompt_tokens": 24, "preemptions": 1}
    assert kv_cache_blocks(engine) == {"blocks": 100, "block_size": 16, "tokens": 1600, "max_concurrency": None}
    assert token_counter(SimpleNamespace(logger_manager=None)) is None  # started with disable_log_stats
    assert isinstance(counter, TokenCounter)


def test_counts_delta_per_model_across_workers_and_engines():
    def e(eid, model, **c):
        return {"id": eid, "model": model, "counts": {"prompt_tokens": 0, "generation_tokens": 0, **c}}

    before = [e("1:a", "m", prompt_tokens=10), e("2:a", "m", prompt_tokens=5)]
    after = [e("1:a", "m", prompt_tokens=30, generation_tokens=3), e("2:a", "m", prompt_tokens=25),
             e("2:b", "t", prompt_tokens=7)]  # an engine started after the first probe counts from zero
    assert counts_delta(before, after) == {"m": {"prompt_tokens": 40, "generation_tokens": 3},
                                           "t": {"prompt_tokens": 7, "generation_tokens": 0}}
    assert counts_delta(before, []) is None  # no engine in the workers (Serve replicas)
    assert counts_delta(before, [{"id": "x", "model": "m", "counts": None}]) is None


def test_rates_ratios_and_the_bound_share():
    tok = lambda p, c, g: {"m": {"prompt_tokens": p, "cached_prompt_tokens": c, "generation_tokens": g}}  # noqa: E731
    ours, ref = {"wall_s": 10.0}, {"wall_s": 20.0}
    _rates(ours, tok(1000, 400, 50), 100)
    _rates(ref, tok(1000, 200, 50), 100)
    assert ours["dialogues_per_s"] == 10.0 and ours["uncached_prefill_tokens_per_s"] == 60.0
    assert ours["decode_tokens_per_s"] == 5.0 and ref["uncached_prefill_tokens_per_s"] == 40.0
    out = compare(ours, ref, {"m": 1e9}, {"tflops": 1e-3})
    assert out["ours_vs_reference"] == {"dialogues_per_s": 2.0, "uncached_prefill_tokens_per_s": 1.5, "decode_tokens_per_s": 2.0}
    b = out["prefill_bound"]
    # the fewer uncached tokens of the two sides: 600 (ours' cache served more)
    assert b["uncached_prompt_tokens"] == {"m": 600} and b["bound_s"] == pytest.approx(2 * 1e9 * 600 / 1e9)
    assert b["share_ours"] == pytest.approx(120.0) and b["share_reference"] == pytest.approx(60.0)
    none = compare(ours, ref, {"m": 1e9}, None)["prefill_bound"]
    assert none["bound_s"] is None and "peak" in none["note"]
    blind = {"wall_s": 5.0}
    _rates(blind, None, 10)  # no counts from vLLM: no token rates, the dialogue rate stays
    assert blind["dialogues_per_s"] == 2.0 and blind["uncached_prefill_tokens_per_s"] is None


def test_a_phase_with_failed_calls_is_named_not_measured():
    ok = {"dialogues": 4, "failed": 0, "outcome": {"error_rows": 0}}
    out = {"simulation": {"ours": dict(ok)}, "scoring": {"rubric_first": {"ours": dict(ok)}, "dialogue_first": {
        "ours": {"dialogues": 4, "failed": 0, "outcome": {"error_rows": 5, "first_error": "EngineDeadError: boom"}}}}}
    assert failed_phases({"simulation": {"ours": dict(ok)}, "scoring": {"rubric_first": {"ours": dict(ok)}}}) == []
    (line,) = failed_phases(out)
    assert line.startswith("scoring dialogue_first: 0 of 4 dialogues failed, 5 judge calls failed")
    assert "EngineDeadError: boom" in line
    out["simulation"]["ours"]["failed"] = 4
    assert failed_phases(out)[0].startswith("simulation: 4 of 4 dialogues failed")


def test_distinct_cards_have_distinct_texts():
    cards, where = distinct_cards(None, 9)
    assert len({c.text for c in cards}) == 9 and len({c.id for c in cards}) == 9
    assert "(case 8)" in cards[8].text and "repeated" in where


def test_bad_input_is_one_line_before_anything_starts():
    from esc_eval.cli.app import app

    runner = CliRunner()
    for args, word in ((["--phases", "nope"], "phases"), (["--prompt-order", "paper"], "prompt_orders"),
                       (["-n", "0"], "dialogues"), (["--judge", "no-such-model"], "no-such-model")):
        res = runner.invoke(app, ["bench", "gpu", *args])
        assert res.exit_code != 0 and word in str(res.output) + str(res.exception)


def test_ray_serve_llm_aliases_name_the_modules_vllm_has_now(monkeypatch):
    import importlib
    import sys
    import types

    from esc_eval.serve.engines import vllm_compat

    # vLLM 0.32 has every path Ray Serve LLM imports: nothing is aliased; vLLM 0.26 lacks them: aliased
    older = any(isinstance(f, vllm_compat._AliasFinder) for f in sys.meta_path) or any(
        vllm_compat._missing(m) for m in vllm_compat.RAY_SERVE_LLM_ALIASES)
    assert vllm_compat.ray_serve_llm_aliases() is older
    assert any(isinstance(f, vllm_compat._AliasFinder) for f in sys.meta_path) is older
    if older:
        from ray.serve.llm.openai_api_models import ChatCompletionRequest  # noqa: F401 - imports now
    assert vllm_compat.replica_runtime_env() == {"worker_process_setup_hook": vllm_compat.SETUP_HOOK,
                                                 "env_vars": {vllm_compat.SETUP_HOOK_ENV: vllm_compat.SETUP_HOOK}}
    from ray._private import ray_constants

    assert ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR == vllm_compat.SETUP_HOOK_ENV  # Ray's name for it
    # the finder itself: an old path imports as the module named for it, its missing parent as a package
    new = types.ModuleType("esc_new_protocol")
    monkeypatch.setitem(sys.modules, "esc_new_protocol", new)
    monkeypatch.setattr(vllm_compat, "RAY_SERVE_LLM_ALIASES", {"esc_old_pkg.protocol": "esc_new_protocol"})
    monkeypatch.setattr(vllm_compat, "_ALIAS_PACKAGES", ("esc_old_pkg",))
    finder = vllm_compat._AliasFinder()
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, finder])
    for name in ("esc_old_pkg", "esc_old_pkg.protocol"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert importlib.import_module("esc_old_pkg.protocol") is new
    assert vllm_compat._missing("esc_no_such_pkg.x")


def test_machine_reads_the_gpus_from_nvidia_smi(tmp_path, monkeypatch):
    from esc_eval.sim.bench.gpu.hardware import machine

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$*\" in *driver_version*) echo 550.54.15; echo 550.54.15;; *)\n"
                   "echo '0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559'\necho '1, GPU-bbbb, NVIDIA H100 80GB HBM3, 81559';; esac\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    where = machine()
    assert where["device"] == "gpu" and len(where["gpus"]) == 2
    assert where["gpus"][0] == {"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "driver": "550.54.15"}
    assert where["peak_bf16"]["tflops"] == 989.0 and where["cpu"]["cores"] >= 1
    assert machine(peak_tflops=500)["peak_bf16"] == {"tflops": 500.0, "model": None, "source": "given with --peak-tflops"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the GPUs the run may use: per-GPU rates divide by these
    assert [g["name"] for g in machine()["gpus"]] == ["NVIDIA H100 80GB HBM3"]


def test_per_gpu_rates_compare_sides_that_held_different_gpus():
    """On 2 GPUs, ours packed the phase on both while the reference's one engine held one: the totals
    favour ours 2x, per GPU the sides are even (the issue's multi-GPU case)."""
    from esc_eval.sim.bench.gpu.bench import ours_gpus, reference_gpus
    from esc_eval.sim.pool.config import ExecutionConfig

    serve_plan = {"mode": "serve", "layout": {"scoring": [["judge 1"], ["judge 1"]], "simulation": [["role 0.6", "t 0.3"]]},
                  "engines": []}
    ex = ExecutionConfig()
    assert ours_gpus(serve_plan, ex, "scoring") == 2.0 and ours_gpus(serve_plan, ex, "simulation") == 1.0
    assert ours_gpus({"mode": "in_process"}, ExecutionConfig(workers=3, num_gpus_per_worker=0.5), "scoring") == 1.5
    assert ours_gpus(None, ex, "scoring") == 0.0  # the CPU
    assert reference_gpus([{"tensor_parallel_size": "1"}, {"tensor_parallel_size": "2"}], "gpu") == 2.0
    assert reference_gpus([{}], "gpu") == 1.0 and reference_gpus([{}], "cpu") == 0.0
    tok = {"m": {"prompt_tokens": 1000, "cached_prompt_tokens": 0, "generation_tokens": 100}}
    ours, ref = {"wall_s": 10.0}, {"wall_s": 20.0}
    _rates(ours, {k: dict(v) for k, v in tok.items()}, 100, gpus=2.0)
    _rates(ref, {k: dict(v) for k, v in tok.items()}, 100, gpus=1.0)
    assert ours["per_gpu"] == {"dialogues_per_s": 5.0, "uncached_prefill_tokens_per_s": 50.0, "decode_tokens_per_s": 5.0}
    out = compare(ours, ref, {"m": 1e9}, None)
    assert out["ours_vs_reference"]["dialogues_per_s"] == 2.0
    assert out["ours_vs_reference_per_gpu"] == {k: 1.0 for k in out["ours_vs_reference"]}
    cpu = {"wall_s": 1.0}
    _rates(cpu, None, 1)  # the CPU: no GPUs, no per-GPU figures
    assert cpu["gpus"] == 0 and cpu["per_gpu"] is None
    assert "ours_vs_reference_per_gpu" not in compare(cpu, dict(cpu), {}, None)


def test_the_probe_reaches_the_serve_deployments_the_placement_names(monkeypatch):
    """Serve mode (the GPU default): the engines are in replicas, which the placement map names; every
    replica of each deployment is asked once, its prefix cache emptied when asked (the worker probe
    alone found none there, so bench gpu had no vLLM counts and never emptied those caches)."""
    import json
    import sys
    import types

    from esc_eval.serve.plan.model import PLACEMENT_ENV
    from esc_eval.sim.bench import engine_probe

    mapping = {"vllm/j7b|{}": {"serve": {"spec": "serve/j7b", "options": {"app_name": "esc-eval-run"}}},
               "esc-role|{}": {"serve": {"spec": "serve/esc-role", "options": {"app_name": "esc-eval-run"}}},
               "qwen|{}": {"serve": {"spec": "serve/j7b", "options": {"app_name": "esc-eval-run"}}},
               "local|{}": {"engine": {"gpu_memory_utilization": 0.4}}}
    env = {PLACEMENT_ENV: json.dumps(mapping)}
    assert engine_probe.serve_deployments(env) == [("j7b", "esc-eval-run"), ("esc-role", "esc-eval-run")]
    assert engine_probe.serve_deployments({}) == []
    calls = []

    class Handle:
        def __init__(self, name):
            self.name = name

        def broadcast(self, method, **kw):
            calls.append((self.name, method, kw))
            return types.SimpleNamespace(results=lambda: [{"id": f"{self.name}#{i}", "model": self.name} for i in range(2)])

        def shutdown(self):
            calls.append((self.name, "shutdown", {}))

    app = types.SimpleNamespace(deployments={"LLMServer:j7b": None, "LLMServer:esc-role": None})
    fake_serve = types.SimpleNamespace(status=lambda: types.SimpleNamespace(applications={"esc-eval-run": app}),
                                       get_deployment_handle=lambda name, app_name: Handle(name))
    import ray

    monkeypatch.setitem(sys.modules, "ray.serve", fake_serve)
    monkeypatch.setattr(ray, "serve", fake_serve, raising=False)  # `from ray import serve` reads the attribute
    monkeypatch.setattr(engine_probe, "probe_workers", lambda pool, reset=False: [])
    got = engine_probe.probe_engines(None, env, reset_prefix_cache=True)
    assert [e["id"] for e in got] == ["LLMServer:j7b#0", "LLMServer:j7b#1", "LLMServer:esc-role#0", "LLMServer:esc-role#1"]
    assert [c for c in calls if c[1] != "shutdown"] == [
        ("LLMServer:j7b", "esc_engine_report", {"reset_prefix_cache": True}),
        ("LLMServer:esc-role", "esc_engine_report", {"reset_prefix_cache": True})]
    assert sum(c[1] == "shutdown" for c in calls) == 2
