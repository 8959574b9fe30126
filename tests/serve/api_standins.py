"""Local stand-ins for providers' APIs, as strict as the real ones where esc-eval touches them.

StrictOpenAI     POST /v1/chat/completions: OpenAI's request fields only (anything else, e.g. vLLM's
                 `structured_outputs`, is HTTP 400 as OpenAI answers it), top_logprobs 0..20 and only
                 with logprobs, logit_bias keyed by token id with values in -100..100, a bearer key when
                 one is set; logprobs in OpenAI's shape; an answer restricted to the tokens given
                 +100 bias (OpenAI's digit ids 15..24); 429 with Retry-After at a configured rate or
                 above a requests-per-minute limit (a token bucket of one second's worth, as OpenAI
                 smooths its limits).
StrictAnthropic  POST /v1/messages: the Messages API's fields (max_tokens required; system at the top
                 level; roles user/assistant alternating from user), x-api-key and anthropic-version
                 headers; its response and error shapes; 429 with retry-after on demand; "prompt is too
                 long" past a configured context.

A `response_format` json_schema is checked as OpenAI checks it (a name; in strict mode every key
required and no other allowed; not with gpt-4 / gpt-3.5-turbo) and answered with a JSON object of a
digit per key, each digit its own token in the logprobs.
Judge prompts ("... score (The number only) ...") get a digit, deterministic in the prompt; other
prompts get a short reply, deterministic too. Both count requests by content, so a test can tell
whether any call was repeated. Each runs in a thread with its own event loop (Ray workers and CLI
subprocesses reach it over 127.0.0.1).
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections import Counter

from aiohttp import web

OPENAI_FIELDS = {
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs",
    "top_p", "user", "verbosity", "web_search_options",
}
ANTHROPIC_FIELDS = {"model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k", "stop_sequences",
                    "metadata", "stream", "tools", "tool_choice", "thinking", "service_tier", "container", "mcp_servers"}
DIGIT_IDS = {15 + d: str(d) for d in range(10)}  # OpenAI's tiktoken encodings


def _digest(obj) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).digest()[:8], "big")


def _is_judge(text: str) -> bool:
    return "score" in text.lower() and "number only" in text.lower()


def reply_for(messages: list[dict], max_tokens: int) -> str:
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or ""
    if isinstance(last, list):
        last = " ".join(b.get("text", "") for b in last if isinstance(b, dict))
    if _is_judge(last):
        return str(_digest(messages) % 5)
    words = ["I", "hear", "you,", "that", "sounds", "hard.", "Tell", "me", "more", "about", "it."]
    n = max(1, min(len(words), max_tokens))
    return " ".join(words[:n]) + f" ({_digest(messages) % 1000})"


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class _Base:
    client_max_size = 2**20  # request bodies up to this (aiohttp's default); the batch stand-ins take more

    def __init__(self, *, key: str | None = None, rpm: float | None = None, fail_every: int = 0,
                 retry_after: float = 0.2):
        self.key, self.rpm, self.fail_every, self.retry_after = key, rpm, fail_every, retry_after
        self.requests = 0
        self.ok = 0
        self.refused_429 = 0
        self.bodies: Counter[str] = Counter()  # request content -> times seen
        self.times: list[float] = []  # monotonic time of each answered (200) request
        self.level = 1.0  # token bucket of one second's worth (rpm / 60), full at start
        self.context: int | None = None  # the model's context window (prompt + max_tokens), as OpenAI refuses past it
        self.last = time.monotonic()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.base_url = ""

    def _over_rate(self) -> float | None:
        """Seconds to wait when this request is over the rate (a token bucket), else None."""
        if self.rpm is None:
            return None
        rate = self.rpm / 60.0
        cap = max(1.0, rate)
        now = time.monotonic()
        self.level = min(cap, self.level + (now - self.last) * rate)
        self.last = now
        if self.level >= 1.0:
            self.level -= 1.0
            return None
        return (1.0 - self.level) / rate

    def _should_429(self) -> float | None:
        self.requests += 1
        wait = self._over_rate()
        if wait is not None:
            return max(wait, 0.001)
        if self.fail_every and self.requests % self.fail_every == 0:
            return self.retry_after
        return None

    def repeated(self) -> int:
        """Requests whose content had been seen before (a repeated call)."""
        return sum(n - 1 for n in self.bodies.values())

    # -- running in a thread -------------------------------------------------------------
    def start(self) -> "_Base":
        ready = threading.Event()

        def run() -> None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            app = web.Application(client_max_size=self.client_max_size)
            self.routes(app)
            self.runner = web.AppRunner(app)
            self.loop.run_until_complete(self.runner.setup())
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(self.runner.cleanup())

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        self.base_url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


class StrictOpenAI(_Base):
    """See the module docstring."""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)

    @staticmethod
    def error(status: int, message: str, etype: str = "invalid_request_error", param: str | None = None,
              headers: dict | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": etype, "param": param, "code": None}},
                                 status=status, headers=headers)

    async def chat(self, request: web.Request) -> web.Response:
        if self.key and request.headers.get("Authorization") != f"Bearer {self.key}":
            return self.error(401, "Incorrect API key provided.", "invalid_request_error")
        try:
            body = await request.json()
        except ValueError:
            return self.error(400, "We could not parse the JSON body of your request.")
        return self.respond(body)

    def respond(self, body: dict, limited: bool = True) -> web.Response:
        """The answer to one request body (the online route's, and each line of a batch: limited=False,
        as a batch's requests are not held to the per-minute rate)."""
        unknown = sorted(set(body) - OPENAI_FIELDS)
        if unknown:
            return self.error(400, f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
        if not isinstance(body.get("messages"), list) or not body["messages"] or not body.get("model"):
            return self.error(400, "'messages' and 'model' are required properties")
        for m in body["messages"]:
            if m.get("role") not in ("system", "user", "assistant", "developer", "tool") or not isinstance(m.get("content"), (str, list)):
                return self.error(400, f"Invalid message: {str(m)[:80]}", param="messages")
        top = body.get("top_logprobs")
        if top is not None:
            if not body.get("logprobs"):
                return self.error(400, "'top_logprobs' requires 'logprobs' to be true", param="top_logprobs")
            if not isinstance(top, int) or not 0 <= top <= 20:
                return self.error(400, f"Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got {top} instead.", param="top_logprobs")
        problem = response_format_problem(body)
        if problem is not None:
            return self.error(400, problem, param="response_format")
        bias = body.get("logit_bias") or {}
        for k, v in bias.items():
            if not str(k).isdigit() or not -100 <= v <= 100:
                return self.error(400, f"Invalid 'logit_bias': {k}: {v}", param="logit_bias")
        prompt = sum(_tokens(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]))
                     for m in body["messages"])
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if self.context is not None and prompt + max_tokens > self.context:
            return web.json_response({"error": {
                "message": f"This model's maximum context length is {self.context} tokens. However, you requested "
                           f"{prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in the completion). "
                           "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}, status=400)
        wait = self._should_429() if limited else None
        if wait is not None:
            self.refused_429 += 1
            return self.error(429, "Rate limit reached for requests", "requests", headers={"Retry-After": f"{wait:.3f}"})
        self.bodies[json.dumps({k: body[k] for k in sorted(body)}, sort_keys=True)] += 1
        self.ok += 1
        self.times.append(time.monotonic())
        forced = [DIGIT_IDS[int(k)] for k, v in bias.items() if v >= 100 and int(k) in DIGIT_IDS]
        text = reply_for(body["messages"], max_tokens)
        if forced:
            text = forced[_digest(body["messages"]) % len(forced)]
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        if schema is not None:  # structured outputs: an object of the schema's keys, a digit each
            text = json.dumps({k: _digest([body["messages"], k]) % 5 for k in schema.get("properties", {})})
        choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                  "finish_reason": "stop", "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(text, top or 0, forced), "refusal": None}
        return web.json_response({
            "id": f"chatcmpl-{self.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"], "choices": [choice], "system_fingerprint": "fp_standin",
            "usage": {"prompt_tokens": prompt, "completion_tokens": _tokens(text), "total_tokens": prompt + _tokens(text)}})

    @staticmethod
    def _logprobs(text: str, top: int, forced: list[str]) -> list[dict]:
        """OpenAI's shape: one entry per generated token with its top alternatives."""
        if text.startswith("{"):  # a JSON answer: each digit its own token, as OpenAI's encodings split them
            toks = [t for t in re.split(r"(\d)", text) if t]
        else:
            toks = [p if i == 0 else " " + p for i, p in enumerate([text] if len(text) == 1 else text.split(" ")[:8])]
        out = []
        for tok in toks:
            alts = [tok]
            if tok.strip().isdigit():  # a score: the other digits near it, then unrelated tokens
                alts += [str(d) for d in sorted(range(5), key=lambda d: abs(d - int(tok.strip()))) if str(d) != tok.strip()]
            alts += ["The", " I", "Score", ":", "\n", " the", "A", "It", "5", "6", "7", "8", "9", "10", "Based", " score",
                     "**", "-", " a"]
            alts = list(dict.fromkeys(alts))[:max(top, 1)]
            entries = [{"token": a, "logprob": -0.05 if j == 0 else -1.0 - j * 0.7 + (0.5 if a.strip().isdigit() else 0.0),
                        "bytes": list(a.encode())} for j, a in enumerate(alts)]
            out.append({"token": tok, "logprob": entries[0]["logprob"], "bytes": list(tok.encode()),
                        "top_logprobs": entries[:top]})
        return out


def response_format_problem(body: dict) -> str | None:
    """OpenAI's answer to a response_format it refuses (None: accepted): json_schema needs a name and a schema,
    strict mode an object schema whose every object requires all its properties and allows no others, and
    the model must take it (gpt-4, gpt-3.5-turbo and gpt-4-turbo do not)."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return "Invalid value for 'response_format.type'"
    if fmt["type"] != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", str(spec.get("name", ""))):
        return "Missing required parameter: 'response_format.json_schema.name'."
    if str(body.get("model", "")).startswith(("gpt-4-", "gpt-3.5")) or body.get("model") == "gpt-4":
        return "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f"Invalid schema for response_format '{spec.get('name')}': schema must be a JSON Schema of 'type: \"object\"'"
    if spec.get("strict"):
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return (f"Invalid schema for response_format '{spec['name']}': In context=(), 'additionalProperties' is "
                    "required to be supplied and to be false.")
        if sorted(schema.get("required") or []) != sorted(props):
            return (f"Invalid schema for response_format '{spec['name']}': In context=(), 'required' is required to "
                    "be supplied and to be an array including every key in properties.")
    return None


class StrictAnthropic(_Base):
    """See the module docstring."""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.messages)

    @staticmethod
    def error(status: int, etype: str, message: str, headers: dict | None = None) -> web.Response:
        return web.json_response({"type": "error", "error": {"type": etype, "message": message}}, status=status,
                                 headers=headers)

    async def messages(self, request: web.Request) -> web.Response:
        if self.key and request.headers.get("x-api-key") != self.key:
            return self.error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return self.error(400, "invalid_request_error", "anthropic-version: header is required")
        return self.respond(await request.json())

    def respond(self, body: dict, limited: bool = True) -> web.Response:
        """The answer to one Messages body (the online route's, and each request of a batch: limited=False)."""
        unknown = sorted(set(body) - ANTHROPIC_FIELDS)
        if unknown:
            return self.error(400, "invalid_request_error", f"{unknown[0]}: Extra inputs are not permitted")
        if "max_tokens" not in body or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self.error(400, "invalid_request_error", "max_tokens: Field required")
        roles = [m.get("role") for m in body["messages"]]
        if any(r not in ("user", "assistant") for r in roles) or roles[0] != "user":
            return self.error(400, "invalid_request_error", f"messages: roles must alternate from user, got {roles}")
        if "temperature" in body and not 0 <= body["temperature"] <= 1:
            return self.error(400, "invalid_request_error", "temperature: must be between 0 and 1")
        prompt = sum(_tokens(json.dumps(m["content"])) for m in body["messages"]) + _tokens(json.dumps(body.get("system", "")))
        if self.context is not None and prompt + int(body["max_tokens"]) > self.context:
            return self.error(400, "invalid_request_error",
                              f"prompt is too long: {prompt} tokens > {self.context - int(body['max_tokens'])} maximum")
        wait = self._should_429() if limited else None
        if wait is not None:
            self.refused_429 += 1
            return self.error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                              headers={"retry-after": str(max(1, math.ceil(wait)) if wait >= 1 else wait)})
        self.bodies[json.dumps(body, sort_keys=True)] += 1
        self.ok += 1
        self.times.append(time.monotonic())
        text = reply_for(body["messages"], int(body["max_tokens"]))
        return web.json_response({
            "id": f"msg_{self.requests:024d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": _tokens(text)}})


@contextlib.contextmanager
def openai_standin(monkeypatch, key: str = "sk-local"):
    """A StrictOpenAI that OPENAI_BASE_URL and OPENAI_API_KEY point at (what a user would export)."""
    srv = StrictOpenAI(key=key).start()
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    try:
        yield srv
    finally:
        srv.stop()
