"""What a worker wraps around each model call (sim/pool/participants.py ModelPool.get), and the worker
process's GC settings: bench sim (a)'s calls/s depend on both, and neither shows in a result."""
from __future__ import annotations

import gc

from esc_eval.serve.calls.cache import CachedChatModel
from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.serve.backends.fake import FakeChatModel
from esc_eval.serve.calls.limits import Governor, ModelLimiter, SpendLedger, host_governor, stop_governor
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.calls.retry import RetryingChatModel
from esc_eval.sim.driver.calls import CallSettings, ModelCalls
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.participants import ModelPool, _Pooled, _Tallied
from esc_eval.sim.pool.worker import GC_GEN1_THRESHOLD, tune_gc

MSGS = [ChatMessage(role="user", content="I feel low")]


async def test_a_model_without_limits_or_cache_gets_retries_and_the_tally_only():
    pool = ModelPool()
    for calls in (None, CallSettings()):  # no call settings, or settings that name no model of the job
        model = pool.get(ModelRef(model="fake/echo"), ExecutionConfig(), calls)
        assert isinstance(model, _Tallied) and isinstance(model.inner, RetryingChatModel)
        assert model.inner.gate is None
        assert isinstance(model.inner.inner, FakeChatModel)  # no _Pooled: a fake has no engine to release
    await model.chat(MSGS, GenerationParams(max_tokens=8))
    assert pool.tally.calls == 1 and pool.tally.completion_tokens > 0


async def test_a_model_with_limits_and_a_cache_keeps_its_gate_and_cache(tmp_path):
    ledger = host_governor(SpendLedger, (None,), remote=False)
    limiter = host_governor(ModelLimiter, ("fake/echo", {"max_concurrency": 2}), remote=False)
    try:
        calls = CallSettings(models={"fake/echo": ModelCalls(cache_root=str(tmp_path / "cache"), limiter=limiter)},
                             ledger=ledger)
        pool = ModelPool()
        model = pool.get(ModelRef(model="fake/echo"), ExecutionConfig(), calls)
        cached = model.inner
        assert isinstance(cached, CachedChatModel) and isinstance(cached.inner, RetryingChatModel)
        assert cached.inner.gate is not None
        for _ in range(2):  # the repeat is a cache hit: counted, never limited or sent
            await model.chat(MSGS, GenerationParams(max_tokens=8))
        counts = (await Governor(ledger).call("totals"))["models"]["fake/echo"]
        assert counts["requests"] == 1 and counts["cache_hits"] == 1
        assert (await Governor(limiter).call("stats"))["granted"] == 1
        assert pool.tally.calls == 2
    finally:
        stop_governor(ledger)
        stop_governor(limiter)


class _Engine(FakeChatModel):
    """A fake that, like an in-process vLLM engine, holds an engine that can be released."""

    holds_engine = True

    def release(self) -> bool:
        self.released = True
        return True


async def test_a_model_with_an_engine_to_release_is_rebuilt_after_a_release(monkeypatch):
    monkeypatch.setattr("esc_eval.sim.pool.participants.get_chat_model", lambda spec, **options: _Engine("echo"))
    pool = ModelPool()
    ref = ModelRef(model="fake/echo")
    model = pool.get(ref, ExecutionConfig())
    pooled = model.inner.inner
    assert isinstance(pooled, _Pooled)
    first = pooled.inner
    assert pool.release_key(pool.key(ref))
    await model.chat(MSGS)
    assert pooled.inner is not first and first.calls == 0 and pooled.inner.calls == 1


def test_a_worker_process_freezes_its_startup_heap_and_promotes_objects_later():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (before[0], max(before[1], GC_GEN1_THRESHOLD), before[2])
        assert gc.get_threshold()[1] > 10  # CPython's default: ten times fewer promotions
        assert gc.get_freeze_count() > 10_000  # the modules imported so far leave the full collections' walks
    finally:  # this is the test process's GC: as it was
        gc.unfreeze()
        gc.set_threshold(*before)
