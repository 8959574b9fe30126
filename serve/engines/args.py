"""The vLLM engine arguments a device gets: what an in-process engine (serve/backends/vllm_engine.py) and a
Serve replica (serve/app/application.py) start with. Pure: the device is described, not probed, so the
GPU arguments are built and checked on a CPU machine (tests/serve/engines/test_engine_args.py).

CPU, as measured on the 2-core machines (notes/cpu-stack.md): eager (a compiled start took 78-90 s
and vLLM's compile cache does not reload), the CPU's fast dtype (serve/devices/cpu.py), 32-token KV blocks
without AMX, the KV cache sized by VLLM_CPU_KVCACHE_SPACE.
GPU (not yet run on GPU hardware): compiled with CUDA graphs (vLLM's default: no enforce_eager),
bfloat16, `gpu_memory_utilization` = the engine's share of the GPUs it runs on (serve/plan/planner.py
sizes it from what the worker holds, so several engines of one worker fit together), tensor
parallelism from the config (at most the GPUs the process sees; vLLM's multiprocessing executor
inside a Ray worker, whose GPUs Ray has already assigned).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from esc_eval.serve.devices.accelerator import decide_accelerator
from esc_eval.serve.devices.cpu import (DEFAULT_KV_CACHE_GIB, KV_CACHE_ENV, CpuInfo, cpu_info, kv_block_size,
                                        resolve_dtype)


class EngineConfigError(ValueError):
    """Engine arguments the device cannot run (one line: the setting, its value, what the device has)."""


@dataclass(frozen=True)
class Device:
    """Where an engine runs: the CPU, or `count` GPUs of `memory_gb` each (those visible to the process)."""

    kind: Literal["cpu", "cuda"] = "cpu"
    count: int = 0
    memory_gb: float | None = None
    name: str = ""

    @property
    def gpu(self) -> bool:
        return self.kind == "cuda"

    def describe(self) -> str:
        if not self.gpu:
            return "CPU"
        mem = f" of {self.memory_gb:g} GB" if self.memory_gb else ""
        return f"{self.count} GPU{'s' if self.count != 1 else ''}{mem}" + (f" ({self.name})" if self.name else "")


CPU = Device()


@dataclass(frozen=True)
class EngineCapacity:
    """What a started engine can hold at once, as the engine reports it (vLLM: its KV cache blocks
    x block size, learnt at the start handshake; max_num_seqs from its scheduler)."""

    model: str
    device: Literal["cpu", "gpu"]
    kv_tokens: int | None
    max_num_seqs: int | None
    max_model_len: int | None = None


def gpus(count: int, memory_gb: float | None = None, name: str = "") -> Device:
    return Device("cuda", count, memory_gb, name)


def detect_device() -> Device:
    """This process's device, as the plan decided it (serve/devices/accelerator.py: the GPUs this process
    may use, Ray setting CUDA_VISIBLE_DEVICES per worker, when torch can reach them), else the CPU. A
    machine that contradicts itself gives the CPU here; the engine start raises its problem first."""
    decision = decide_accelerator()
    if decision.kind != "cuda":
        return CPU
    found = decision.gpus
    return Device("cuda", found.count, found.memory_gb, found.gpus[0].name if found.gpus else "")


# What every engine starts with unless the model or the config says otherwise.
COMMON_ENGINE: dict[str, Any] = {
    "max_model_len": 8192,  # a 5-round dialogue at the release's 512-token caps stays under it
    "dtype": "auto",  # serve/devices/cpu.py: bfloat16 on GPUs and CPUs with AVX512-BF16/AMX, float32 elsewhere
    "enable_prefix_caching": True,
}
CPU_ENGINE: dict[str, Any] = {
    **COMMON_ENGINE,
    "enforce_eager": True,  # compiled starts take 78-90 s on CPU and the compile cache does not reload
    "max_num_seqs": 128,
}
GPU_ENGINE: dict[str, Any] = {**COMMON_ENGINE}  # compiled (CUDA graphs), vLLM's own batch size
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vllm 0.32's CacheConfig default


def engine_defaults(device: Device) -> dict[str, Any]:
    return dict(GPU_ENGINE if device.gpu else CPU_ENGINE)


def device_engine_kwargs(kwargs: dict[str, Any], device: Device, *, cpu: CpuInfo | None = None,
                         executor: Literal["mp", "ray"] | None = "mp") -> dict[str, Any]:
    """The device's part of `kwargs` (a copy): the dtype resolved; on CPU the KV block size; on GPU
    tensor parallelism and memory share checked against the device. `executor` is what a tensor-
    parallel engine uses ("mp" in a process that holds its GPUs; None leaves it to the caller, e.g.
    ray.serve.llm, which places the ranks itself). Raises EngineConfigError (one line)."""
    out = dict(kwargs)
    try:
        out["dtype"] = resolve_dtype(out.get("dtype"), gpu=device.gpu, info=cpu)
    except ValueError as e:
        raise EngineConfigError(str(e)) from e
    if not device.gpu:
        if int(out.get("tensor_parallel_size", 1)) != 1:
            raise EngineConfigError(f"engine option tensor_parallel_size = {out['tensor_parallel_size']}: needs GPUs; "
                                    "this engine runs on the CPU")
        if "block_size" not in out:
            block = kv_block_size(cpu or cpu_info())
            if block is not None:
                out["block_size"] = block
        return out
    if out.get("enforce_eager") is None:
        out.pop("enforce_eager", None)  # vLLM's default on GPUs: CUDA graphs
    tp = int(out.get("tensor_parallel_size", 1))
    if tp < 1:
        raise EngineConfigError(f"engine option tensor_parallel_size = {tp}: must be at least 1")
    if device.count and tp > device.count:
        raise EngineConfigError(f"engine option tensor_parallel_size = {tp}: the engine sees {device.describe()} "
                                f"(give its worker {tp} GPUs, or serve the model as a deployment)")
    out["tensor_parallel_size"] = tp
    if tp > 1 and executor is not None:
        out.setdefault("distributed_executor_backend", executor)
    util = out.get("gpu_memory_utilization")
    if util is not None and not 0 < float(util) <= 1:
        raise EngineConfigError(f"engine option gpu_memory_utilization = {util}: must be in (0, 1]")
    return out


def engine_kwargs(requested: dict[str, Any], device: Device, *, adapters: int = 0,
                  cpu: CpuInfo | None = None) -> dict[str, Any]:
    """All arguments of an in-process engine on `device`: the device's defaults, then the model's and
    the config's options (`requested`, which win), LoRA settings when the model has `adapters`."""
    kwargs = {**engine_defaults(device), **requested}
    if adapters:
        kwargs.setdefault("enable_lora", True)
        kwargs.setdefault("max_loras", max(1, adapters))
        kwargs.setdefault("max_lora_rank", 16)
    return device_engine_kwargs(kwargs, device, cpu=cpu)


def cpu_kv_cache_env() -> None:
    """vLLM-CPU reserves most of RAM for its KV cache unless VLLM_CPU_KVCACHE_SPACE (GiB) is set."""
    os.environ.setdefault(KV_CACHE_ENV, str(DEFAULT_KV_CACHE_GIB))
