"""Engine arguments per device (serve/engines/args.py): the CPU ones as measured, the GPU ones built
and checked here on a CPU machine (described GPUs, never probed), and an in-process engine started
on described GPUs up to the point where vLLM would take the hardware."""
from __future__ import annotations

import dataclasses

import pytest

from esc_eval.serve.devices.cpu import cpu_info
from esc_eval.serve.engines.args import (CPU, CPU_ENGINE, EngineConfigError, device_engine_kwargs, engine_kwargs,
                                        gpus)

AVX2 = cpu_info("model name\t: AMD EPYC\nflags\t\t: avx avx2 fma f16c\n", cores=2)
AMX = cpu_info("model name\t: Xeon\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n", cores=2)


def test_cpu_defaults_stay_as_measured():
    k = engine_kwargs({}, CPU, cpu=AVX2)
    assert k == {"max_model_len": 8192, "dtype": "float32", "enable_prefix_caching": True, "enforce_eager": True,
                 "max_num_seqs": 128, "block_size": 32}
    amx = engine_kwargs({}, CPU, cpu=AMX)
    assert amx["dtype"] == "bfloat16" and "block_size" not in amx  # AMX keeps vLLM's block size
    assert "gpu_memory_utilization" not in k and "tensor_parallel_size" not in k
    assert engine_kwargs({"block_size": 128, "max_num_seqs": 8}, CPU, cpu=AVX2)["block_size"] == 128  # options win


def test_gpu_engines_are_compiled_with_the_plans_share_and_tensor_parallelism():
    k = engine_kwargs({"tensor_parallel_size": 2, "gpu_memory_utilization": 0.45}, gpus(2, 80), cpu=AVX2)
    assert "enforce_eager" not in k and "block_size" not in k  # CUDA graphs; vLLM's GPU block size
    assert k["dtype"] == "bfloat16" and k["tensor_parallel_size"] == 2 and k["gpu_memory_utilization"] == 0.45
    assert k["distributed_executor_backend"] == "mp"  # the ranks run in the worker that holds the GPUs
    one = engine_kwargs({}, gpus(1, 24), cpu=AVX2)
    assert one["tensor_parallel_size"] == 1 and "distributed_executor_backend" not in one
    assert "max_num_seqs" not in one  # vLLM's own GPU batch size
    assert engine_kwargs({"enforce_eager": True}, gpus(1), cpu=AVX2)["enforce_eager"] is True  # asked for: kept


def test_gpu_arguments_are_vllm_engine_arguments():
    """Every name the GPU path passes is a field of vLLM's AsyncEngineArgs (the same class on CPU)."""
    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    fields = {f.name for f in dataclasses.fields(arg_utils.AsyncEngineArgs)}
    k = engine_kwargs({"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5}, gpus(2, 24), adapters=3, cpu=AVX2)
    assert set(k) <= fields, set(k) - fields
    assert set(engine_kwargs({}, CPU, cpu=AVX2)) <= fields


@pytest.mark.parametrize("requested, device, match", [
    ({"tensor_parallel_size": 4}, gpus(2, 80), r"tensor_parallel_size = 4: the engine sees 2 GPUs of 80 GB"),
    ({"tensor_parallel_size": 2}, CPU, r"tensor_parallel_size = 2: needs GPUs"),
    ({"gpu_memory_utilization": 1.5}, gpus(1), r"gpu_memory_utilization = 1.5: must be in \(0, 1\]"),
    ({"dtype": "int3"}, gpus(1), r"unknown dtype 'int3'"),
])
def test_what_the_device_cannot_run_is_one_line(requested, device, match):
    with pytest.raises(EngineConfigError, match=match) as e:
        engine_kwargs(requested, device, cpu=AVX2)
    assert "\n" not in str(e.value)


def test_serve_replicas_leave_tensor_parallel_placement_to_ray():
    k = device_engine_kwargs({"dtype": "auto", "tensor_parallel_size": 4}, gpus(4), executor=None, cpu=AVX2)
    assert k == {"dtype": "bfloat16", "tensor_parallel_size": 4}


def test_in_process_engine_on_described_gpus_starts_with_the_gpu_arguments(monkeypatch, fake_vllm):
    """_EngineHost on 2 described 80 GB GPUs: what it hands vLLM (vLLM itself is a stand-in here)."""
    from esc_eval.serve.backends import engine_host, vllm_engine

    seen = fake_vllm(None, {})
    monkeypatch.setattr(engine_host, "detect_device", lambda: gpus(2, 80, "H100"))
    monkeypatch.delenv("ESC_EVAL_DTYPE", raising=False)
    host = vllm_engine._EngineHost("/models/fake", {}, {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.564})
    try:
        host._start_sync()
    finally:
        host.shutdown()
    assert seen["gpu_memory_utilization"] == 0.564 and seen["tensor_parallel_size"] == 2
    assert "enforce_eager" not in seen and "block_size" not in seen and seen["dtype"] == "bfloat16"
    assert host.device.gpu and host.dtype == "bfloat16"


def test_in_process_engine_refuses_more_ranks_than_its_gpus(monkeypatch, fake_vllm):
    from esc_eval.serve.backends import engine_host, vllm_engine
    from esc_eval.serve.chat.interface import EngineStartError

    fake_vllm(None, {})
    monkeypatch.setattr(engine_host, "detect_device", lambda: gpus(1, 24))
    host = vllm_engine._EngineHost("/models/fake", {}, {"tensor_parallel_size": 2})
    try:
        with pytest.raises(EngineStartError, match=r"^the vLLM engine for /models/fake did not start: engine option "
                                                   r"tensor_parallel_size = 2") as e:
            host._start_sync()
    finally:
        host.shutdown()
    assert "\n" not in str(e.value)


def test_cpu_engine_defaults_are_the_measured_ones():
    from esc_eval.serve.backends.vllm_engine import DEFAULT_ENGINE

    assert DEFAULT_ENGINE is CPU_ENGINE and DEFAULT_ENGINE["enforce_eager"] is True


def test_engine_release_stops_it_only_when_no_holder_is_left():
    """Two chat models on one engine (a job's and a shared fixture's): releasing one keeps it."""
    from esc_eval.serve.backends import vllm_engine

    a = vllm_engine.VLLMChatModel("/nonexistent/model-for-release")
    b = vllm_engine.VLLMChatModel("/nonexistent/model-for-release")
    assert a.host is b.host and a.host.users == 2
    assert a.release() is False and a.release() is False  # once per holder
    assert b.host.thread.is_alive() and b.host in vllm_engine._HOSTS.values()
    assert b.release() is True
    assert not b.host.thread.is_alive() and b.host not in vllm_engine._HOSTS.values()
