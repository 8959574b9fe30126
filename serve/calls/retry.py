"""The one retry policy for model calls.

Backends only classify what went wrong (`ChatModelError.kind`: rate_limit, with the server's
Retry-After when it gave one; transient; timeout; fatal), as inspect_ai's `should_retry` does.
`RetryingChatModel`, wrapped around any backend by the jobs that call models (simulation,
scoring, card building), owns the per-call timeout, the attempts, exponential jittered backoff and
Retry-After, and logs "attempt N of M failed: <error>; retrying in S s". Nothing else retries, so
attempts never multiply. A `CallGate` (serve/calls/limits.py), when given, is passed by every attempt:
the model's limits for the whole run and the spend cap, outside the attempt's timeout.
"""
from __future__ import annotations

import asyncio
import logging
import random

from pydantic import Field

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult, GenerationParams, WrapperChatModel
from esc_eval.serve.config.base import ConfigModel
from esc_eval.serve.calls.deadlines import call_timeout

log = logging.getLogger("esc_eval.retry")


# Every job's retry defaults (RetryPolicy, ExecutionConfig and the card builder read these):
MAX_ATTEMPTS = 3  # two retries ride out a transient error; a third failure is kept as the item's row
INITIAL_WAIT_S = 0.5  # first backoff, doubled (jittered) at each attempt
MAX_WAIT_S = 30.0  # the cap on that doubling
CALL_TIMEOUT_S = 600.0  # one attempt: generous for a long reply from a busy engine, and a hung call still ends


class RetryPolicy(ConfigModel):
    """How model calls are retried (one policy for every backend and job)."""

    max_attempts: int = Field(MAX_ATTEMPTS, ge=1, description="Attempts per model call before the call fails.")
    initial_wait_s: float = Field(INITIAL_WAIT_S, ge=0, description="First backoff wait between attempts (doubles each time, jittered).")
    max_wait_s: float = Field(MAX_WAIT_S, ge=0, description="Longest backoff wait between attempts.")
    max_retry_after_s: float = Field(120.0, ge=0, description="Longest wait honoured from a server's Retry-After.")
    timeout_s: float | None = Field(CALL_TIMEOUT_S, gt=0, description="Timeout of one attempt (None: none); a timeout counts as a failed attempt.")


def should_retry(exc: BaseException) -> bool:
    """Rate limits, transient errors and timeouts are retried; fatal errors (bad request, unknown
    model or adapter, missing key) are not; a connection-level OSError counts as transient."""
    if isinstance(exc, ChatModelError):
        return exc.kind != "fatal"
    return isinstance(exc, (asyncio.TimeoutError, ConnectionError, OSError))


def retry_wait(exc: BaseException, attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): the server's Retry-After
    when it gave one (capped), else exponential backoff with jitter (capped)."""
    after = getattr(exc, "retry_after", None)
    if after is not None:
        return min(float(after), policy.max_retry_after_s)
    backoff = min(policy.initial_wait_s * 2 ** (attempt - 1), policy.max_wait_s)
    return min(backoff + random.uniform(0, policy.initial_wait_s), policy.max_wait_s)


class RetryingChatModel(WrapperChatModel):
    """`inner` with the retry policy: per-attempt timeout, classified retries, attempts counted on
    the final error (`ChatModelError.attempts`)."""

    def __init__(self, inner: ChatModel, policy: RetryPolicy | None = None, gate=None, **overrides):
        super().__init__(inner)
        self.policy = (policy or RetryPolicy()).model_copy(update=overrides) if overrides else (policy or RetryPolicy())
        self.gate = gate  # serve.calls.limits.CallGate or None

    async def _once(self, messages, params, adapter, session_id) -> ChatResult:
        if self.gate is None:
            return await self._attempt(messages, params, adapter, session_id)
        ticket = await self.gate.before(messages, params)  # may wait for a permit, or refuse (budget)
        try:
            result = await self._attempt(messages, params, adapter, session_id)
        except BaseException as e:
            await self.gate.after(ticket, exc=e)
            raise
        await self.gate.after(ticket, result=result)
        return result

    async def _attempt(self, messages, params, adapter, session_id) -> ChatResult:
        coro = self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        timeout = self.policy.timeout_s
        if timeout is None:
            return await coro
        try:
            # Not wait_for (a new task per call) nor asyncio.timeout (a timer per call): calls/s matter.
            async with call_timeout(timeout):
                return await coro
        except TimeoutError:
            raise ChatModelError(f"{self.name}: no answer within {timeout:g} s", kind="timeout") from None

    def _log(self, exc: BaseException, attempt: int, wait: float) -> None:
        log.warning("%s: attempt %d of %d failed: %s; retrying in %.2f s", self.name, attempt,
                    self.policy.max_attempts, exc, wait)

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter=None, session_id=None) -> ChatResult:
        policy = self.policy
        try:  # fast path: most calls succeed at once, and building a retry loop per call costs
            if self.gate is None:  # one coroutine less per call where nothing gates the model
                return await self._attempt(messages, params, adapter, session_id)
            return await self._once(messages, params, adapter, session_id)
        except Exception as e:  # noqa: BLE001 - classified here, re-raised when final
            if not should_retry(e) or policy.max_attempts <= 1:
                if isinstance(e, ChatModelError):
                    e.attempts = 1
                raise
            first = e
        from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt  # not per call: retries only

        wait = retry_wait(first, 1, policy)
        self._log(first, 1, wait)
        await asyncio.sleep(wait)

        def next_wait(rs: RetryCallState) -> float:  # rs counts the retries after the first attempt
            return retry_wait(rs.outcome.exception(), rs.attempt_number + 1, policy)

        def before_sleep(rs: RetryCallState) -> None:
            self._log(rs.outcome.exception(), rs.attempt_number + 1, rs.next_action.sleep if rs.next_action else 0.0)

        attempt_no = 1
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(policy.max_attempts - 1), wait=next_wait,
                                               retry=retry_if_exception(should_retry), before_sleep=before_sleep,
                                               reraise=True):
                with attempt:
                    attempt_no = attempt.retry_state.attempt_number + 1
                    result = await self._once(messages, params, adapter, session_id)
                    result.attempts = attempt_no
                    return result
        except ChatModelError as e:
            e.attempts = attempt_no
            raise
        raise AssertionError("unreachable")  # pragma: no cover
