"""OpenAI's Batch API through LiteLLM's batch support (litellm.create_file, create_batch, retrieve_batch,
list_batches, file_list, file_content, cancel_batch: its `openai` provider), for `openai/<model>` and
`litellm/openai/<model>` judges.

The input file is uploaded as `esc-eval-<name>.jsonl` and the batch made with metadata
`esc_eval_batch: <name>`; the record keeps the file id before the batch is made. After a crash or a
timed-out create, `find` looks through the batches for one made from that file or carrying that
name before making another (or makes it from the uploaded file). LiteLLM's own retries are off
(`max_retries=0`): an SDK retry of a create could make a second batch.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterator

from esc_eval.serve.backends.openai_http import (DEFAULT_BASE_URL, adapter_model_name, build_request_body,
                                                 openai_label_token_ids, parse_response, structured_mode)
from esc_eval.serve.batches.transport import BatchLimits, BatchTransport, BatchView, LineOutcome, line_error
from esc_eval.serve.calls.retry import retry_wait
from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, GenerationParams, RunStopError

ENDPOINT = "/v1/chat/completions"
ENDED = ("completed", "failed", "expired", "cancelled")
META_KEY = "esc_eval_batch"
FIND_PAGES = 20  # pages of 100 batches looked through for one a crashed create made (newest first)


class OpenAIBatches(BatchTransport):
    """See the module docstring."""

    provider = "openai"
    default_limits = BatchLimits(max_requests=50_000, max_bytes=200 * 2**20)  # OpenAI's Batch API limits

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str | None = None,
                 structured: str | None = None, extra_body: dict[str, Any] | None = None, through_litellm: bool = False):
        super().__init__(model)
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        # the body the online backend sends: openai/'s mode, or LiteLLM's (logit_bias where the digits' ids are known)
        if through_litellm:
            self.structured = "logit_bias" if openai_label_token_ids(model, ["0"]) else "none"
        else:
            self.structured = structured_mode(model, "openai", structured)
        self.extra_body = extra_body

    def identity(self) -> dict[str, Any]:
        return {"batch": self.provider, "base_url": self.base_url, "model": self.model, "structured": self.structured,
                "extra_body": self.extra_body}

    def request_line(self, custom_id: str, messages: list[ChatMessage], params: GenerationParams,
                     adapter: str | None = None) -> dict[str, Any]:
        body = build_request_body(adapter_model_name(self.model, adapter), messages, params, structured=self.structured,
                                  extra_body=self.extra_body)
        return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}

    def payload(self, lines: list[bytes]) -> bytes:
        return b"".join(line + b"\n" for line in lines)

    # -- LiteLLM ---------------------------------------------------------------------------------
    def _kw(self) -> dict[str, Any]:
        return {"custom_llm_provider": "openai", "api_base": self.base_url, "api_key": os.environ.get(self.api_key_env),
                "max_retries": 0, "timeout": 600}

    @staticmethod
    def _litellm():
        from esc_eval.serve.backends.litellm_api import _litellm

        return _litellm()

    def classify(self, exc: BaseException) -> ChatModelError:
        from esc_eval.serve.backends.litellm_api import classify

        return exc if isinstance(exc, ChatModelError) else classify(exc)

    def submit(self, name: str, payload: bytes | None, n_requests: int, record: dict[str, Any],
               save: Callable[..., None], taken: set[str]) -> str | None:
        """See BatchTransport.submit. Without the payload (a record left by a crash), the uploaded
        file is enough: the batch is found, or made from it."""
        lit = self._litellm()
        failures = 0
        while True:
            if record.get("create_started"):  # an earlier attempt may have made it
                found = self.find(name, record.get("file_id"), taken)
                if found is not None:
                    save(found=True)
                    return found
            if not record.get("file_id"):
                if payload is None:
                    return None
                save(file_id=self.control("upload", lambda: lit.create_file(
                    file=(f"esc-eval-{name}.jsonl", payload), purpose="batch", **self._kw())).id)
            save(create_started=True)
            try:
                batch = lit.create_batch(completion_window="24h", endpoint=ENDPOINT, input_file_id=record["file_id"],
                                         metadata={META_KEY: name}, **self._kw())
                return batch.id
            except Exception as exc:  # noqa: BLE001 - a refusal stops the run; anything else: look, then try again
                err = self.classify(exc)
                failures += 1
                if err.kind == "fatal" or failures >= self.policy.max_attempts:
                    raise RunStopError(f"openai batch API, create: {str(err).splitlines()[0][:300]}", model=self.model) from exc
                time.sleep(retry_wait(err, failures, self.policy))

    def find(self, name: str, file_id: str | None, taken: set[str]) -> str | None:
        """The batch made from `file_id` or named `name`, if one exists (newest first)."""
        lit, after = self._litellm(), None
        for _ in range(FIND_PAGES):
            page = self.control("list batches", lambda: lit.list_batches(after=after, limit=100, **self._kw()))
            for b in page.data:
                if b.id not in taken and ((file_id and b.input_file_id == file_id)
                                          or (b.metadata or {}).get(META_KEY) == name):
                    return b.id
            if not page.has_more or not page.data:
                return None
            after = page.data[-1].id
        return None

    def retrieve(self, batch_id: str) -> BatchView:
        lit = self._litellm()
        b = self.control(f"retrieve {batch_id}", lambda: lit.retrieve_batch(batch_id=batch_id, **self._kw()),
                         missing=None)
        if b is None:
            return BatchView.not_found(batch_id)
        counts = b.request_counts
        errors = [e.message for e in ((b.errors.data or []) if b.errors else []) if getattr(e, "message", None)]
        return BatchView(batch_id=b.id, status=b.status, ended=b.status in ENDED,
                         total=counts.total if counts else 0, succeeded=counts.completed if counts else 0,
                         failed=counts.failed if counts else 0, error="; ".join(errors)[:500] or None,
                         results=[f for f in (b.output_file_id, b.error_file_id) if f])

    def results(self, view: BatchView) -> bytes:
        lit = self._litellm()
        parts = [self.control(f"download {fid}", lambda fid=fid: lit.file_content(file_id=fid, **self._kw())).content
                 for fid in view.results]
        return b"".join(p if p.endswith(b"\n") or not p else p + b"\n" for p in parts)

    def read_results(self, data: bytes) -> Iterator[LineOutcome]:
        for raw in data.splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            cid, response, error = line.get("custom_id"), line.get("response"), line.get("error")
            if response and response.get("status_code") == 200:
                yield LineOutcome(cid, result=parse_response(response.get("body") or {}, 0.0))
            elif response:
                body = response.get("body") or {}
                message = (body.get("error") or {}).get("message") or json.dumps(body)[:300]
                yield LineOutcome(cid, error=line_error(response.get("status_code"), message))
            else:
                error = error or {}
                yield LineOutcome(cid, error=line_error(None, error.get("message") or "no answer", error.get("code")))

    def cancel(self, batch_id: str) -> None:
        lit = self._litellm()
        self.control(f"cancel {batch_id}", lambda: lit.cancel_batch(batch_id=batch_id, **self._kw()))
