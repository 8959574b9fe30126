"""Limits per model, the spend ledger and the call cache, in-process (serve/calls/limits.py, serve/calls/cache.py)."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from esc_eval.serve.calls.cache import ArrowFsStore, CachedChatModel, cache_key, cacheable
from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, GenerationParams, get_chat_model
from esc_eval.serve.calls.limits import (BudgetExceededError, CallGate, ModelLimiter, ModelLimits, Price, SpendLedger,
                                   estimate_prompt_tokens, host_governor, stop_governor)
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy

MSGS = [ChatMessage(role="user", content="I feel low")]


async def test_requests_per_minute_are_spaced_evenly_across_callers():
    lim = ModelLimiter("m", ModelLimits(requests_per_minute=600))  # 10 per second
    t0 = time.monotonic()
    await asyncio.gather(*(lim.acquire(1) for _ in range(11)))
    elapsed = time.monotonic() - t0
    assert 0.95 <= elapsed < 1.6  # the first at once, then one per 0.1 s: never a burst
    assert (await lim.stats())["granted"] == 11


async def test_max_concurrency_holds_across_callers():
    lim = ModelLimiter("m", ModelLimits(max_concurrency=2))
    peak = running = 0

    async def call():
        nonlocal peak, running
        await lim.acquire(1)
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        await lim.release()

    await asyncio.gather(*(call() for _ in range(8)))
    assert peak == 2


async def test_tokens_per_minute_and_a_retry_after_pause_everyone():
    lim = ModelLimiter("m", ModelLimits(tokens_per_minute=6000))  # 100 tokens per second
    await lim.acquire(100)  # the bucket's second of tokens
    t0 = time.monotonic()
    await lim.acquire(50)  # waits for half a second of refill
    assert 0.4 <= time.monotonic() - t0 < 0.9
    await lim.release(retry_after=0.3)  # a 429 said wait: the next caller waits too
    t0 = time.monotonic()
    await lim.acquire(1)
    assert time.monotonic() - t0 >= 0.29
    with pytest.raises(ChatModelError, match="tokens_per_minute=6000 is below one call's tokens") as ei:
        await lim.acquire(7000)
    assert ei.value.kind == "fatal"


def test_limits_merge_field_by_field():
    reg = ModelLimits(requests_per_minute=500, tokens_per_minute=30000)
    cfg = ModelLimits(requests_per_minute=100)
    assert reg.merged(cfg) == ModelLimits(requests_per_minute=100, tokens_per_minute=30000)
    assert reg.merged(None) is reg and not ModelLimits().any


async def test_ledger_refuses_a_call_that_could_pass_the_budget():
    led = SpendLedger(budget_usd=0.01)
    await led.reserve("m", 0.006)
    with pytest.raises(BudgetExceededError, match=r"budget_usd=0.01 reached"):
        await led.reserve("m", 0.006)  # 0.006 held + 0.006 > 0.01, though nothing is spent yet
    await led.settle("m", 0.006, 0.001)
    await led.reserve("m", 0.006)  # the answer cost less than reserved: room again
    totals = await led.totals()
    assert totals["spent_usd"] == 0.001 and totals["refused_by_budget"] == 1
    assert totals["models"]["m"]["requests"] == 1


async def test_gate_around_every_attempt_counts_and_charges_each(tmp_path):
    ledger = host_governor(SpendLedger, (1.0,), remote=False)
    limiter = host_governor(ModelLimiter, ("fake/judge", {"max_concurrency": 1}), remote=False)
    try:
        gate = CallGate("fake/judge", limiter, ledger, Price(1e-6, 2e-6))
        inner = get_chat_model("fake/judge", error_rate=0.5, seed=3)
        model = RetryingChatModel(inner, RetryPolicy(max_attempts=5, initial_wait_s=0.001, max_wait_s=0.002), gate=gate)
        for i in range(6):
            await model.chat([ChatMessage(role="user", content=f"q{i}")], GenerationParams(max_tokens=4))
        from esc_eval.serve.calls.limits import Governor

        totals = await Governor(ledger).call("totals")
        m = totals["models"]["fake/judge"]
        assert m["requests"] == inner.calls  # every attempt reached the backend and was counted
        assert 0 < totals["spent_usd"] < 0.001 and m["dollars"] == pytest.approx(totals["spent_usd"])
    finally:
        stop_governor(ledger)
        stop_governor(limiter)


def test_prompt_estimate_counts_bytes():
    assert estimate_prompt_tokens([ChatMessage(role="user", content="a" * 400)]) == 100 + 4 + 3
    assert estimate_prompt_tokens([ChatMessage(role="user", content="好" * 100)]) == 75 + 4 + 3


def test_store_round_trip_and_atomic_put(tmp_path):
    store = ArrowFsStore(str(tmp_path / "cache"))
    assert store.get("ab" * 32) is None
    store.put("ab" * 32, b'{"x": 1}')
    assert store.get("ab" * 32) == b'{"x": 1}'
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    # readers racing a writer see nothing or the whole entry, never a part of it
    big = json.dumps({"text": "y" * 2_000_000}).encode()
    seen: set[int] = set()
    stop = threading.Event()

    def read():
        while not stop.is_set():
            data = store.get("cd" * 32)
            seen.add(-1 if data is None else len(data))

    t = threading.Thread(target=read)
    t.start()
    for _ in range(5):
        store.put("cd" * 32, big)
    stop.set()
    t.join()
    assert seen <= {-1, len(big)}
    # a URI works as well as a path
    uri_store = ArrowFsStore(f"file://{tmp_path}/cache")
    assert uri_store.get("ab" * 32) == b'{"x": 1}'


def test_only_deterministic_calls_are_cached():
    assert cacheable(GenerationParams(temperature=0.0))
    assert cacheable(GenerationParams(temperature=0.7, seed=3))
    assert not cacheable(GenerationParams(temperature=0.7))


def test_key_changes_with_every_input():
    ident = {"backend": "openai", "model": "gpt-4", "base_url": "u"}
    base = cache_key(ident, MSGS, GenerationParams(), None)
    assert base == cache_key(dict(ident), list(MSGS), GenerationParams(), None)
    assert base != cache_key({**ident, "base_url": "v"}, MSGS, GenerationParams(), None)
    assert base != cache_key(ident, [ChatMessage(role="user", content="I feel low.")], GenerationParams(), None)
    assert base != cache_key(ident, MSGS, GenerationParams(max_tokens=511), None)
    assert base != cache_key(ident, MSGS, GenerationParams(stop=["\n"]), None)
    assert base != cache_key(ident, MSGS, GenerationParams(), "fluency")
    assert base != cache_key(ident, MSGS, GenerationParams(json_schema={"type": "object"}), None)
    assert base != cache_key(ident, MSGS, GenerationParams(logprobs=5, logprob_labels=["0"]), None) != cache_key(
        ident, MSGS, GenerationParams(logprobs=5), None)


def test_a_key_made_before_the_structured_output_fields_still_hits():
    """The key of a call as it was written before json_schema / logprob_labels existed (their fields absent)."""
    import hashlib

    from esc_eval.serve.calls.cache import KEY_VERSION

    ident = {"backend": "openai", "model": "gpt-4", "base_url": "u"}
    params = GenerationParams(max_tokens=1, logprobs=5)
    before = {k: v for k, v in params.model_dump(mode="json").items() if k not in ("json_schema", "logprob_labels")}
    payload = {"v": KEY_VERSION, "model": ident, "adapter": None, "messages": [[m.role, m.content] for m in MSGS],
               "params": before}
    old = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                    default=str).encode("utf-8")).hexdigest()
    assert cache_key(ident, MSGS, params, None) == old


async def test_cached_model_answers_repeats_without_a_call(tmp_path):
    inner = get_chat_model("fake/judge")
    hits = []

    async def on_hit():
        hits.append(1)

    model = CachedChatModel(inner, ArrowFsStore(str(tmp_path)), on_hit=on_hit)
    params = GenerationParams(max_tokens=1, choices=list("01234"), logprobs=5)
    first = await model.chat(MSGS, params)
    again = await model.chat(MSGS, params)
    assert inner.calls == 1 and again.cached and not first.cached and hits == [1]
    assert (again.text, again.top_logprobs, again.prompt_tokens) == (first.text, first.top_logprobs, first.prompt_tokens)
    await model.chat(MSGS, GenerationParams(max_tokens=1, temperature=0.5))  # sampled, no seed: never cached
    await model.chat(MSGS, GenerationParams(max_tokens=1, temperature=0.5))
    assert inner.calls == 3
    # a second process (or worker) with the same store gets the same answer
    other = CachedChatModel(get_chat_model("fake/judge"), ArrowFsStore(str(tmp_path)))
    assert (await other.chat(MSGS, params)).cached and other.inner.calls == 0


async def test_an_unreachable_cache_is_a_miss_never_a_failed_call(caplog):
    class Broken:
        def get(self, key):
            raise OSError("no route to the bucket")

        def put(self, key, data):
            raise OSError("no route to the bucket")

    inner = get_chat_model("fake/judge")
    model = CachedChatModel(inner, Broken())
    for _ in range(2):
        assert (await model.chat(MSGS, GenerationParams(max_tokens=1))).text
    assert inner.calls == 2 and caplog.text.count("cannot read") == 1  # warned once
