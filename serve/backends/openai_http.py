"""`openai/<model>`: any OpenAI-compatible /v1/chat/completions endpoint (OpenAI, vLLM, Ray Serve LLM).

Failures are classified here and retried by the one retry policy (serve/calls/retry.py), never here:
  429                      -> rate_limit, with the server's Retry-After (seconds or HTTP date)
  5xx, 408/409, connection -> transient (with Retry-After when given)
  read/connect timeouts    -> timeout
  other 4xx, a 5xx that names an unknown adapter -> fatal
The API key is read from the environment variable named by `api_key_env` (default
OPENAI_API_KEY) and never logged.

`api` says whose rules the server follows, which decides what a judge may ask of it
(`capabilities`): 'openai' (the default: OpenAI's API refuses unknown fields such as vLLM's
`structured_outputs` and top_logprobs over 20; an answer is constrained with logit_bias on the
labels' token ids where the model's tokenizer is known: OpenAI's tiktoken encodings) or 'vllm'
(vLLM's or Ray Serve LLM's OpenAI server: structured outputs).
"""
from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import time
from typing import Any, Literal

from esc_eval.serve.chat.interface import (Backend, Capabilities, ChatMessage, ChatModel, ChatModelError, ChatResult,
                                           ContextOverflowError, GenerationParams,
                                 as_messages)

log = logging.getLogger("esc_eval.serve.backends.openai_http")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SESSION_HEADER = "x-session-id"
# Seconds one remote API call may take before it counts as failed (and is retried): a long judge reply
# on a busy endpoint takes tens of seconds; the LiteLLM backend reads the same default.
HTTP_TIMEOUT_S = 120.0
API_KEY_ENV = "OPENAI_API_KEY"  # where an OpenAI-compatible endpoint's key is read from unless told (OpenAI's own name)
StructuredMode = Literal["vllm", "guided_choice", "logit_bias", "none"]
ApiKind = Literal["openai", "vllm"]
OPENAI_MAX_TOP_LOGPROBS = 20  # OpenAI's API refuses more with HTTP 400
LOGIT_BIAS_MAX = 100  # OpenAI's range is -100..100; +100 all but forces one of the biased tokens
# In OpenAI's tiktoken encodings (r50k, p50k, cl100k, o200k) the first tokens are the printable
# bytes in order, so the digits '0'..'9' are token ids 15..24 in every one of them (checked
# against cl100k_base and o200k_base, which LiteLLM ships offline).
OPENAI_DIGIT_TOKEN_IDS = {str(d): 15 + d for d in range(10)}
OPENAI_MODEL_PREFIXES = ("gpt-", "chatgpt-", "o1", "o3", "o4", "text-davinci", "davinci", "babbage")
# 5xx answers that will never succeed on retry (ray.serve.llm reports LoRA misuse as HTTP 500)
PERMANENT_5XX = ("no adapter found", "lora config is not set", "must setup lora config")
# vLLM's server and OpenAI word a prompt too long for the context so ("This model's maximum context length is ...")
CONTEXT_400 = ("maximum context length", "context length", "context_length_exceeded")
JSON_SCHEMA_NAME = "answer"  # response_format.json_schema.name: OpenAI requires one
# OpenAI models that take no response_format json_schema (structured outputs came with gpt-4o-2024-08-06)
OPENAI_NO_JSON_SCHEMA = ("gpt-4", "gpt-3.5", "text-davinci", "davinci", "babbage")
OPENAI_JSON_SCHEMA_OK = ("gpt-4o", "gpt-4.1", "gpt-4.5", "chatgpt-4o")


def _httpx():
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - httpx is a core dependency
        raise ImportError("the openai/ backend needs httpx: pip install 'httpx>=0.27'") from exc
    return httpx


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def adapter_model_name(model: str, adapter: str | None) -> str:
    """ray.serve.llm multi-LoRA convention: model id 'base:adapter' selects an adapter."""
    return f"{model}:{adapter}" if adapter else model


def openai_label_token_ids(model: str, labels: list[str]) -> dict[str, int] | None:
    """Token ids of single-digit labels for an OpenAI model (None for other models or labels)."""
    base = model.split(":")[0].rsplit("/", 1)[-1].lower()
    if not base.startswith(OPENAI_MODEL_PREFIXES) or not all(lab in OPENAI_DIGIT_TOKEN_IDS for lab in labels):
        return None
    return {lab: OPENAI_DIGIT_TOKEN_IDS[lab] for lab in labels}


def takes_json_schema(model: str, api: ApiKind) -> bool:
    """Whether the endpoint takes response_format json_schema: a vLLM server does; under OpenAI's rules,
    every model but OpenAI's older ones (gpt-4, gpt-4-turbo, gpt-3.5-turbo: json_object at most)."""
    base = model.split(":")[0].rsplit("/", 1)[-1].lower()
    return api == "vllm" or base.startswith(OPENAI_JSON_SCHEMA_OK) or not base.startswith(OPENAI_NO_JSON_SCHEMA)


def structured_mode(model: str, api: ApiKind, structured_outputs: StructuredMode | None) -> StructuredMode:
    """How `choices` are sent: the explicit setting, else vLLM's field on a vLLM server, else
    logit_bias where the model's digit ids are known, else vLLM's field (the earlier default)."""
    if structured_outputs is not None:
        return structured_outputs
    if api == "openai" and openai_label_token_ids(model, ["0"]) is not None:
        return "logit_bias"
    return "vllm"


def _key_env(options: dict[str, Any]) -> str:
    return options.get("api_key_env", "OPENAI_API_KEY")


def _base_url(options: dict[str, Any]) -> str:
    return (options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def build_request_body(
    model: str,
    messages: list[ChatMessage],
    params: GenerationParams,
    *,
    structured: StructuredMode = "vllm",
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one /v1/chat/completions request."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    if params.logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = params.logprobs
    if params.choices:
        ids = openai_label_token_ids(model, list(params.choices)) if structured == "logit_bias" else None
        if structured == "logit_bias" and ids is None:
            raise ChatModelError(f"{model}: no known token ids for the labels {params.choices} (logit_bias)", kind="fatal")
        if ids is not None:
            body["logit_bias"] = {str(i): LOGIT_BIAS_MAX for i in ids.values()}
            body["max_tokens"] = 1  # one label token: the bias has nothing to say about a second one
        elif structured == "vllm":
            body["structured_outputs"] = {"choice": list(params.choices)}
        elif structured == "guided_choice":
            body["guided_choice"] = list(params.choices)
        else:
            raise ChatModelError(
                "GenerationParams.choices needs an endpoint with structured outputs "
                "(structured_outputs='vllm' or 'guided_choice')", kind="fatal")
    if params.json_schema is not None:  # OpenAI's structured outputs; vLLM's server takes the same field
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": JSON_SCHEMA_NAME, "schema": params.json_schema, "strict": True}}
    if extra_body:
        body.update(extra_body)
    return body


def parse_response(data: dict[str, Any], latency_s: float) -> ChatResult:
    """Fill a ChatResult from a chat.completion JSON object."""
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise ChatModelError(f"malformed chat completion (no choices[0]): {str(data)[:300]}", kind="fatal") from exc
    usage = data.get("usage") or {}
    top: list[dict[str, float]] = []
    tokens: list[str] = []
    for tok in ((choice.get("logprobs") or {}).get("content") or []):
        cands = tok.get("top_logprobs") or [{"token": tok.get("token", ""), "logprob": tok.get("logprob", 0.0)}]
        top.append({c["token"]: float(c["logprob"]) for c in cands})
        tokens.append(tok.get("token", ""))
    return ChatResult(
        text=message.get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=choice.get("finish_reason") or "stop",
        latency_s=latency_s,
        top_logprobs=top,
        model=data.get("model", ""),
        tokens=tokens,
    )


class OpenAIChatModel(ChatModel):
    """A ChatModel over an OpenAI-compatible HTTP endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = API_KEY_ENV,
        timeout_s: float = HTTP_TIMEOUT_S,
        connect_timeout_s: float = 5.0,
        structured_outputs: StructuredMode | None = None,
        api: ApiKind = "openai",
        extra_body: dict[str, Any] | None = None,
        default_params: GenerationParams | None = None,
    ):
        """api: whose rules the server follows ('openai' or 'vllm', see the module docstring);
        structured_outputs: how `choices` are sent (None: from `api` and the model name)."""
        self.name = model
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.api = api
        self._structured_option = structured_outputs
        self.structured_outputs = structured_mode(model, api, structured_outputs)
        self.extra_body = extra_body
        self.default_params = default_params or GenerationParams()
        self._client = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- plumbing ---------------------------------------------------------------------------
    def _headers(self, session_id: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif self.base_url == DEFAULT_BASE_URL:
            raise ChatModelError(
                f"no API key for {self.base_url}: set the environment variable {self.api_key_env}",
                kind="fatal")
        if session_id:
            headers[SESSION_HEADER] = session_id
        return headers

    def _get_client(self):
        httpx = _httpx()
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
            )
            self._client_loop = loop
        return self._client

    async def _post_once(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        httpx = _httpx()
        client = self._get_client()
        try:
            resp = await client.post("/chat/completions", json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise ChatModelError(f"timeout after {self.timeout_s:g} s ({type(exc).__name__}) at {self.base_url}", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise ChatModelError(f"cannot reach {self.base_url}: {type(exc).__name__}: {exc}", kind="transient") from exc
        if resp.status_code == 200:
            try:
                return resp.json()
            except ValueError as exc:
                raise ChatModelError(f"non-JSON 200 response from {self.base_url}: {resp.text[:200]}", kind="fatal") from exc
        detail = resp.text[:500]
        if resp.status_code == 429:
            raise ChatModelError(f"HTTP 429 rate limited: {detail}", kind="rate_limit",
                                 retry_after=parse_retry_after(resp.headers.get("retry-after")))
        if resp.status_code == 400 and any(p in detail.lower() for p in CONTEXT_400):
            raise ContextOverflowError(f"HTTP 400 from {self.base_url} for model {body['model']!r}: {detail}")
        if resp.status_code >= 500 and any(p in detail.lower() for p in PERMANENT_5XX):
            raise ChatModelError(f"HTTP {resp.status_code} from {self.base_url} for model {body['model']!r}: {detail}", kind="fatal")
        if resp.status_code >= 500 or resp.status_code in (408, 409):
            raise ChatModelError(f"HTTP {resp.status_code}: {detail}", kind="transient",
                                 retry_after=parse_retry_after(resp.headers.get("retry-after")))
        raise ChatModelError(f"HTTP {resp.status_code} from {self.base_url} for model {body['model']!r}: {detail}", kind="fatal")

    @property
    def capabilities(self) -> Capabilities:
        return BACKEND.capabilities(self.model, api=self.api, structured_outputs=self._structured_option)

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "openai", "model": self.model, "base_url": self.base_url, "api": self.api,
                "structured": self.structured_outputs, "extra_body": self.extra_body}

    # -- the interface ----------------------------------------------------------------------
    async def chat(
        self,
        messages,
        params: GenerationParams | None = None,
        *,
        adapter: str | None = None,
        session_id: str | None = None,
    ) -> ChatResult:
        params = params or self.default_params
        body = build_request_body(
            adapter_model_name(self.model, adapter), as_messages(messages), params,
            structured=self.structured_outputs, extra_body=self.extra_body,
        )
        headers = self._headers(session_id)
        start = time.perf_counter()
        data = await self._post_once(body, headers)
        return parse_response(data, time.perf_counter() - start)

    async def close(self) -> None:
        if self._client is not None and not self._client.is_closed:
            try:
                await self._client.aclose()
            except RuntimeError:  # its loop is gone; nothing left to release
                pass
        self._client = None


def make_openai_model(name: str, **options: Any) -> ChatModel:
    """Factory for spec `openai/<name>`; options are OpenAIChatModel keyword arguments."""
    return OpenAIChatModel(name, **options)


class OpenAIBackend(Backend):
    """`openai/<name>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_openai_model(name, **options)

    def capabilities(self, name: str, *, api: ApiKind = "openai", structured_outputs: StructuredMode | None = None,
                     **_: Any) -> Capabilities:
        """What an OpenAI-compatible endpoint supports, from its `api` rules and the model name."""
        mode = structured_mode(name, api, structured_outputs)
        # Under OpenAI's rules vLLM's field is sent only where the config says the server takes it.
        implied_vllm = api == "openai" and structured_outputs is None and mode == "vllm"
        choice = None if mode == "none" or implied_vllm else "logit_bias" if mode == "logit_bias" else "structured"
        return Capabilities(logprobs=True, max_top_logprobs=OPENAI_MAX_TOP_LOGPROBS, choice=choice, logit_bias=True,
                            json_schema=takes_json_schema(name, api))

    def preflight(self, name: str, **options: Any) -> None:
        """OpenAI's own API needs a key: one line naming the model and the variable when it is missing."""
        env = _key_env(options)
        if _base_url(options) == DEFAULT_BASE_URL and env and not os.environ.get(env):
            raise ValueError(f"model 'openai/{name}': no API key for {DEFAULT_BASE_URL}: set the environment variable "
                             f"{env} (or point OPENAI_BASE_URL / options.base_url at another server)")

    def required_env(self, name: str, **options: Any) -> list[str]:
        """What the workers need from the driver's environment: the key and the base URL."""
        return [v for v in (_key_env(options), "OPENAI_BASE_URL") if v]


BACKEND = OpenAIBackend()
