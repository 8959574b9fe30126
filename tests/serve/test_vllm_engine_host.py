"""The engine host's lifecycle (no vLLM needed): shutdown drains the engine's tasks on its own loop."""
import asyncio

import pytest

from esc_eval.serve.chat.interface import ChatModelError


class _EngineWithOutputTask:
    """Stands in for AsyncLLM's shutdown contract: a background output task on the engine loop
    that shutdown() cancels thread-safely (vLLM's cancel_task_threadsafe)."""

    def __init__(self, loop):
        self.loop = loop
        self.task = asyncio.run_coroutine_threadsafe(self._make_task(), loop).result(5)
        self.cancelled_cleanly = False

    async def _make_task(self):
        return asyncio.get_running_loop().create_task(self._output_handler())

    async def _output_handler(self):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_cleanly = True
            raise

    def shutdown(self):
        self.loop.call_soon_threadsafe(self.task.cancel)


def test_host_shutdown_drains_the_engine_tasks_and_closes_its_loop():
    from esc_eval.serve.backends.vllm_engine import _EngineHost

    host = _EngineHost("/nonexistent/model", {}, {})
    engine = host.engine = _EngineWithOutputTask(host.loop)
    host.shutdown(timeout_s=10)
    # The cancellation ran to completion on the loop (not left "cancelling" for interpreter exit).
    assert engine.cancelled_cleanly and engine.task.done()
    assert not host.thread.is_alive() and host.loop.is_closed()
    with pytest.raises(ChatModelError, match="shut down"):
        host.ensure_started()
    host.shutdown()  # idempotent
