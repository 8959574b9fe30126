"""ray.serve.llm's LLMServer, whose replica names its engine's own cause when the engine does not start,
and reports its engine to a benchmark.

A replica starts its vLLM engine in its constructor; when the engine fails, vLLM raises "Engine core
initialization failed. See root cause above" and the cause is only in the replica's log files.
This server tees what the engine's processes print while it starts (serve/engines/output.py) and
raises EngineStartError with the cause found there: Serve's DEPLOY_FAILED message ends with that
line, which serve/app/deploy.py shows. Same class name as Ray's, so deployment names stay
"LLMServer:<model>"; serve/app/lora.py's LocalLoraLLMServer builds on it.

`esc_engine_report` (called on every replica through DeploymentHandle.broadcast by
sim/bench/engine_probe.py probe_replicas) gives what `esc-eval bench gpu` and `esc-eval check` read from an
engine that lives in a replica, out of the measuring process's reach: vLLM's own token counts (a
stat logger added when the engine started, so a replica that autoscaled in mid-run counts all of
its requests), the KV cache vLLM allocated, dtype, device, and optionally its prefix cache emptied
first (ray.serve.llm's own LLMServer.reset_prefix_cache does the same for one replica).

Replicas sharing a GPU start their engines one at a time (serve/app/gpu_share.py). A GPU replica
compares the KV cache its engine sized with the plan's figure (serve/engines/kv_budget.py): one
sharing a GPU whose cache came out short fails its start, after a random wait of up to
RETRY_SPREAD_S so that Serve's retries of neighbours that failed together profile apart.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
from typing import Any

from esc_eval.serve.app.gpu_share import one_start_at_a_time
from esc_eval.serve.chat.interface import EngineStartError
from esc_eval.serve.engines.kv_budget import EXPECTED_KV_ENV, KV_FLOOR_ENV, RETRY_SPREAD_S, check_kv
from esc_eval.serve.engines.output import ChildOutput, cause_of

log = logging.getLogger("esc_eval.serve.app.server")


def _base():
    from ray.serve.llm import LLMServer as RayLLMServer

    return RayLLMServer


class LLMServer(_base()):  # type: ignore[misc]
    """ray.serve.llm.LLMServer; a failed engine start raises EngineStartError naming its cause; a CPU
    engine starts in our two-process layout (serve/app/cpu_engine.py)."""

    def _get_default_engine_class(self):
        from esc_eval.serve.app.cpu_engine import layout_engine_class

        return layout_engine_class(super()._get_default_engine_class())

    async def start(self):
        output = ChildOutput()
        model = self._llm_config.model_id
        async with one_start_at_a_time(model):  # replicas sharing a GPU profile its memory one at a time
            try:
                with output.capture():  # the engine's processes inherit the teed stdout/stderr
                    await super().start()
            except Exception as e:
                raise EngineStartError(f"the vLLM engine for {model} did not start: {cause_of(e, output)}",
                                       model=model, detail=output.tail()) from e
            client = _engine_client(self)
            if client is not None:
                from esc_eval.serve.engines.vllm_compat import token_counter

                token_counter(client)  # counts from the start: every request this replica serves
            await self._check_kv_cache(client)

    async def _check_kv_cache(self, client: Any) -> None:
        """The engine's KV cache against the plan's figure (EXPECTED_KV_ENV: set on GPU replicas only)."""
        from esc_eval.serve.engines.vllm_compat import kv_cache_blocks

        expected = os.environ.get(EXPECTED_KV_ENV)
        if not expected:
            return
        model = self._llm_config.model_id
        verdict = check_kv(model, kv_cache_blocks(client), int(expected), float(os.environ.get(KV_FLOOR_ENV) or 0))
        if verdict.short:
            await asyncio.sleep(random.uniform(0, RETRY_SPREAD_S))
            raise EngineStartError(verdict.line, model=model)
        if verdict.line:
            log.warning("%s", verdict.line)

    async def esc_engine_report(self, reset_prefix_cache: bool = False) -> dict[str, Any]:
        """This replica's engine (see the module doc); its prefix cache emptied first when asked."""
        client = _engine_client(self)
        cfg = self._llm_config
        out = await report_engine(client, reset_prefix_cache=reset_prefix_cache) if client is not None else {
            "counts": None, "kv_cache": None, "dtype": None, "device": None, "tensor_parallel_size": None,
            "executor": None}
        out.update(model=cfg.model_loading_config.model_source, model_id=cfg.model_id, id=_replica_id(),
                   where="serve replica", engine_kwargs={k: repr(v) for k, v in sorted(cfg.engine_kwargs.items())
                                                         if k != "chat_template"})
        return out


def _engine_client(server) -> Any:
    """The replica's vLLM AsyncLLM (ray.serve.llm's VLLMEngine keeps it as _engine_client); None when
    the engine is not up or ray.serve.llm moved it."""
    return getattr(getattr(server, "engine", None), "_engine_client", None)


def _replica_id() -> str:
    try:
        from ray import serve

        return serve.get_replica_context().replica_id.to_full_id_str()
    except Exception:  # noqa: BLE001 - outside a replica (a test on the engine object): the process
        return f"pid {os.getpid()}"


async def report_engine(client: Any, *, reset_prefix_cache: bool = False) -> dict[str, Any]:
    """vLLM's token counts (since the counter was added), KV cache, dtype, device and tensor parallelism
    of an AsyncLLM; with reset_prefix_cache, its prefix cache emptied before (counts are unchanged)."""
    from esc_eval.serve.engines.vllm_compat import kv_cache_blocks, token_counter

    if reset_prefix_cache:
        await client.reset_prefix_cache()
    counter = token_counter(client)
    model_config = getattr(client, "model_config", None)
    vllm_config = getattr(client, "vllm_config", None)
    device = getattr(getattr(vllm_config, "device_config", None), "device_type", None)
    dtype = getattr(model_config, "dtype", None)
    parallel = getattr(vllm_config, "parallel_config", None)
    return {"counts": counter.snapshot() if counter is not None else None, "kv_cache": kv_cache_blocks(client),
            "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
            "device": str(device) if device is not None else None,
            "tensor_parallel_size": getattr(parallel, "tensor_parallel_size", None),
            "executor": _executor_name(getattr(parallel, "distributed_executor_backend", None))}


def _executor_name(backend: Any) -> str | None:
    """vLLM's executor: "uni" (the model in EngineCore), "mp", "ray", or an Executor class's name."""
    return backend if backend is None or isinstance(backend, str) else getattr(backend, "__name__", str(backend))
