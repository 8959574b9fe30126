import asyncio

import pytest

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult
from esc_eval.serve.calls.retry import RetryingChatModel


class Flaky(ChatModel):
    def __init__(self, kind, failures, hang=False):
        self.kind, self.failures, self.calls, self.hang = kind, failures, 0, hang

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.calls += 1
        if self.hang:
            await asyncio.sleep(10)
        if self.calls <= self.failures:
            raise ChatModelError(f"{self.kind} #{self.calls}", kind=self.kind)
        return ChatResult(text="ok")


def wrap(inner, **kw):
    return RetryingChatModel(inner, max_attempts=3, initial_wait_s=0, max_wait_s=0, **kw)


async def test_transient_and_rate_limit_errors_are_retried():
    for kind in ("transient", "rate_limit"):
        inner = Flaky(kind, failures=2)
        assert (await wrap(inner).chat([])).text == "ok" and inner.calls == 3


async def test_fatal_errors_are_not_retried():
    inner = Flaky("fatal", failures=5)
    with pytest.raises(ChatModelError, match="fatal #1"):
        await wrap(inner).chat([])
    assert inner.calls == 1


async def test_exhausted_attempts_reraise_the_last_error():
    inner = Flaky("transient", failures=10)
    with pytest.raises(ChatModelError, match="transient #3"):
        await wrap(inner).chat([])
    assert inner.calls == 3


async def test_timeouts_count_as_attempts():
    inner = Flaky("transient", failures=0, hang=True)
    with pytest.raises(ChatModelError) as e:
        await wrap(inner, timeout_s=0.01).chat([])
    assert e.value.kind == "timeout" and inner.calls == 3


def test_errors_pickle_across_ray_boundaries():
    import pickle

    e = pickle.loads(pickle.dumps(ChatModelError("x", kind="rate_limit", retry_after=2.5)))
    assert (e.kind, str(e), e.retry_after, e.attempts) == ("rate_limit", "x", 2.5, None)
    e = pickle.loads(pickle.dumps(ChatModelError("y", kind="transient", attempts=3)))
    assert (e.kind, str(e), e.attempts) == ("transient", "y", 3)


async def test_attempts_are_counted_on_the_result_and_the_final_error():
    inner = Flaky("transient", failures=1)
    assert (await wrap(inner).chat([])).attempts == 2
    with pytest.raises(ChatModelError) as e:
        await wrap(Flaky("transient", failures=10)).chat([])
    assert e.value.attempts == 3
    with pytest.raises(ChatModelError) as e:
        await wrap(Flaky("fatal", failures=10)).chat([])
    assert e.value.attempts == 1


async def test_retry_after_from_the_server_sets_the_wait(caplog):
    import logging
    import time

    class Limited(Flaky):
        async def chat(self, messages, params=None, *, adapter=None, session_id=None):
            self.calls += 1
            if self.calls == 1:
                raise ChatModelError("HTTP 429", kind="rate_limit", retry_after=0.3)
            return ChatResult(text="ok")

    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="esc_eval.retry"):
        assert (await wrap(Limited("rate_limit", 1)).chat([])).text == "ok"
    assert time.monotonic() - t0 >= 0.29
    assert "attempt 1 of 3 failed: HTTP 429; retrying in 0.30 s" in caplog.text


def test_backoff_is_exponential_capped_and_retry_after_is_capped():
    from esc_eval.serve.calls.retry import RetryPolicy, retry_wait, should_retry

    policy = RetryPolicy(initial_wait_s=1.0, max_wait_s=3.0, max_retry_after_s=10.0)
    err = ChatModelError("x", kind="transient")
    assert 1.0 <= retry_wait(err, 1, policy) <= 2.0 and 2.0 <= retry_wait(err, 2, policy) <= 3.0
    assert retry_wait(err, 5, policy) == 3.0
    assert retry_wait(ChatModelError("x", kind="rate_limit", retry_after=60), 1, policy) == 10.0
    assert should_retry(ConnectionError()) and not should_retry(ChatModelError("x", kind="fatal"))
    assert not should_retry(ValueError("a bug"))
