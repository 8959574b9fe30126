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


def test_engines_under_different_cpu_bindings_are_different_engines(monkeypatch):
    """A CPU engine's core process reads VLLM_CPU_OMP_THREADS_BIND when spawned: a model asked for under
    another binding gets its own engine (bench score's probes once timed one engine twice)."""
    import esc_eval.serve.backends.engine_host as eh

    made = []

    class Host:
        def __init__(self, *args):
            self.users = 0
            made.append(self)

    monkeypatch.setattr(eh, "_HOSTS", {})
    monkeypatch.setattr(eh, "_EngineHost", Host)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    default = eh._host_for("/m", {}, {"dtype": "float32"})
    assert eh._host_for("/m", {}, {"dtype": "float32"}) is default and default.users == 2  # same settings: shared
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")
    bound = eh._host_for("/m", {}, {"dtype": "float32"})
    assert bound is not default and eh._host_for("/m", {}, {"dtype": "float32"}) is bound and len(made) == 2
