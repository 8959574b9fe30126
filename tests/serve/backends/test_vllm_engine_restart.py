"""A vLLM EngineCore killed with SIGKILL is rebuilt (bounded) and the call in flight is retried.

Heavy (two engine starts): run under `flock /tmp/esc-eval-heavy.lock`."""
import asyncio
import time

import pytest

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams, RunStopError


def engine_cores():
    import psutil

    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if "EngineCore" in c.name() or "EngineCore" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:
            pass
    return out


@pytest.mark.slow
def test_killed_engine_core_is_restarted_and_the_call_retried():
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel, engines_started_here
    from esc_eval.serve.calls.retry import RetryingChatModel

    # Its own engine (engine kwargs differ from the session's), so killing it harms no other test.
    before = {c.pid for c in engine_cores()}  # other tests' engines: not ours to kill
    msgs = [ChatMessage(role="user", content="Say hello.")]
    params = GenerationParams(max_tokens=8, temperature=0.0)
    with engines_started_here():  # the session's shared engine stays up for later tests
        model = VLLMChatModel("embedded", max_model_len=1024)
        first = asyncio.run(model.chat(msgs, params))
        cores = [c for c in engine_cores() if c.pid not in before]
        assert cores, "the engine core process should be a child of this process"
        for c in cores:
            c.kill()  # SIGKILL, as the OOM killer would
        for c in cores:
            c.wait(30)
        t = time.monotonic()
        again = asyncio.run(RetryingChatModel(model, max_attempts=3, initial_wait_s=0, max_wait_s=0,
                                              timeout_s=600).chat(msgs, params))
        assert again.text == first.text  # greedy: the same answer from the rebuilt engine
        assert model.host.restarts == 1 and [c for c in engine_cores() if c.pid not in before]
        print(f"engine restarted and call answered in {time.monotonic() - t:.1f} s")

        # Restarts used up: the run stops (RunStopError: no retry, no failed row), every caller told.
        model.host.max_restarts = 1
        for c in [c for c in engine_cores() if c.pid not in before]:
            c.kill()
            c.wait(30)
        retrying = RetryingChatModel(model, max_attempts=3, initial_wait_s=0, max_wait_s=0, timeout_s=600)

        async def two_calls():
            return await asyncio.gather(retrying.chat(msgs, params), retrying.chat(msgs, params), return_exceptions=True)

        errors = asyncio.run(two_calls())
        assert all(type(e) is RunStopError for e in errors), errors
        assert "died 2 times; not restarting it again (ESC_EVAL_VLLM_MAX_RESTARTS=1)" in str(errors[0])
