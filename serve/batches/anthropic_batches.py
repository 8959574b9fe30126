"""Anthropic's Message Batches over its own REST API (httpx): LiteLLM 1.110 only retrieves Anthropic
batches, it cannot make one. For `litellm/anthropic/<model>` judges.

Each request's `params` are the body LiteLLM's Anthropic transformation makes of the call (what the
online `litellm/anthropic/` backend sends). A batch carries no metadata, so the record saves when its
create started; after a crash or a timed-out create, `find` takes the batch of the same size made
since then that no other record holds, and its results confirm it (every custom_id starts with the
record's name: sim/batching drops a batch whose results are not its own and sends its requests again).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from typing import Any, Callable, Iterator

from esc_eval.serve.batches.transport import BatchLimits, BatchTransport, BatchView, LineOutcome, line_error
from esc_eval.serve.calls.retry import retry_wait
from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, ChatResult, GenerationParams, RunStopError

DEFAULT_API_BASE = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
FIND_SLACK_S = 600  # clocks differ: a batch made up to this long before the record's start still counts
# Anthropic's error types as the HTTP statuses the online path would have seen
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                "overloaded_error": 529}
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _when(stamp: str | None) -> float | None:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


class AnthropicBatches(BatchTransport):
    """See the module docstring."""

    provider = "anthropic"
    default_limits = BatchLimits(max_requests=100_000, max_bytes=256 * 2**20)  # Anthropic's Message Batches limits

    def __init__(self, model: str, *, api_base: str | None = None, api_key_env: str | None = None):
        super().__init__(model)
        self.api_base = (api_base or os.environ.get("ANTHROPIC_API_BASE") or os.environ.get("ANTHROPIC_BASE_URL")
                         or DEFAULT_API_BASE).rstrip("/")
        self.api_key_env = api_key_env or "ANTHROPIC_API_KEY"

    def identity(self) -> dict[str, Any]:
        return {"batch": self.provider, "api_base": self.api_base, "model": self.model}

    def request_line(self, custom_id: str, messages: list[ChatMessage], params: GenerationParams,
                     adapter: str | None = None) -> dict[str, Any]:
        from esc_eval.serve.backends.litellm_api import _litellm

        if adapter:
            raise ChatModelError(f"anthropic/{self.model}: LoRA adapters are not available", kind="fatal")
        _litellm()  # LiteLLM offline (its price list from the wheel)
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        config = AnthropicConfig()
        openai_params: dict[str, Any] = {"temperature": params.temperature, "max_tokens": params.max_tokens}
        if params.top_p != 1.0:
            openai_params["top_p"] = params.top_p
        if params.stop:
            openai_params["stop"] = list(params.stop)
        mapped = config.map_openai_params(openai_params, {}, self.model, drop_params=False)
        body = config.transform_request(self.model, [{"role": m.role, "content": m.content} for m in messages], mapped,
                                        {}, {})
        return {"custom_id": custom_id, "params": body}

    def payload(self, lines: list[bytes]) -> bytes:
        return b'{"requests":[' + b",".join(lines) + b"]}"

    def overhead(self, n_lines: int) -> int:
        return len(b'{"requests":[]}') + max(0, n_lines - 1)

    # -- HTTP ------------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {"x-api-key": os.environ.get(self.api_key_env) or "", "anthropic-version": API_VERSION,
                "content-type": "application/json"}

    def _http(self, method: str, url: str, content: bytes | None = None, params: dict | None = None):
        import httpx

        try:
            resp = httpx.request(method, url if url.startswith("http") else self.api_base + url, content=content,
                                 params=params, headers=self._headers(), timeout=httpx.Timeout(600.0, connect=10.0))
        except httpx.TimeoutException as exc:
            raise ChatModelError(f"timeout: {exc}", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise ChatModelError(f"cannot reach {self.api_base}: {type(exc).__name__}: {exc}", kind="transient") from exc
        if resp.status_code == 200:
            return resp
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:300]
        from esc_eval.serve.backends.openai_http import parse_retry_after

        status = resp.status_code
        kind = "rate_limit" if status == 429 else "transient" if status >= 500 or status in (408, 409) else "fatal"
        err = ChatModelError(f"HTTP {status}: {message}", kind=kind,
                             retry_after=parse_retry_after(resp.headers.get("retry-after")))
        err.status_code = status  # a 404 tells control() the provider no longer has the batch
        raise err

    def submit(self, name: str, payload: bytes | None, n_requests: int, record: dict[str, Any],
               save: Callable[..., None], taken: set[str]) -> str | None:
        """See BatchTransport.submit. Without the payload (a record left by a crash) only a batch an
        earlier attempt made is found (None: there is none)."""
        failures = 0
        while True:
            if record.get("create_started_at"):  # an earlier attempt may have made it
                found = self.find(n_requests, record["create_started_at"], taken)
                if found is not None:
                    save(found=True)
                    return found
            if payload is None:
                return None
            save(create_started_at=time.time())
            try:
                return self._http("POST", "/v1/messages/batches", content=payload).json()["id"]
            except ChatModelError as err:
                failures += 1
                if err.kind == "fatal" or failures >= self.policy.max_attempts:
                    raise RunStopError(f"anthropic batch API, create: {str(err).splitlines()[0][:300]}",
                                       model=self.model) from err
                time.sleep(retry_wait(err, failures, self.policy))

    def find(self, n_requests: int, since: float, taken: set[str]) -> str | None:
        """The oldest batch of `n_requests` made since `since` that no other record holds."""
        after, found = None, None
        while True:
            page = self.control("list batches", lambda: self._http(
                "GET", "/v1/messages/batches", params={"limit": 100, **({"after_id": after} if after else {})}).json())
            for b in page.get("data") or []:
                made = _when(b.get("created_at")) or 0
                if made < since - FIND_SLACK_S:
                    return found
                if b["id"] not in taken and sum((b.get("request_counts") or {}).values()) == n_requests:
                    found = b["id"]  # newest first: the last one seen is the oldest
            if not page.get("has_more") or not page.get("data"):
                return found
            after = page["last_id"]

    def retrieve(self, batch_id: str) -> BatchView:
        b = self.control(f"retrieve {batch_id}", lambda: self._http("GET", f"/v1/messages/batches/{batch_id}").json(),
                         missing=None)
        if b is None:
            return BatchView.not_found(batch_id)
        c = b.get("request_counts") or {}
        return BatchView(batch_id=b["id"], status=b["processing_status"], ended=b["processing_status"] == "ended",
                         total=sum(c.values()), succeeded=c.get("succeeded", 0),
                         failed=c.get("errored", 0) + c.get("canceled", 0) + c.get("expired", 0),
                         results=[b["results_url"]] if b.get("results_url") else [])

    def results(self, view: BatchView) -> bytes:
        return b"".join(self.control("download results", lambda url=url: self._http("GET", url).content)
                        for url in view.results)

    def read_results(self, data: bytes) -> Iterator[LineOutcome]:
        for raw in data.splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            cid, result = line.get("custom_id"), line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                yield LineOutcome(cid, result=self._message(result.get("message") or {}))
            elif kind == "errored":
                err = (result.get("error") or {}).get("error") or result.get("error") or {}
                yield LineOutcome(cid, error=line_error(ERROR_STATUS.get(err.get("type"), 500),
                                                        err.get("message") or json.dumps(err)[:300]))
            else:  # canceled, expired
                yield LineOutcome(cid, error=line_error(None, f"the request was {kind} before it ran", kind))

    @staticmethod
    def _message(m: dict[str, Any]) -> ChatResult:
        usage = m.get("usage") or {}
        text = "".join(b.get("text", "") for b in m.get("content") or [] if b.get("type") == "text")
        return ChatResult(text=text, prompt_tokens=int(usage.get("input_tokens") or 0),
                          completion_tokens=int(usage.get("output_tokens") or 0),
                          finish_reason=FINISH.get(m.get("stop_reason"), "stop"), model=m.get("model", ""))

    def cancel(self, batch_id: str) -> None:
        self.control(f"cancel {batch_id}", lambda: self._http("POST", f"/v1/messages/batches/{batch_id}/cancel"))
