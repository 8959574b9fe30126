"""A Serve replica's CPU engine in our two-process layout (serve/engines/cpu_layout.py), not vLLM's three.

ray.serve.llm asks vLLM for its multiprocessing executor on the CPU, so a replica is three processes
that each import vLLM: the replica, EngineCore, and a worker the executor spawns. The worker costs
about 14 s of every replica start on the 2-core AVX2 EPYC and ~2 GiB (Ray's memory monitor listed
2.0-2.3 GiB "VLLM::Worker" processes beside each replica's EngineCore). A one-rank CPU engine whose
binding our layout honours (none, `auto`, `nobind`, or one list of cores) runs its model inside EngineCore
instead: vLLM's uniproc executor, started under the layout's OMP_NUM_THREADS and
VLLM_ENABLE_V1_MULTIPROCESSING=0 (what vLLM's CPU platform asks before it allows it) and, for a list
of cores, with the start thread confined to them, exactly as in-process engines start
(serve/backends/engine_host.py). Anything else (GPUs, tensor parallelism, one list per rank,
VLLM_ENABLE_V1_MULTIPROCESSING set in the replica's env) keeps ray.serve.llm's choice.

ray.serve.llm picks the engine class in LLMServer._get_default_engine_class (its engine hook, beside
the engine_cls argument, which Serve's deployments do not pass); the executor is
chosen in VLLMEngine._start_async_llm_engine, after ray.serve.llm has built vLLM's config, so that
is the method overridden (ray is pinned: 2.60.0). vLLM is imported only inside the replica.
"""
from __future__ import annotations

import functools
from typing import Any

from esc_eval.serve.engines.cpu_layout import CpuLayout, cpu_layout, pinned, start_env

UNIPROC = "uni"


def replica_layout(vllm_config: Any) -> CpuLayout | None:
    """Our layout for this engine config (in the replica's environment), or None to keep vLLM's."""
    device = getattr(getattr(vllm_config, "device_config", None), "device_type", None)
    parallel = vllm_config.parallel_config
    if str(device) != "cpu" or parallel.world_size != 1 or parallel.data_parallel_size != 1:
        return None
    layout = cpu_layout()
    return layout if layout.env else None


@functools.cache
def layout_engine_class(base: type) -> type:
    """`base` (ray.serve.llm's VLLMEngine or a subclass) starting CPU engines in our layout."""

    class CpuLayoutVLLMEngine(base):  # type: ignore[misc, valid-type]
        def _start_async_llm_engine(self, vllm_engine_args, vllm_engine_config, placement_group):
            layout = replica_layout(vllm_engine_config)
            if layout is None:
                return super()._start_async_llm_engine(vllm_engine_args, vllm_engine_config, placement_group)
            vllm_engine_config.parallel_config.distributed_executor_backend = UNIPROC
            # EngineCore is spawned inside: it inherits the env and the start thread's affinity
            with start_env(layout.env), pinned(layout.cores):
                return super()._start_async_llm_engine(vllm_engine_args, vllm_engine_config, placement_group)

    CpuLayoutVLLMEngine.__qualname__ = CpuLayoutVLLMEngine.__name__ = f"CpuLayout{base.__name__}"
    return CpuLayoutVLLMEngine
