"""The measuring client of `esc-eval bench serve`: streamed OpenAI chat completions over httpx.

One request = one `RequestRecord`, timed the way vLLM's `vllm bench serve` (openai-chat backend)
times it, so the two agree on the same endpoint:
  ttft     send -> the first SSE chunk that carries `choices` (vLLM's server sends its first
           chunk with the first token)
  itl      the gaps between later chunks that carry `choices`
  latency  send -> the last chunk that carries `choices` (the trailing usage chunk has no token)
  tokens   prompt and completion tokens from the usage chunk (`stream_options.include_usage`)
A failed request is a record with `success=False` and its reason, never an exception the load
loop has to survive.

`MeasuredModel` is the same client behind the chat-model seam (`ChatModel.chat`), so the
simulation's own dialogue and judge code (sim/dialogue/dialogue.py, sim/jobs/scoring.py) drives the load
unchanged: one instance per workload unit, numbering that unit's requests (`turn`).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult, GenerationParams, as_messages
from esc_eval.serve.backends.openai_http import API_KEY_ENV, SESSION_HEADER, build_request_body


class BenchInputError(ValueError):
    """Bad benchmark input (endpoint down, model not served, bad SLO...): one line, before any load."""


@dataclass
class RequestRecord:
    """One measured request (times in seconds; start_time on time.perf_counter's clock)."""

    unit: str
    turn: int
    start_time: float = 0.0
    success: bool = False
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Recorder:
    """Every request record of a run, in completion order (what a Ctrl-C still reports)."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)


def _httpx():
    import httpx  # a core dependency; imported here so importing this module stays cheap

    return httpx


class StreamingClient:
    """Streams chat completions from one OpenAI-compatible endpoint and times them."""

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 600.0, api_key_env: str = API_KEY_ENV,
                 session_header: bool = True, ignore_eos: bool = False, fixed_session: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.api_key_env = api_key_env
        self.session_header = session_header
        self.ignore_eos = ignore_eos
        self.fixed_session = fixed_session  # one id for every request: a sticky router pins the run to one replica
        self._client = None

    def _headers(self, session_id: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        session_id = self.fixed_session or session_id
        if session_id and self.session_header:
            headers[SESSION_HEADER] = session_id
        return headers

    def body(self, messages, params: GenerationParams) -> dict[str, Any]:
        body = build_request_body(self.model, as_messages(messages), params)
        body.update(stream=True, stream_options={"include_usage": True})
        if self.ignore_eos:
            body["ignore_eos"] = True  # vLLM's extension: every request decodes max_tokens
        return body

    async def request(self, messages, params: GenerationParams, *, unit: str, turn: int,
                      session_id: str | None = None) -> tuple[RequestRecord, ChatResult]:
        """Send one streamed request; the record says how it went (the result is empty on failure)."""
        httpx = _httpx()
        if self._client is None:
            # No pool limit: the load shape, not the connection pool, decides what is in flight.
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))
        rec = RequestRecord(unit=unit, turn=turn)
        text: list[str] = []
        top: list[dict[str, float]] = []
        finish = "stop"
        rec.start_time = last = time.perf_counter()
        try:
            async with self._client.stream("POST", "/chat/completions", json=self.body(messages, params),
                                           headers=self._headers(session_id)) as resp:
                if resp.status_code != 200:
                    detail = (await resp.aread()).decode("utf-8", "replace")[:300]
                    rec.error = f"HTTP {resp.status_code}: {' '.join(detail.split())}"
                    return rec, ChatResult(text="", finish_reason="error")
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators and SSE comments (pings)
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    now = time.perf_counter()
                    data = json.loads(payload)
                    if data.get("error"):
                        err = data["error"]
                        rec.error = "stream error: " + str(err.get("message", err) if isinstance(err, dict) else err)[:300]
                        return rec, ChatResult(text="", finish_reason="error")
                    if choices := data.get("choices"):
                        if not rec.success:
                            rec.success, rec.ttft = True, now - rec.start_time
                        else:
                            rec.itl.append(now - last)
                        last = now
                        choice = choices[0]
                        text.append((choice.get("delta") or {}).get("content") or "")
                        finish = choice.get("finish_reason") or finish
                        for tok in ((choice.get("logprobs") or {}).get("content") or []):
                            top.append({c["token"]: float(c["logprob"]) for c in tok.get("top_logprobs") or []})
                    if usage := data.get("usage"):
                        rec.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                        rec.output_tokens = int(usage.get("completion_tokens") or 0)
        except httpx.TimeoutException as exc:
            rec.success, rec.error = False, f"timeout after {self.timeout_s:g} s ({type(exc).__name__})"
        except httpx.TransportError as exc:
            rec.success, rec.error = False, f"connection: {type(exc).__name__}: {exc}"
        except (ValueError, KeyError, TypeError) as exc:  # a chunk that is not the OpenAI stream format
            rec.success, rec.error = False, f"malformed stream: {type(exc).__name__}: {exc}"
        if not rec.success:
            rec.error = rec.error or "no token streamed"
            return rec, ChatResult(text="", finish_reason="error")
        rec.latency = last - rec.start_time
        if not rec.output_tokens:  # an endpoint without usage in streams: one chunk per token
            rec.output_tokens = len(rec.itl) + 1
        return rec, ChatResult(text="".join(text), prompt_tokens=rec.prompt_tokens, completion_tokens=rec.output_tokens,
                               finish_reason=finish, latency_s=rec.latency, top_logprobs=top, model=self.model)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class MeasuredModel(ChatModel):
    """One workload unit's view of the endpoint under test: every call is streamed, timed and
    recorded; a failed call raises ChatModelError (the unit stops, as a dialogue would)."""

    def __init__(self, client: StreamingClient, recorder: Recorder, unit: str):
        self.client, self.recorder, self.unit = client, recorder, unit
        self.name = client.model
        self.calls = 0
        self.failures: list[str] = []

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        if adapter:
            raise ChatModelError("bench serve measures one served model; LoRA adapters are not supported", kind="fatal")
        turn, self.calls = self.calls, self.calls + 1
        record, result = await self.client.request(messages, params or GenerationParams(), unit=self.unit, turn=turn,
                                                   session_id=session_id or self.unit)
        self.recorder.add(record)
        if not record.success:
            self.failures.append(record.error)
            raise ChatModelError(record.error, kind="fatal")
        return result


def check_endpoint(base_url: str, model: str, *, what: str = "--base-url", timeout_s: float = 10.0) -> list[str]:
    """The models `base_url` serves; BenchInputError (one line) if it is down or lacks `model`."""
    httpx = _httpx()
    url = base_url.rstrip("/") + "/models"
    headers = {}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        resp = httpx.get(url, timeout=timeout_s, headers=headers)
    except httpx.HTTPError as exc:
        raise BenchInputError(f"{what} {base_url}: endpoint not reachable ({type(exc).__name__}: {exc})") from None
    if resp.status_code != 200:
        raise BenchInputError(f"{what} {base_url}: GET /models answered HTTP {resp.status_code} (not an OpenAI-compatible endpoint?)")
    try:
        served = [m["id"] for m in resp.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise BenchInputError(f"{what} {base_url}: GET /models did not return an OpenAI model list") from None
    if model not in served:
        raise BenchInputError(f"{what} {base_url} does not serve model {model!r} (it serves: {', '.join(served) or 'nothing'})")
    return served
