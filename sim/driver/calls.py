"""How a job's model calls are made: the call cache, the limits per model for the whole run, the
spend cap and its counters, set up by the driver before any worker starts.

`prepare_calls` (driver) checks what can be checked before any dialogue (a missing key, an
unknown provider, a limit no call can meet, a budget over a model without a price: one line
naming the model and the setting), forwards the variables the API backends need to the workers,
starts one limiter per limited model and one ledger per job (named Ray actors under executor
`ray`, objects in this process under `local`), and yields a `CallSettings` that travels with the
job; `ModelPool.get` (sim/pool/participants.py) wraps every model with it. At the end the ledger's
totals (requests that reached each API, 429s, cache hits, dollars) go to the job's result.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams, backend_preflight, is_api_spec
from esc_eval.serve.calls.limits import (CallGate, GovernorRef, ModelLimiter, ModelLimits, Price, SpendLedger,
                                   estimate_prompt_tokens, host_governor, stop_governor)
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.prices import shipped_price
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import default_registry, is_spec, resolve
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.call_cache import RUN_FOLDER_CACHE

log = logging.getLogger("esc_eval.calls")


def call_cache_location(run_dir: str | Path, execution: ExecutionConfig) -> str:
    """THE place that says where a job's call cache lives: `execution.cache_dir` (a path every
    worker can reach, or a URI, opened with pyarrow.fs), else the run folder's `cache/`."""
    return execution.cache_dir or RUN_FOLDER_CACHE


def quota_key(spec: str, options: dict[str, Any]) -> str:
    """One quota per model and endpoint: the resolved spec, plus the base URL when one is given."""
    base = options.get("base_url") or options.get("api_base")
    return f"{spec}@{base}" if base else spec


def ref_spec(ref: ModelRef) -> tuple[str, dict[str, Any]]:
    spec, implied = resolve(ref.model)
    return spec, {**implied, **ref.options}


@dataclass(frozen=True)
class ModelCalls:
    """How one model's calls go (picklable: it travels to the workers)."""

    cache_root: str | None = None
    limiter: GovernorRef | None = None
    price: Price | None = None


@dataclass
class CallSettings:
    """The job's call settings by quota key (see the module docstring)."""

    models: dict[str, ModelCalls] = field(default_factory=dict)
    ledger: GovernorRef | None = None
    totals: dict[str, Any] | None = None  # filled by prepare_calls when the job is done

    def for_ref(self, ref: ModelRef) -> tuple[str, ModelCalls | None]:
        key = quota_key(*ref_spec(ref))
        return key, self.models.get(key)

    def gate(self, key: str, calls: ModelCalls | None) -> CallGate | None:
        if calls is None or (calls.limiter is None and self.ledger is None):
            return None
        return CallGate(key, calls.limiter, self.ledger, calls.price)


def model_limits(ref: ModelRef) -> ModelLimits:
    """The registry entry's limits with the config's laid over them."""
    entry = None if is_spec(ref.model) else default_registry().get(ref.model)
    base = (entry.limits if entry is not None else None) or ModelLimits()
    return base.merged(ref.limits)


def stricter(a: ModelLimits, b: ModelLimits) -> ModelLimits:
    """Two refs of one model share one quota: the stricter value of each field."""
    def lo(x, y):
        return y if x is None else x if y is None else min(x, y)
    return ModelLimits(max_concurrency=lo(a.max_concurrency, b.max_concurrency),
                       requests_per_minute=lo(a.requests_per_minute, b.requests_per_minute),
                       tokens_per_minute=lo(a.tokens_per_minute, b.tokens_per_minute))


def model_price(ref: ModelRef, spec: str, prices: dict[str, TokenPrice]) -> TokenPrice | None:
    """The config's price (by name or spec), else the registry's, else the shipped list prices, else LiteLLM's
    offline price list."""
    if ref.model in prices or spec in prices:
        return prices.get(ref.model) or prices.get(spec)
    reg = default_registry()
    entry = reg.models.get(ref.model) or next((e for e in reg.models.values() if e.spec == spec), None)
    if entry is not None and entry.price is not None:
        return entry.price
    if (listed := shipped_price(spec)) is not None:  # the shipped list (serve/registry/data/prices.yaml)
        return listed
    if spec.startswith("litellm/"):
        from esc_eval.serve.backends.litellm_api import list_price

        return list_price(spec.partition("/")[2])
    return None


@dataclass
class PlannedModel:
    """A model of the job as the driver sees it: the ref, its effective params and, where the job
    can tell, the messages of its first call (to check a tokens-per-minute limit against)."""

    ref: ModelRef
    params: GenerationParams
    first_messages: list[ChatMessage] | None = None


def _cached(execution: ExecutionConfig, spec: str) -> bool:
    return execution.call_cache == "on" or (execution.call_cache == "auto" and is_api_spec(spec))


def check_calls(models: list[PlannedModel], execution: ExecutionConfig,
                prices: dict[str, TokenPrice]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """What can be checked before anything starts or is written: a key, a provider, a limit no
    call can meet, a budget over a model without a price. ValueError with one line naming the model
    and the setting. Returns the plan per quota key and the variables the workers need."""
    plan: dict[str, dict[str, Any]] = {}
    needed_env: set[str] = set()
    for m in models:
        spec, options = ref_spec(m.ref)
        key = quota_key(spec, options)
        if is_api_spec(spec):
            needed_env.update(backend_preflight(spec, **options))  # ValueError: one line naming the model
        limits = model_limits(m.ref)
        p = plan.setdefault(key, {"spec": spec, "limits": limits, "price": None, "refs": []})
        p["limits"] = stricter(p["limits"], limits) if p["refs"] else limits
        p["refs"].append(m)
        if is_api_spec(spec) and p["price"] is None:
            p["price"] = model_price(m.ref, spec, prices)
        tpm = p["limits"].tokens_per_minute
        if tpm is not None:
            prompt = estimate_prompt_tokens(m.first_messages) if m.first_messages else 0
            need = prompt + m.params.max_tokens
            if need > tpm:
                raise ValueError(
                    f"model {m.ref.model!r}: limits.tokens_per_minute={tpm:g} is below one call's tokens (about {need}: "
                    f"a prompt of ~{prompt} plus max_tokens {m.params.max_tokens}); no call could ever be made")
        if execution.budget_usd is not None and is_api_spec(spec) and p["price"] is None:
            raise ValueError(
                f"model {m.ref.model!r}: budget_usd={execution.budget_usd:g} needs its price: add "
                f"prices: {{{m.ref.model}: {{prompt_per_1m: ..., completion_per_1m: ...}}}} to the config")
    return plan, needed_env


@contextlib.contextmanager
def prepare_calls(models: list[PlannedModel], execution: ExecutionConfig, prices: dict[str, TokenPrice],
                  run_dir: str | Path) -> Iterator[CallSettings]:
    """Check, start and yield the job's call settings; stop the limiters and ledger after, with
    their totals in `settings.totals` (see the module docstring). Raises ValueError before anything
    starts on bad input."""
    plan, needed_env = check_calls(models, execution, prices)
    # The workers (on any node) need the keys and endpoints the driver has.
    forwarded = {k: os.environ[k] for k in sorted(needed_env) if os.environ.get(k)}
    if forwarded:
        execution.env = {**execution.env, **forwarded}
    governed = {k for k, p in plan.items() if is_api_spec(p["spec"]) or p["limits"].any or _cached(execution, p["spec"])}
    settings = CallSettings()
    if not governed:
        yield settings
        return
    remote = execution.executor == "ray"
    if remote:
        from esc_eval.sim.pool.on_ray import ensure_ray

        ensure_ray(execution)
    refs: list[GovernorRef] = []
    try:
        settings.ledger = host_governor(SpendLedger, (execution.budget_usd,), remote=remote, prefix="esc-eval-ledger")
        refs.append(settings.ledger)
        for key, p in plan.items():
            limiter = None
            if p["limits"].any:
                limiter = host_governor(ModelLimiter, (key, p["limits"].model_dump()), remote=remote, prefix="esc-eval-limit")
                refs.append(limiter)
            tp = p["price"]
            price = Price(tp.prompt_per_1m / 1e6, tp.completion_per_1m / 1e6) if tp is not None else None
            settings.models[key] = ModelCalls(
                cache_root=call_cache_location(run_dir, execution) if _cached(execution, p["spec"]) else None,
                limiter=limiter, price=price)
        log.info("call settings: %s", json.dumps({k: str(v) for k, v in settings.models.items()}))
        yield settings
    finally:
        if settings.ledger is not None:
            settings.totals = _read_totals(settings.ledger)
        for ref in refs:
            stop_governor(ref)


def _read_totals(ref: GovernorRef) -> dict[str, Any] | None:
    import asyncio

    from esc_eval.serve.calls.limits import Governor

    try:
        if ref.remote:
            import ray

            from esc_eval.serve.calls.limits import _HANDLES

            return ray.get(_HANDLES[ref.name].totals.remote(), timeout=30)
        return asyncio.run(Governor(ref).call("totals"))
    except Exception as e:  # noqa: BLE001 - counters are a report; losing them must not fail the job
        log.warning("call counters unavailable: %s", e)
        return None
