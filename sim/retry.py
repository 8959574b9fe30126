"""Retries of model calls, owned by the batch layer: a ChatModel decorator with timeouts and
classified retries (rate_limit / transient / timeout retry with jittered backoff; fatal does not).
"""
from __future__ import annotations

import asyncio
import logging

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from esc_eval.serve.chat import ChatModel, ChatModelError, ChatResult, GenerationParams
from esc_eval.sim.deadlines import call_timeout

log = logging.getLogger("esc_eval.retry")


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ChatModelError):
        # a backend that gave up after its own retries is not retried again (no attempts x attempts)
        return exc.kind != "fatal" and not exc.exhausted
    return isinstance(exc, (asyncio.TimeoutError, ConnectionError, OSError))


class RetryingChatModel(ChatModel):
    def __init__(self, inner: ChatModel, *, max_attempts: int = 3, initial_wait_s: float = 0.5,
                 max_wait_s: float = 30.0, timeout_s: float | None = 600.0):
        self.inner = inner
        self.name = inner.name
        self.max_attempts = max_attempts
        self.initial_wait_s = initial_wait_s
        self.max_wait_s = max_wait_s
        self.timeout_s = timeout_s

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: attempt %d of %d failed: %s; retrying in %.1f s",
                    self.name, state.attempt_number + 1, self.max_attempts, exc, wait)

    async def _once(self, messages, params, adapter, session_id) -> ChatResult:
        coro = self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        if self.timeout_s is None:
            return await coro
        try:
            # Not wait_for (a new task per call) nor asyncio.timeout (a timer per call): calls/s matter.
            async with call_timeout(self.timeout_s):
                return await coro
        except TimeoutError:
            raise ChatModelError(f"{self.name}: no answer within {self.timeout_s:g} s", kind="timeout") from None

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter=None, session_id=None) -> ChatResult:
        try:  # fast path: most calls succeed at once, and building a retry loop per call costs
            return await self._once(messages, params, adapter, session_id)
        except Exception as e:  # noqa: BLE001
            if not is_retryable(e) or self.max_attempts <= 1:
                raise
            first = e
        log.warning("%s: attempt 1 of %d failed: %s; retrying in %.1f s", self.name, self.max_attempts, first,
                    self.initial_wait_s)
        await asyncio.sleep(self.initial_wait_s)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts - 1),
            wait=wait_exponential_jitter(multiplier=self.initial_wait_s, max=self.max_wait_s, jitter=self.initial_wait_s),
            retry=retry_if_exception(is_retryable),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._once(messages, params, adapter, session_id)
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        await self.inner.close()
