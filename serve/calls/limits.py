"""Limits per model for a whole run, and its spend cap: what every API call passes through.

- `ModelLimits` (a registry entry's or a config's `limits`): max_concurrency, requests per
  minute, tokens per minute.
- `ModelLimiter`: one model's limits for the whole run. Requests are spaced evenly (a bucket of
  one request: never a burst the provider's limiter could refuse); tokens come from a bucket of one
  second's worth that a large call may overdraw, so the rate over a minute stays under the limit.
  A call is charged its prompt (estimated, as the providers' limiters do) plus its max_tokens, and
  the excess when the answer says it used more. A 429 with Retry-After pauses the model for every
  worker, not only the one that got it.
- `SpendLedger`: the job's spend per model and its cap (`budget_usd`): a call first reserves what it
  could cost at most (prompt estimate x prompt price + max_tokens x completion price) and is refused
  with `BudgetExceededError` when that would pass the cap, so the cap is never passed; the reserve is
  settled with the tokens the answer used. It also counts requests, 429s and cache hits per model.
- `Governor`: a limiter or ledger where the run put it, in this process (executor local) or in a
  named Ray actor that the driver created (executor ray), so every worker on every node shares it.
- `CallGate`: one model's side of both, called by the one retry policy (serve/calls/retry.py) around
  every attempt, outside the attempt's timeout (waiting for a permit is not a slow server).

Both classes are plain asyncio objects; they never call a model.
"""
from __future__ import annotations

import asyncio
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, ChatResult, GenerationParams
from esc_eval.serve.config.base import ConfigModel


class ModelLimits(ConfigModel):
    """A model's quota, enforced for the whole run across every worker (not per worker)."""

    max_concurrency: int | None = Field(None, ge=1, description="Calls of this model in flight at once, over all workers (None: no limit).")
    requests_per_minute: float | None = Field(None, gt=0, description="Requests per minute, spaced evenly (None: no limit).")
    tokens_per_minute: float | None = Field(None, gt=0, description="Tokens per minute: each call counts its prompt (estimated "
                                            "from its characters) plus its max_tokens, as providers count (None: no limit).")

    def merged(self, other: "ModelLimits | None") -> "ModelLimits":
        """These limits with `other`'s fields that are set laid over them (a config over a registry entry)."""
        if other is None:
            return self
        return self.model_copy(update={k: getattr(other, k) for k in other.model_fields_set})

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.max_concurrency, self.requests_per_minute, self.tokens_per_minute))


class BudgetExceededError(ChatModelError):
    """The spend cap would be passed by this call: it was not made. Not a failure of the item:
    the job stops feeding work and a resume carries on."""

    def __init__(self, message: str, kind: str = "fatal", **kw: Any):
        super().__init__(message, "fatal", **kw)


def estimate_prompt_tokens(messages: list[ChatMessage]) -> int:
    """A prompt's tokens before the call: UTF-8 bytes / 4 per message plus the chat format's few
    tokens (about 4 characters a token in English; a Chinese character is 3 bytes, about 1 token)."""
    return sum(math.ceil(len(m.content.encode("utf-8")) / 4) + 4 for m in messages) + 3


class ModelLimiter:
    """One model's limits for the whole run (see the module docstring)."""

    def __init__(self, model: str, limits: ModelLimits | dict[str, Any]):
        self.model = model
        self.limits = limits if isinstance(limits, ModelLimits) else ModelLimits(**limits)
        lim = self.limits
        self.req_rate = lim.requests_per_minute / 60.0 if lim.requests_per_minute else None
        self.tok_rate = lim.tokens_per_minute / 60.0 if lim.tokens_per_minute else None
        self.req_level = 1.0
        self.tok_cap = self.tok_rate or 0.0  # one second's worth
        self.tok_level = self.tok_cap
        self.last = time.monotonic()
        self.in_flight = 0
        self.paused_until = 0.0
        self.granted = self.waited_s = 0.0
        self._lock: asyncio.Lock | None = None
        self._freed: asyncio.Event | None = None

    def _refill(self, now: float) -> None:
        dt, self.last = now - self.last, now
        if self.req_rate:
            self.req_level = min(1.0, self.req_level + dt * self.req_rate)
        if self.tok_rate:
            self.tok_level = min(self.tok_cap, self.tok_level + dt * self.tok_rate)

    def check(self, tokens: int) -> None:
        """A call that no wait can admit is an error naming the model and the setting."""
        tpm = self.limits.tokens_per_minute
        if tpm is not None and tokens > tpm:
            raise ChatModelError(
                f"model {self.model!r}: limits.tokens_per_minute={tpm:g} is below one call's tokens ({tokens}: its prompt "
                f"estimate plus max_tokens); raise the limit or lower max_tokens", kind="fatal")

    async def acquire(self, tokens: int) -> float:
        """Wait until this call may start (FIFO across all callers); returns the seconds waited."""
        self.check(tokens)
        if self._lock is None:
            self._lock, self._freed = asyncio.Lock(), asyncio.Event()
        started = time.monotonic()
        async with self._lock:  # FIFO: one caller at a time waits for the next permit
            cap = self.limits.max_concurrency
            while cap is not None and self.in_flight >= cap:
                self._freed.clear()
                await self._freed.wait()
            while True:
                now = time.monotonic()
                self._refill(now)
                waits = [self.paused_until - now]
                if self.req_rate:
                    waits.append((1.0 - self.req_level) / self.req_rate)
                if self.tok_rate:  # a call larger than the bucket waits for a full bucket, then overdraws
                    waits.append((min(tokens, self.tok_cap) - self.tok_level) / self.tok_rate)
                wait = max(waits)
                if wait <= 1e-6:
                    break
                await asyncio.sleep(wait)
            if self.req_rate:
                self.req_level -= 1.0
            if self.tok_rate:
                self.tok_level -= tokens
            self.in_flight += 1
        waited = time.monotonic() - started
        self.granted += 1
        self.waited_s += waited
        return waited

    async def release(self, extra_tokens: int = 0, retry_after: float | None = None) -> None:
        """A call ended: free its slot, charge the tokens it used beyond its estimate, and pause
        every caller when the server asked to wait (429 Retry-After)."""
        self.in_flight = max(0, self.in_flight - 1)
        if self.tok_rate and extra_tokens > 0:
            self.tok_level -= extra_tokens
        if retry_after:
            self.paused_until = max(self.paused_until, time.monotonic() + retry_after)
        if self._freed is not None:
            self._freed.set()

    async def stats(self) -> dict[str, Any]:
        return {"granted": int(self.granted), "waited_s": round(self.waited_s, 3), "in_flight": self.in_flight}


class SpendLedger:
    """The job's spend per model, its cap, and its call counts (see the module docstring)."""

    def __init__(self, budget_usd: float | None = None):
        self.budget_usd = budget_usd
        self.spent = 0.0
        self.reserved = 0.0
        self.refused = 0
        self.models: dict[str, dict[str, float]] = {}

    def _model(self, model: str) -> dict[str, float]:
        return self.models.setdefault(model, {"requests": 0, "rate_limited": 0, "cache_hits": 0, "dollars": 0.0,
                                              "refused_by_budget": 0})

    async def reserve(self, model: str, dollars: float) -> None:
        if self.budget_usd is not None and self.spent + self.reserved + dollars > self.budget_usd + 1e-12:
            self.refused += 1
            self._model(model)["refused_by_budget"] += 1
            raise BudgetExceededError(
                f"budget_usd={self.budget_usd:g} reached: ${self.spent:.4f} spent, ${self.reserved:.4f} held by calls in "
                f"flight, and the next call to {model!r} could cost up to ${dollars:.4f}")
        self.reserved += dollars

    async def settle(self, model: str, reserved: float, dollars: float, requests: int = 1, rate_limited: int = 0) -> None:
        self.reserved = max(0.0, self.reserved - reserved)
        self.spent += dollars
        m = self._model(model)
        m["requests"] += requests
        m["rate_limited"] += rate_limited
        m["dollars"] += dollars

    async def hit(self, model: str) -> None:
        self._model(model)["cache_hits"] += 1

    async def totals(self) -> dict[str, Any]:
        models = {k: {**v, "dollars": round(v["dollars"], 6)} for k, v in self.models.items()}
        return {"budget_usd": self.budget_usd, "spent_usd": round(self.spent, 6), "refused_by_budget": self.refused,
                "models": models}


# -- where a run's limiters and ledger live -----------------------------------------------------
_LOCAL: dict[str, Any] = {}  # name -> object, for executor "local" (the workers are this process)
_HANDLES: dict[str, Any] = {}  # name -> the driver's handle of a named actor (without one Ray would collect it)
_names = itertools.count()


@dataclass(frozen=True)
class GovernorRef:
    """A limiter or ledger by name: in this process, or a named Ray actor in `namespace`."""

    name: str
    remote: bool = False
    namespace: str | None = None


def host_governor(cls: type, args: tuple, *, remote: bool, prefix: str = "esc-eval-gov") -> GovernorRef:
    """Create a limiter or ledger for a run: in this process, or as a named Ray actor (the driver's
    Ray must be up; the actor takes no CPU). The caller stops it with `stop_governor`."""
    name = f"{prefix}-{time.time_ns()}-{next(_names)}"
    if not remote:
        _LOCAL[name] = cls(*args)
        return GovernorRef(name)
    import ray

    namespace = ray.get_runtime_context().namespace
    # Many callers wait in acquire() at once: an async actor serves them all on one loop.
    _HANDLES[name] = ray.remote(cls).options(name=name, namespace=namespace, num_cpus=0, max_concurrency=100_000,
                                             max_restarts=0).remote(*args)
    return GovernorRef(name, remote=True, namespace=namespace)


def stop_governor(ref: GovernorRef) -> None:
    if not ref.remote:
        _LOCAL.pop(ref.name, None)
        return
    import ray

    handle = _HANDLES.pop(ref.name, None)
    if handle is not None:
        ray.kill(handle)


class Governor:
    """Calls a limiter or ledger wherever it lives, awaiting the answer either way."""

    def __init__(self, ref: GovernorRef):
        self.ref = ref
        self._target: Any = None

    def _resolve(self) -> Any:
        if self._target is None:
            if self.ref.remote:
                import ray

                self._target = ray.get_actor(self.ref.name, namespace=self.ref.namespace)
            else:
                try:
                    self._target = _LOCAL[self.ref.name]
                except KeyError:
                    raise ChatModelError(f"call governor {self.ref.name} is not in this process", kind="fatal") from None
        return self._target

    async def call(self, method: str, *args: Any) -> Any:
        target = self._resolve()
        if self.ref.remote:
            return await getattr(target, method).remote(*args)
        return await getattr(target, method)(*args)


@dataclass(frozen=True)
class Price:
    """US dollars per token (prompt, completion)."""

    prompt: float
    completion: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@dataclass
class _Ticket:
    tokens: int
    reserved: float


class CallGate:
    """One model's limits and spend, around every attempt of every call (serve/calls/retry.py)."""

    def __init__(self, model: str, limiter: GovernorRef | None = None, ledger: GovernorRef | None = None,
                 price: Price | None = None):
        self.model = model
        self.limiter = Governor(limiter) if limiter else None
        self.ledger = Governor(ledger) if ledger else None
        self.price = price

    async def before(self, messages: list[ChatMessage], params: GenerationParams | None) -> _Ticket:
        prompt = estimate_prompt_tokens(messages)
        max_new = (params or GenerationParams()).max_tokens
        reserved = self.price.cost(prompt, max_new) if (self.price and self.ledger) else 0.0
        if self.ledger and self.price:
            await self.ledger.call("reserve", self.model, reserved)  # raises BudgetExceededError
        if self.limiter:
            try:
                await self.limiter.call("acquire", prompt + max_new)
            except BaseException:
                if self.ledger and self.price:
                    await self.ledger.call("settle", self.model, reserved, 0.0, 0, 0)
                raise
        return _Ticket(prompt + max_new, reserved)

    async def after(self, ticket: _Ticket, result: ChatResult | None = None, exc: BaseException | None = None) -> None:
        used = (result.prompt_tokens + result.completion_tokens) if result is not None else 0
        limited = isinstance(exc, ChatModelError) and exc.kind == "rate_limit"
        if self.limiter:
            retry_after = exc.retry_after if limited else None
            await self.limiter.call("release", max(0, used - ticket.tokens), retry_after)
        if self.ledger:
            dollars = self.price.cost(result.prompt_tokens, result.completion_tokens) if (self.price and result) else 0.0
            await self.ledger.call("settle", self.model, ticket.reserved, dollars, 1, int(limited))

    async def hit(self) -> None:
        """A call answered by the cache: counted, never limited or charged."""
        if self.ledger:
            await self.ledger.call("hit", self.model)
