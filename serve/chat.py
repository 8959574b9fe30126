"""The chat-model seam: every model call in esc-eval goes through `ChatModel.chat`.

Implementations are picked by a spec string `<backend>/<name>`:
  vllm/<model>    in-process vLLM engine (AsyncLLM); `vllm/embedded` = SmolLM2 shipped on PyPI
  serve/<app>     a Ray Serve deployment handle
  openai/<model>  any OpenAI-compatible HTTP endpoint
  fake/<script>   a scripted fake for tests and orchestration benchmarks
Each backend module imports its heavy dependencies lazily, inside the implementation.
"""
from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from esc_eval.serve.config_base import ConfigModel

Role = Literal["system", "user", "assistant"]


class ChatMessage(BaseModel):
    """One message of a chat conversation."""

    model_config = ConfigDict(frozen=True)
    role: Role = Field(description="Who speaks: system, user or assistant.")
    content: str = Field(description="The message text.")


class GenerationParams(ConfigModel):
    """Sampling parameters for one chat call (the paper: temperature 0, max 512 new tokens)."""

    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_tokens: int = Field(512, ge=1, description="Maximum number of new tokens.")
    seed: int | None = Field(None, description="Per-request sampling seed (for temperature > 0).")
    top_k: int | None = Field(None, ge=1, description="Top-k sampling (None = off); the in-process vLLM engine applies it.")
    repetition_penalty: float | None = Field(
        None, gt=0.0, description="Repetition penalty (None = off, HF's 1.0); the in-process vLLM engine applies it."
    )
    stop: list[str] | None = Field(None, description="Extra stop strings.")
    choices: list[str] | None = Field(
        None, description="Constrain the answer to one of these strings (structured output)."
    )
    logprobs: int | None = Field(
        None, ge=0, description="Return the top-k log-probabilities of each generated token."
    )


@dataclass
class ChatResult:
    """What one chat call returns."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # stop | length | error
    latency_s: float = 0.0
    # One dict per generated token: {token_text: logprob} of the top-k candidates.
    top_logprobs: list[dict[str, float]] = field(default_factory=list)
    model: str = ""
    attempts: int = 1  # set by the retry layer (serve/retry.py) when the call needed more than one


class ChatModelError(Exception):
    """A model call failed. Backends classify it; the one retry policy (serve/retry.py) acts on it.

    kind: rate_limit | transient | timeout (retried) or fatal (not retried).
    retry_after: seconds the server asked to wait (HTTP Retry-After), if it said.
    attempts: how many attempts were made, set by the retry layer when it gives up."""

    def __init__(self, message: str, kind: Literal["rate_limit", "transient", "fatal", "timeout"] = "transient",
                 *, retry_after: float | None = None, attempts: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after
        self.attempts = attempts

    def __reduce__(self):  # must pickle across Ray actor boundaries
        return (type(self), (str(self), self.kind), {"retry_after": self.retry_after, "attempts": self.attempts})


class ChatModel(abc.ABC):
    """One interface per seam: a single required async method."""

    name: str = "model"

    @abc.abstractmethod
    async def chat(
        self,
        messages: list[ChatMessage],
        params: GenerationParams | None = None,
        *,
        adapter: str | None = None,
        session_id: str | None = None,
    ) -> ChatResult:
        """Answer the conversation with one assistant message.

        adapter: a LoRA adapter name known to the backend (multi-LoRA judges).
        session_id: a sticky-routing key (all turns of one dialogue hit one replica).
        """

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (engines, HTTP clients)."""


def as_messages(messages: list[ChatMessage] | list[dict[str, Any]]) -> list[ChatMessage]:
    return [m if isinstance(m, ChatMessage) else ChatMessage(**m) for m in messages]


# backend prefix -> "module:factory"; the factory takes (name, **options) and returns a ChatModel
BACKENDS: dict[str, str] = {
    "vllm": "esc_eval.serve.vllm_engine:make_vllm_model",
    "fake": "esc_eval.serve.fake:make_fake_model",
    "openai": "esc_eval.serve.openai_http:make_openai_model",
    "serve": "esc_eval.serve.serve_handle:make_serve_model",
}


class UnknownModelError(ValueError):
    pass


def parse_spec(spec: str) -> tuple[str, str]:
    backend, sep, name = spec.partition("/")
    if not sep or not name:
        raise UnknownModelError(
            f"model spec {spec!r} must look like <backend>/<name>, backends: {', '.join(BACKENDS)}"
        )
    if backend not in BACKENDS:
        raise UnknownModelError(f"unknown model backend {backend!r} in {spec!r}; known: {', '.join(BACKENDS)}")
    return backend, name


def get_chat_model(spec: str, **options: Any) -> ChatModel:
    """Build the chat model named by `spec` (e.g. 'vllm/embedded', 'fake/echo')."""
    backend, name = parse_spec(spec)
    module_name, _, factory = BACKENDS[backend].partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, factory)(name, **options)
