"""Build chat models from config: registry names or backend specs -> ChatModel instances.

One instance per distinct (spec, options) inside a process, so participants naming the same
model share one engine (and its batching and prefix cache).
"""
from __future__ import annotations

import json
import logging

from esc_eval.serve.chat import ChatModel, get_chat_model
from esc_eval.serve.registry import resolve
from esc_eval.sim.config import ExecutionConfig, ModelRef
from esc_eval.serve.retry import RetryingChatModel

log = logging.getLogger("esc_eval.participants")


class CallTally:
    """Model calls answered in one worker and their tokens (what live progress shows mid-item)."""

    def __init__(self) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = 0

    def snapshot(self) -> dict[str, int]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


class _Tallied:
    """A chat model that adds each answer to a tally (one attribute lookup and three additions per call)."""

    def __init__(self, inner: ChatModel, tally: CallTally):
        self.inner, self.tally, self.name = inner, tally, inner.name

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        result = await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        t = self.tally
        t.calls += 1
        t.prompt_tokens += result.prompt_tokens or 0
        t.completion_tokens += result.completion_tokens or 0
        return result

    def __getattr__(self, name):  # everything else (max_attempts, close, host, ...) is the inner model's
        return getattr(self.inner, name)


class ModelPool:
    """Chat models of one worker, built on first use, shared between participants and jobs."""

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}
        self._stores: dict[str, object] = {}
        self.tally = CallTally()

    def store(self, root: str):
        """The call cache at `root` (a folder or a URI; sim/call_setup.call_cache_location says where)."""
        if root not in self._stores:
            from esc_eval.serve.call_cache import ArrowFsStore

            self._stores[root] = ArrowFsStore(root)
        return self._stores[root]

    def raw(self, ref: ModelRef) -> ChatModel:
        spec, registry_options = resolve(ref.model)
        options = {**registry_options, **ref.options}
        key = spec + "|" + json.dumps(options, sort_keys=True, default=str)
        if key not in self._models:
            self._models[key] = get_chat_model(spec, **options)
        return self._models[key]

    def get(self, ref: ModelRef, execution: ExecutionConfig, calls=None) -> ChatModel:
        """The model behind `ref`, with the job's timeouts and classified retries; with the job's
        `calls` (sim/call_setup.CallSettings), also its limits, spend cap and call cache:
        cache -> retries -> (each attempt) limits and budget -> the backend."""
        raw = self.raw(ref)
        if calls is None:
            return _Tallied(RetryingChatModel(raw, execution.retry_policy()), self.tally)
        key, mc = calls.for_ref(ref)
        gate = calls.gate(key, mc)
        model: ChatModel = RetryingChatModel(raw, execution.retry_policy(), gate=gate)
        if mc is not None and mc.cache_root:
            from esc_eval.serve.call_cache import CachedChatModel

            try:
                store = self.store(mc.cache_root)
            except (OSError, ValueError) as e:  # e.g. an object store this worker has no credentials for
                log.warning("call cache at %s unavailable (%s); calls are not cached", mc.cache_root, e)
                store = None
            if store is not None:
                model = CachedChatModel(model, store, default_params=getattr(raw, "default_params", None),
                                        on_hit=gate.hit if gate is not None else None)
        return _Tallied(model, self.tally)

    async def close(self) -> None:
        for m in self._models.values():
            await m.close()
