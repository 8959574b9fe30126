"""The chat-model seam: every model call in esc-eval goes through `ChatModel.chat`.

Implementations are picked by a spec string `<backend>/<name>`:
  vllm/<model>    in-process vLLM engine (AsyncLLM); `vllm/embedded` = SmolLM2 shipped on PyPI
  serve/<app>     a Ray Serve deployment handle
  openai/<model>  any OpenAI-compatible HTTP endpoint
  litellm/<provider>/<model>  a provider's own API through LiteLLM (anthropic, gemini, ...)
  fake/<script>   a scripted fake for tests and orchestration benchmarks
  planted/<role>  a scripted model with known, planted behaviour (validity checks of the analyses)
Each backend is a `Backend` registered under its prefix (BACKENDS, `register_backend`): its `make`
builds the ChatModel; what the driver asks before any worker starts, without building a model, are
its methods with working defaults: `capabilities(name, **options)` (what a judge may ask of it),
`preflight(name, **options)` (ValueError with one line on a missing key or an unknown provider) and
`required_env(name, **options)` (variables the workers need). A backend's module imports its heavy
dependencies lazily, inside the implementation. Every hook a caller may use on a model is declared on
ChatModel with a working default, and a wrapper (WrapperChatModel: retries, the call cache, counters)
passes exactly those on: nothing is found by hasattr or `__getattr__`
(tests/sim/pool/test_sim_job_hooks.py holds every subclass to them).
"""
from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from esc_eval.serve.config.base import ConfigModel

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
    json_schema: dict[str, Any] | None = Field(
        None, description="Constrain the answer to JSON matching this schema (structured output: vLLM's structured "
        "outputs in-process, `response_format` json_schema on OpenAI-compatible APIs and LiteLLM)."
    )
    logprob_labels: list[str] | None = Field(
        None, description="With `logprobs`: labels (e.g. '0'..'4') whose log-probabilities every answer position "
        "reports where the backend can ask for given tokens' (in-process vLLM: exactly these tokens, bare and after "
        "a space); other backends report their top `logprobs` as usual."
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
    attempts: int = 1  # set by the retry layer (serve/calls/retry.py) when the call needed more than one
    # The generated tokens where the backend reports them (OpenAI's logprobs.content[].token):
    # which position of the answer holds the score when an answer is not constrained.
    tokens: list[str] = field(default_factory=list)
    cached: bool = False  # answered by the call cache (serve/calls/cache.py), no model call made


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond plain chat (what the judge's `logprob` method may ask for).

    logprobs: returns the top log-probabilities of generated tokens; max_top_logprobs: how many
    per token it accepts (OpenAI's API: 20); choice: how it can constrain an answer to given labels
    ('structured': vLLM's structured outputs or allowed tokens; 'logit_bias': a +100 bias on the
    labels' token ids, which the backend knows; None: it cannot); logit_bias: accepts logit_bias;
    json_schema: constrains an answer to a JSON schema (GenerationParams.json_schema)."""

    logprobs: bool = False
    max_top_logprobs: int = 0
    choice: Literal["structured", "logit_bias"] | None = None
    logit_bias: bool = False
    json_schema: bool = False


class ChatModelError(Exception):
    """A model call failed. Backends classify it; the one retry policy (serve/calls/retry.py) acts on it.

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


class ContextOverflowError(ChatModelError):
    """The prompt leaves no room for an answer in the model's context (vLLM's max_model_len, an API's
    context window). Never retried; a dialogue that outgrows its models' context ends on it
    (sim/dialogue/dialogue.py), it is not a failed call of a working model."""

    def __init__(self, message: str, kind: Literal["rate_limit", "transient", "fatal", "timeout"] = "fatal", **kw: Any):
        super().__init__(message if message.startswith("context_overflow") else f"context_overflow: {message}", "fatal", **kw)


class RunStopError(Exception):
    """A failure of the run, not of one item: a model that cannot start, an engine that died for
    good. Never retried, never written as a failed row: the job stops feeding work, keeps what
    finished and exits with this one line; the same command resumes once the cause is fixed.

    model: the model it concerns; detail: the last lines of the engine's output (for the manifest)."""

    def __init__(self, message: str, *, model: str | None = None, detail: list[str] | None = None):
        super().__init__(message)
        self.model = model
        self.detail = list(detail or [])

    def __reduce__(self):  # must pickle across Ray actor boundaries
        return (type(self), (str(self),), {"model": self.model, "detail": self.detail})


class EngineStartError(RunStopError):
    """A model's engine did not start (the message carries the engine's own cause)."""


class ChatModel(abc.ABC):
    """One interface per seam: a single required async method; every other hook is declared here
    with a working default (a backend overrides what it has, a wrapper passes them on:
    WrapperChatModel), so no caller probes a model with hasattr."""

    name: str = "model"
    default_params: GenerationParams | None = None  # what params=None means to it (None: GenerationParams())
    holds_engine: bool = False  # runs in an engine of this process (vllm/): start(), capacity(), release()
    released: bool = False  # its engine was released: the holder builds the model again to call it

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

    @property
    def capabilities(self) -> Capabilities:
        """What this backend supports beyond plain chat (none unless a backend says so)."""
        return Capabilities()

    def cache_identity(self) -> dict[str, Any]:
        """What identifies this model's answers in the call cache besides messages and parameters
        (the endpoint where it matters: the same name on another server is another model)."""
        return {"backend": type(self).__name__, "name": self.name}

    def start(self) -> None:
        """Start its engine now (blocking); a model that cannot start raises EngineStartError. Nothing
        to start by default (an API, a Serve deployment)."""

    def capacity(self) -> Any:
        """What its started engine holds at once (serve.engines.args.EngineCapacity), or None."""
        return None

    def release(self) -> bool:
        """Let go of its engine (it stops when nothing else holds it); whether it stopped."""
        return False


class WrapperChatModel(ChatModel):
    """A chat model around another (retries, the call cache, counters): every hook is the inner
    model's unless the wrapper overrides it, so a new hook reaches through every wrapper."""

    def __init__(self, inner: ChatModel):
        self.inner = inner
        self.name = inner.name

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter=None, session_id=None) -> ChatResult:
        return await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)

    async def close(self) -> None:
        await self.inner.close()

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity()

    @property
    def default_params(self) -> GenerationParams | None:  # type: ignore[override]
        return self.inner.default_params

    @property
    def holds_engine(self) -> bool:  # type: ignore[override]
        return self.inner.holds_engine

    @property
    def released(self) -> bool:  # type: ignore[override]
        return self.inner.released

    def start(self) -> None:
        self.inner.start()

    def capacity(self) -> Any:
        return self.inner.capacity()

    def release(self) -> bool:
        return self.inner.release()


def as_messages(messages: list[ChatMessage] | list[dict[str, Any]]) -> list[ChatMessage]:
    return [m if isinstance(m, ChatMessage) else ChatMessage(**m) for m in messages]


class Backend(abc.ABC):
    """One backend of the seam, picked by the string before the slash of a spec (`vllm/embedded`).
    `make` is its own; the checks made before any call have working defaults."""

    @abc.abstractmethod
    def make(self, name: str, **options: Any) -> ChatModel:
        """The chat model `name` with `options` (engines start later: ChatModel.start or the first call)."""

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        """What the model would support, without building it (no engine starts)."""
        return Capabilities()

    def preflight(self, name: str, **options: Any) -> None:
        """Check what can be checked before any call (a key, a provider): ValueError, one line."""

    def required_env(self, name: str, **options: Any) -> list[str]:
        """The environment variables its calls need in the workers (an API key's variable)."""
        return []


# backend prefix -> "module:attribute" of its Backend, imported on first use (heavy dependencies stay
# unimported until a spec names the backend); register_backend adds one.
BACKENDS: dict[str, str] = {
    "vllm": "esc_eval.serve.backends.vllm_engine:BACKEND",
    "fake": "esc_eval.serve.backends.fake:BACKEND",
    "planted": "esc_eval.serve.backends.planted:BACKEND",
    "openai": "esc_eval.serve.backends.openai_http:BACKEND",
    "serve": "esc_eval.serve.backends.serve_handle:BACKEND",
    "litellm": "esc_eval.serve.backends.litellm_api:BACKEND",
}


def register_backend(prefix: str, where: str) -> None:
    """Make `prefix/<name>` specs build models with the Backend at `where` ("module:attribute")."""
    if not prefix or "/" in prefix or ":" not in where:
        raise ValueError(f"register_backend({prefix!r}, {where!r}): a prefix without '/', and 'module:attribute'")
    BACKENDS[prefix] = where
# Backends whose calls cost money and go to someone else's servers: the call cache is on for them
# by default, and budgets, prices and limits concern them.
API_BACKENDS = ("openai", "litellm")


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


def backend(prefix: str) -> Backend:
    """The Backend registered for `prefix` (its module imported now)."""
    module, _, attribute = BACKENDS[prefix].partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, Backend):
        raise TypeError(f"backend {prefix!r}: {BACKENDS[prefix]} is not a serve.chat.interface.Backend")
    return found


def get_chat_model(spec: str, **options: Any) -> ChatModel:
    """Build the chat model named by `spec` (e.g. 'vllm/embedded', 'fake/echo')."""
    prefix, name = parse_spec(spec)
    return backend(prefix).make(name, **options)


def is_api_spec(spec: str) -> bool:
    """True for a model behind a paid API (openai/, litellm/)."""
    return spec.partition("/")[0] in API_BACKENDS


def backend_capabilities(spec: str, **options: Any) -> Capabilities:
    """The capabilities of the model `spec` would build, without building it (no engine starts)."""
    prefix, name = parse_spec(spec)
    return backend(prefix).capabilities(name, **options)


def backend_preflight(spec: str, **options: Any) -> list[str]:
    """Check what a backend can check before any call (a key, a provider); ValueError with one
    line naming the model and the setting. Returns the environment variables its workers need."""
    prefix, name = parse_spec(spec)
    b = backend(prefix)
    b.preflight(name, **options)
    return list(b.required_env(name, **options))
