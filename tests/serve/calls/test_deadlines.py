"""call_timeout: the batch layer's per-call timeout (one timer per tick, not per call)."""
from __future__ import annotations

import asyncio
import time

import pytest

from esc_eval.serve.calls.deadlines import _ticks, call_timeout


async def test_slow_call_times_out_within_a_tick():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="within 0.2 s"):
        async with call_timeout(0.2):
            await asyncio.sleep(5)
    assert 0.19 <= time.monotonic() - t0 < 2.5  # long before the 5 s sleep ends, even on a loaded box


async def test_fast_calls_pass_and_leave_no_entries():
    async def one(i):
        async with call_timeout(30):
            await asyncio.sleep(0.001 * (i % 5))
            return i

    assert await asyncio.gather(*(one(i) for i in range(2000))) == list(range(2000))
    ticks = _ticks(asyncio.get_running_loop())
    assert sum(len(b) for b in ticks.buckets.values()) == 0
    assert len(ticks.buckets) <= 3  # 2,000 calls shared one or two timers


async def test_outside_cancellation_is_not_a_timeout():
    async def guarded():
        async with call_timeout(30):
            await asyncio.sleep(5)

    task = asyncio.create_task(guarded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_timeout_inside_a_task_that_goes_on():
    # after a timeout the task is not left cancelled: later awaits work
    async def body():
        try:
            async with call_timeout(0.05):
                await asyncio.sleep(1)
        except TimeoutError:
            pass
        await asyncio.sleep(0.01)
        return asyncio.current_task().cancelling()

    assert await body() == 0


def test_rejects_non_positive_timeouts():
    with pytest.raises(ValueError, match="positive"):
        call_timeout(0)


def test_separate_event_loops_keep_separate_timers():
    async def run():
        with pytest.raises(TimeoutError):
            async with call_timeout(0.05):
                await asyncio.sleep(1)

    asyncio.run(run())
    asyncio.run(run())  # a new loop: not the previous loop's (closed) timers
