"""`litellm/<provider>/<model>`: a provider's own API through LiteLLM (Anthropic's messages API,
Gemini, Bedrock, Mistral, ...; `litellm/openai/<model>` is OpenAI's API through LiteLLM).

The same paths as every backend: failures are classified here (429 with its Retry-After ->
rate_limit; timeouts; 5xx and connection errors -> transient; the rest fatal) and retried only by
the one retry policy (serve/calls/retry.py): LiteLLM's own retries are off. Limits, the spend cap and
the call cache wrap it like any model (sim/driver/calls.py).

Offline at run time: LiteLLM would fetch its price list from the network when imported, unless
LITELLM_LOCAL_MODEL_COST_MAP is set, which this module sets before importing it (the list shipped
in the wheel is used); its tiktoken encodings are the ones it ships (it points TIKTOKEN_CACHE_DIR at
them). Keys come from the provider's usual environment variable (ANTHROPIC_API_KEY, ...) or the
variable `api_key_env` names; `api_base` points a provider at another server.

Options: api_base, api_key_env, timeout_s, default_params, extra (more keyword arguments for
litellm.acompletion, e.g. {"anthropic_version": ...}).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

from esc_eval.serve.chat.interface import (Backend, Capabilities, ChatModel, ChatModelError, ChatResult, ContextOverflowError,
                                           GenerationParams, as_messages)
from esc_eval.serve.backends.openai_http import HTTP_TIMEOUT_S, parse_retry_after

log = logging.getLogger("esc_eval.serve.litellm")
INSTALL_HINT = "the litellm/ backend needs LiteLLM: pip install 'litellm==1.110.2'"


def _litellm():
    # Never fetch the price list over the network at import (the wheel ships one).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def split_model(name: str) -> tuple[str, str]:
    """'anthropic/claude-3-5-sonnet' -> ('anthropic', 'claude-3-5-sonnet')."""
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"model 'litellm/{name}': expected litellm/<provider>/<model>, e.g. "
                         "litellm/anthropic/claude-3-5-sonnet-20240620")
    return provider, model


def list_price(name: str):
    """LiteLLM's list price of `provider/model` as a TokenPrice (None when it has none)."""
    from esc_eval.serve.registry.entry import TokenPrice

    provider, model = split_model(name)
    cost = _litellm().model_cost
    entry = cost.get(name) or cost.get(model) or {}
    p_in, p_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if p_in is None or p_out is None:
        return None
    return TokenPrice(prompt_per_1m=float(p_in) * 1e6, completion_per_1m=float(p_out) * 1e6)


def classify(exc: BaseException) -> ChatModelError:
    """A LiteLLM exception as a ChatModelError of the kind the retry policy acts on."""
    status = getattr(exc, "status_code", None)
    text = f"{type(exc).__name__}: {exc}"[:1000]
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    retry_after = None
    if headers is not None:
        try:
            retry_after = parse_retry_after(headers.get("retry-after") or headers.get("Retry-After"))
        except AttributeError:
            retry_after = None
    name = type(exc).__name__
    if name == "ContextWindowExceededError":
        return ContextOverflowError(f"context_overflow: {text}")
    if status == 429 or name == "RateLimitError":
        return ChatModelError(text, kind="rate_limit", retry_after=retry_after)
    if name in ("Timeout", "APITimeoutError") or status == 408:
        return ChatModelError(text, kind="timeout")
    if name in ("APIConnectionError", "InternalServerError", "ServiceUnavailableError") or (status or 0) >= 500 or status == 409:
        return ChatModelError(text, kind="transient", retry_after=retry_after)
    return ChatModelError(text, kind="fatal")


class LiteLLMChatModel(ChatModel):
    """A ChatModel over litellm.acompletion (no retries of its own)."""

    def __init__(self, name: str, *, api_base: str | None = None, api_key_env: str | None = None,
                 timeout_s: float = HTTP_TIMEOUT_S, default_params: GenerationParams | None = None,
                 extra: dict[str, Any] | None = None):
        self.provider, self.model = split_model(name)
        self.name = f"litellm/{name}"
        self.target = name
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.default_params = default_params or GenerationParams()
        self.extra = dict(extra or {})
        self._caps = BACKEND.capabilities(name)

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "litellm", "model": self.target, "api_base": self.api_base, "extra": self.extra}

    def _kwargs(self, params: GenerationParams) -> dict[str, Any]:
        kw: dict[str, Any] = {"temperature": params.temperature, "max_tokens": params.max_tokens}
        if params.top_p != 1.0:
            kw["top_p"] = params.top_p
        if params.seed is not None:
            kw["seed"] = params.seed
        if params.stop:
            kw["stop"] = list(params.stop)
        if params.logprobs is not None and self._caps.logprobs:
            kw["logprobs"] = True
            kw["top_logprobs"] = params.logprobs
        if params.choices:
            from esc_eval.serve.backends.openai_http import LOGIT_BIAS_MAX, openai_label_token_ids

            ids = openai_label_token_ids(self.model, list(params.choices)) if self._caps.choice == "logit_bias" else None
            if ids is None:
                raise ChatModelError(f"{self.name}: cannot constrain an answer to {params.choices} on this provider",
                                     kind="fatal")
            kw["logit_bias"] = {str(i): LOGIT_BIAS_MAX for i in ids.values()}
            kw["max_tokens"] = 1
        if params.json_schema is not None and self._caps.json_schema:  # LiteLLM maps it to each provider's way
            from esc_eval.serve.backends.openai_http import JSON_SCHEMA_NAME

            kw["response_format"] = {"type": "json_schema", "json_schema": {
                "name": JSON_SCHEMA_NAME, "schema": params.json_schema, "strict": True}}
        return kw

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        litellm = _litellm()
        params = params or self.default_params
        if adapter:
            raise ChatModelError(f"{self.name}: LoRA adapters are not available through LiteLLM", kind="fatal")
        kw = self._kwargs(params)
        if self.api_base:
            kw["api_base"] = self.api_base
        if self.api_key_env:
            kw["api_key"] = os.environ.get(self.api_key_env)
        msgs = [{"role": m.role, "content": m.content} for m in as_messages(messages)]
        started = time.perf_counter()
        try:
            resp = await litellm.acompletion(model=self.target, messages=msgs, timeout=self.timeout_s, num_retries=0,
                                             max_retries=0, **kw, **self.extra)
        except Exception as exc:  # noqa: BLE001 - classified here, retried by serve/calls/retry.py
            raise classify(exc) from exc
        return self._result(resp, time.perf_counter() - started)

    def _result(self, resp: Any, latency_s: float) -> ChatResult:
        choice = resp.choices[0]
        usage = getattr(resp, "usage", None)
        top: list[dict[str, float]] = []
        tokens: list[str] = []
        content = getattr(getattr(choice, "logprobs", None), "content", None) or []
        for tok in content:
            cands = getattr(tok, "top_logprobs", None) or []
            top.append({c.token: float(c.logprob) for c in cands} or {tok.token: float(tok.logprob)})
            tokens.append(tok.token)
        return ChatResult(
            text=choice.message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=choice.finish_reason or "stop", latency_s=latency_s, top_logprobs=top,
            model=getattr(resp, "model", "") or self.target, tokens=tokens)


def make_litellm_model(name: str, **options: Any) -> LiteLLMChatModel:
    """Factory for spec `litellm/<provider>/<model>`; options are LiteLLMChatModel keyword arguments."""
    return LiteLLMChatModel(name, **options)


class LiteLLMBackend(Backend):
    """`litellm/<name>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_litellm_model(name, **options)

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        """What the provider takes, from LiteLLM's own table (offline)."""
        provider, model = split_model(name)
        try:
            supported = set(_litellm().get_supported_openai_params(model=model, custom_llm_provider=provider) or [])
        except Exception:  # noqa: BLE001 - an unknown model: assume plain chat
            supported = set()
        logprobs = "logprobs" in supported and "top_logprobs" in supported
        bias = "logit_bias" in supported
        choice = None
        if bias and provider in ("openai", "azure"):  # OpenAI's tokenizers: the digits' ids are known
            from esc_eval.serve.backends.openai_http import openai_label_token_ids

            choice = "logit_bias" if openai_label_token_ids(model, ["0"]) else None
        try:  # LiteLLM's table: whether the model takes a response_format json_schema (Anthropic's: as a tool)
            schema = bool(_litellm().supports_response_schema(model=model, custom_llm_provider=provider))
        except Exception:  # noqa: BLE001 - an unknown model: no schema, the answer is parsed as it comes
            schema = False
        return Capabilities(logprobs=logprobs, max_top_logprobs=20 if logprobs else 0, choice=choice, logit_bias=bias,
                            json_schema=schema)

    def preflight(self, name: str, *, api_base: str | None = None, api_key_env: str | None = None, **_: Any) -> None:
        """An unknown provider, or a provider whose key is not set: one line naming the model and the setting."""
        provider, model = split_model(name)
        litellm = _litellm()
        if provider not in litellm.provider_list:
            raise ValueError(f"model 'litellm/{name}': unknown LiteLLM provider {provider!r} (known include: "
                             f"{', '.join(sorted(str(p) for p in litellm.provider_list)[:40])}, ...)")
        if api_key_env:
            if not os.environ.get(api_key_env):
                raise ValueError(f"model 'litellm/{name}': no API key: set the environment variable {api_key_env} (api_key_env)")
            return
        missing = litellm.validate_environment(name, api_base=api_base).get("missing_keys") or []
        if missing:
            raise ValueError(f"model 'litellm/{name}': no API key: set the environment variable "
                             f"{' and '.join(missing)} (or name another with options.api_key_env)")

    def required_env(self, name: str, *, api_key_env: str | None = None, api_base: str | None = None, **_: Any) -> list[str]:
        """The provider's key variables (found by LiteLLM) and its base-URL variable, for the workers."""
        provider, _model = split_model(name)
        names = [api_key_env] if api_key_env else []
        try:
            env = _litellm().validate_environment(name, api_base=api_base)
            names += [k for k in (env.get("missing_keys") or []) if k]
        except Exception:  # noqa: BLE001 - only a hint of which variables to forward
            pass
        upper = provider.upper().replace("-", "_")
        names += [f"{upper}_API_KEY", f"{upper}_API_BASE", f"{upper}_BASE_URL"]
        return [n for n in dict.fromkeys(names) if n]


BACKEND = LiteLLMBackend()
