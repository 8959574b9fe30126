"""One interface over the providers' batch APIs (picked for a judge's spec by providers.py).

A batch is a file of requests (OpenAI: JSONL lines uploaded to the Files API; Anthropic: one JSON body
of requests), each with a `custom_id`; the provider answers them within 24 hours, at half the online
price, in a results file whose lines say, per custom_id, the answer or why there is none. What a
transport does:
  request_line   one request as its batch line (the body the online backend would send)
  submit         make the batch, saving each step as it goes (`save`), and on a retry or after a
                 crash first look for the batch an earlier attempt made, so no batch is made twice
                 for one record
  retrieve       the batch as it stands (BatchView)
  results        its results file(s), as bytes; read_results turns them into a ChatResult or a
                 ChatModelError per custom_id, classified as the online backends classify (429 and
                 5xx retried, a prompt over the context a ContextOverflowError, other 4xx fatal,
                 expired and cancelled requests retried)
  cancel         stop it (what it answered stays in its results)

Control calls (upload, create, retrieve, download) are retried with the one policy's waits
(serve/calls/retry.py); a refusal that no retry mends (a key refused, a request the API rejects)
stops the run in one line (RunStopError).
"""
from __future__ import annotations

import abc
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator

from esc_eval.serve.calls.retry import RetryPolicy, retry_wait, should_retry
from esc_eval.serve.chat.interface import (ChatMessage, ChatModelError, ChatResult, ContextOverflowError,
                                           GenerationParams, RunStopError)

log = logging.getLogger("esc_eval.serve.batches")

_RAISE = object()  # control(): a 404 stops the run like any other refusal
CONTROL_ATTEMPTS = 6  # tries of one control call (upload, create, retrieve, download) before the run stops
CONTEXT_PHRASES = ("maximum context length", "context_length_exceeded", "prompt is too long")


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold."""

    max_requests: int
    max_bytes: int


@dataclass
class BatchView:
    """A batch as the provider reports it."""

    @classmethod
    def not_found(cls, batch_id: str) -> "BatchView":
        return cls(batch_id=batch_id, status="not_found", ended=True, error="the provider no longer has this batch")

    batch_id: str
    status: str  # the provider's own word (validating, in_progress, completed, expired, ended, ...)
    ended: bool  # no request of it will be answered any more
    total: int = 0
    succeeded: int = 0
    failed: int = 0  # failed, errored, expired or cancelled requests (known so far)
    error: str | None = None  # why the whole batch failed (its file refused), if it did
    results: list[str] = field(default_factory=list)  # where its results are (file ids, a URL)


@dataclass
class LineOutcome:
    """One request's fate inside a batch: its answer, or the error it would have raised online."""

    custom_id: str
    result: ChatResult | None = None
    error: ChatModelError | None = None


def line_error(status: int | None, message: str, code: str | None = None) -> ChatModelError:
    """A request's failure inside a batch, classified as the online backends classify it."""
    text = f"HTTP {status}: {message}" if status else f"{code}: {message}" if code else message
    if status == 400 and any(p in message.lower() for p in CONTEXT_PHRASES):
        return ContextOverflowError(text)
    if status == 429:
        return ChatModelError(text, kind="rate_limit")
    if status is None or status >= 500 or status in (408, 409):
        return ChatModelError(text, kind="transient")  # expired, cancelled, timed out, a server error
    return ChatModelError(text, kind="fatal")


class BatchTransport(abc.ABC):
    """A provider's batch API (see the module docstring)."""

    provider: ClassVar[str]  # "openai" | "anthropic"
    default_limits: ClassVar[BatchLimits]

    def __init__(self, model: str, policy: RetryPolicy | None = None):
        self.model = model
        self.policy = policy or RetryPolicy(max_attempts=CONTROL_ATTEMPTS, initial_wait_s=1.0, max_wait_s=60.0)

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """What a request's key names besides its messages and params (provider, endpoint, model)."""

    @abc.abstractmethod
    def request_line(self, custom_id: str, messages: list[ChatMessage], params: GenerationParams,
                     adapter: str | None = None) -> dict[str, Any]:
        """One request as its batch line."""

    @abc.abstractmethod
    def payload(self, lines: list[bytes]) -> bytes:
        """The batch's file or body from its lines (each line as json.dumps gives it, UTF-8)."""

    def overhead(self, n_lines: int) -> int:
        """Bytes the payload adds to its lines'."""
        return n_lines

    @abc.abstractmethod
    def submit(self, name: str, payload: bytes | None, n_requests: int, record: dict[str, Any],
               save: Callable[..., None], taken: set[str]) -> str | None:
        """Make the batch `name` (or find the one an earlier attempt made: `save(found=True)`); returns
        its id. `record`: what earlier attempts saved; `save(**fields)`: keep a step durably (and in
        `record`) before the next; `taken`: batch ids other records already hold. payload None (a
        record a crash left): only recover what an earlier attempt made (None: nothing)."""

    @abc.abstractmethod
    def retrieve(self, batch_id: str) -> BatchView:
        """The batch as it stands; one the provider no longer has (HTTP 404) is ended, status `not_found`
        (its requests failed: they go out again)."""

    @abc.abstractmethod
    def results(self, view: BatchView) -> bytes:
        """Its results file(s) as one JSONL."""

    @abc.abstractmethod
    def read_results(self, data: bytes) -> Iterator[LineOutcome]:
        """Each result line's request: its answer or its error."""

    @abc.abstractmethod
    def cancel(self, batch_id: str) -> None:
        """Stop it (what it answered stays in its results)."""

    # -- control calls -------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> ChatModelError:
        """A control call's exception as the retry policy reads it."""
        return exc if isinstance(exc, ChatModelError) else ChatModelError(f"{type(exc).__name__}: {exc}")

    def control(self, what: str, fn: Callable[[], Any], sleep: Callable[[float], None] = time.sleep,
                missing: Any = _RAISE) -> Any:
        """`fn()` with the policy's retries; the last failure, or one no retry mends, stops the run.
        `missing`: what an HTTP 404 returns (the provider no longer has it), instead of stopping."""
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                return fn()
            except RunStopError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified just below
                if missing is not _RAISE and getattr(exc, "status_code", None) == 404:
                    return missing
                err = self.classify(exc)
                if not should_retry(err) or attempt == self.policy.max_attempts:
                    raise RunStopError(f"{self.provider} batch API, {what}: {str(err).splitlines()[0][:300]}",
                                       model=self.model) from exc
                wait = retry_wait(err, attempt, self.policy)
                log.warning("%s batch API, %s: attempt %d of %d failed: %s; retrying in %.1f s", self.provider, what,
                            attempt, self.policy.max_attempts, str(err).splitlines()[0][:200], wait)
                sleep(wait)
        raise AssertionError("unreachable")
