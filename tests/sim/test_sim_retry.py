import asyncio

import pytest

from esc_eval.serve.chat import ChatModel, ChatModelError, ChatResult
from esc_eval.sim.retry import RetryingChatModel


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

    e = pickle.loads(pickle.dumps(ChatModelError("x", kind="rate_limit")))
    assert e.kind == "rate_limit" and str(e) == "x" and not e.exhausted
    e = pickle.loads(pickle.dumps(ChatModelError("y", kind="transient", exhausted=True)))
    assert (e.kind, str(e), e.exhausted) == ("transient", "y", True)


async def test_a_backend_that_already_gave_up_is_not_retried_again():
    class GaveUp(Flaky):
        async def chat(self, messages, params=None, *, adapter=None, session_id=None):
            self.calls += 1
            raise ChatModelError("gave up after 5 attempts", kind="rate_limit", exhausted=True)

    inner = GaveUp("rate_limit", failures=1)
    with pytest.raises(ChatModelError, match="gave up after 5") as e:
        await wrap(inner).chat([])
    assert inner.calls == 1 and e.value.exhausted
