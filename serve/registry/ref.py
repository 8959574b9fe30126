"""A model taking part in a run (`ModelRef`): a registry name or a backend spec, and how to call it
(its sampling parameters, system prompt, adapter, backend options, quota and name in rows).

It lives in serve/, beside the chat-model seam it configures, because every layer of sim names
models this way (the dialogue's participants, the judge, the pool's call settings, the jobs) and it
is made of serve's own types."""
from __future__ import annotations

from typing import Any

from pydantic import Field

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.config.base import ConfigModel
from esc_eval.serve.calls.limits import ModelLimits

# The Serve application `esc-eval serve up` deploys and a `serve/<model>` spec calls by default: one name, so
# the spec reaches what `serve up` started (serve/app/application.py, serve/backends/serve_handle.py).
SERVE_APP_NAME = "esc-eval"
# The model a run, a judge or a benchmark uses unless told: SmolLM2-135M on vLLM, which runs on any CPU.
DEFAULT_MODEL = "vllm/embedded"


class ModelRef(ConfigModel):
    """A model taking part in a run: a registry name or a backend spec, and how to call it."""

    model: str = Field(DEFAULT_MODEL, description="Registry name (e.g. 'qwen1.5-7b-chat') or spec '<backend>/<name>' (vllm/embedded, openai/gpt-4, serve/app, fake/echo).")
    params: GenerationParams = Field(default_factory=GenerationParams, description="Sampling parameters for this model's calls.")
    system_prompt: str | None = Field(None, description="System prompt override (targets: default is the release's 'You are a helpful assistant!').")
    adapter: str | None = Field(None, description="LoRA adapter name to use on every call (multi-LoRA backends).")
    options: dict[str, Any] = Field(default_factory=dict, description="Backend options, e.g. vLLM engine kwargs (max_model_len, adapters), or base_url and api ('openai' | 'vllm') for openai/.")
    limits: ModelLimits | None = Field(None, description="This model's quota for the whole run (max_concurrency, requests_per_minute, tokens_per_minute), over the registry entry's `limits` field by field; models named twice share one quota (the stricter value of each field).")
    name: str | None = Field(None, min_length=1, description="A target's name in rows, tables and dialogue ids (default: the model, plus ':<adapter>'); name two targets of one model apart, e.g. the same model with two system prompts. Unset keeps existing run folders' ids.")

    @property
    def target_name(self) -> str:
        """The name rows and dialogue ids carry: `name`, else the model (+ ':<adapter>')."""
        return self.name or self.model + (f":{self.adapter}" if self.adapter else "")
