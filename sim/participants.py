"""Build chat models from config: registry names or backend specs -> ChatModel instances.

One instance per distinct (spec, options) inside a process, so participants naming the same
model share one engine (and its batching and prefix cache).
"""
from __future__ import annotations

import json

from esc_eval.serve.chat import ChatModel, get_chat_model
from esc_eval.serve.registry import resolve
from esc_eval.sim.config import ExecutionConfig, ModelRef
from esc_eval.serve.retry import RetryingChatModel


class ModelPool:
    """Chat models of one worker, built on first use, shared between participants and jobs."""

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}

    def raw(self, ref: ModelRef) -> ChatModel:
        spec, registry_options = resolve(ref.model)
        options = {**registry_options, **ref.options}
        key = spec + "|" + json.dumps(options, sort_keys=True, default=str)
        if key not in self._models:
            self._models[key] = get_chat_model(spec, **options)
        return self._models[key]

    def get(self, ref: ModelRef, execution: ExecutionConfig) -> ChatModel:
        """The model behind `ref`, with the job's timeouts and classified retries."""
        return RetryingChatModel(self.raw(ref), execution.retry_policy())

    async def close(self) -> None:
        for m in self._models.values():
            await m.close()
