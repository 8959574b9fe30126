"""Per-call timeouts for thousands of concurrent calls, with one timer per tick instead of per call.

asyncio.timeout() schedules and cancels one TimerHandle per call; with thousands of dialogues in
flight that was about a third of the batch layer's CPU per fake model call. Here a deadline is
rounded up to a tick (at most 1 s, and at most 5% of the timeout), calls sharing a tick share one
timer, and leaving the block is a set removal. A call may overrun its timeout by up to one tick.

    async with call_timeout(30.0):   # raises TimeoutError like asyncio.timeout
        await model_call()
"""
from __future__ import annotations

import asyncio
import math
import weakref
from typing import Any


class _Ticks:
    """The deadline buckets of one event loop: tick time -> the calls that expire at it."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop_ref = weakref.ref(loop)  # weak: this object is the loop's value in _TICKS
        self.buckets: dict[float, set[call_timeout]] = {}

    def add(self, loop: asyncio.AbstractEventLoop, entry: call_timeout, deadline: float, tick: float) -> float:
        at = math.ceil(deadline / tick) * tick
        bucket = self.buckets.get(at)
        if bucket is None:
            bucket = self.buckets[at] = set()
            loop.call_at(at, self._expire, at)
        bucket.add(entry)
        return at

    def discard(self, entry: call_timeout, at: float) -> None:
        bucket = self.buckets.get(at)
        if bucket is not None:
            bucket.discard(entry)

    def _expire(self, at: float) -> None:
        for entry in self.buckets.pop(at, ()):
            entry._expire()


_TICKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ticks] = weakref.WeakKeyDictionary()
_last: _Ticks | None = None  # almost every call runs on the same loop as the one before


def _ticks(loop: asyncio.AbstractEventLoop) -> _Ticks:
    global _last
    t = _last
    if t is not None and t.loop_ref() is loop:
        return t
    t = _TICKS.get(loop)
    if t is None:
        t = _TICKS[loop] = _Ticks(loop)
    _last = t
    return t


class call_timeout:  # noqa: N801 - used like asyncio.timeout
    """Async context manager: cancel the enclosed block after `seconds` (plus up to one tick) and
    raise TimeoutError; a cancellation that did not come from here propagates unchanged."""

    __slots__ = ("seconds", "_task", "_cancelling", "_expired", "_at", "_ticks")

    def __init__(self, seconds: float):
        if seconds <= 0:
            raise ValueError(f"timeout must be positive, got {seconds}")
        self.seconds = seconds
        self._expired = False

    async def __aenter__(self) -> call_timeout:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("call_timeout() must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._ticks = _ticks(loop)
        self._at = self._ticks.add(loop, self, loop.time() + self.seconds, min(1.0, self.seconds / 20))
        return self

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        self._ticks.discard(self, self._at)
        if self._expired and exc_type is asyncio.CancelledError and self._task.uncancel() <= self._cancelling:
            raise TimeoutError(f"no result within {self.seconds:g} s") from exc
        return None
