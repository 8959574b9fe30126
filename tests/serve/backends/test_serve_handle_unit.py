"""serve/ backend and CLI pieces that need no running cluster."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from esc_eval.serve.chat.interface import ChatModelError, UnknownModelError, get_chat_model
from esc_eval.serve.backends.serve_handle import ServeHandleChatModel, classify_exception, find_deployment


def _status(apps):
    return SimpleNamespace(applications={
        name: SimpleNamespace(deployments={d: None for d in deps}) for name, deps in apps.items()})


def test_find_deployment_by_model_id():
    st = _status({"esc-eval": ["OpenAiIngress", "LLMServer:embedded", "LocalLoraLLMServer:esc-rank",
                               "LLMServer:qwen1_5-7b-chat"]})
    assert find_deployment("esc-rank", "esc-eval", st) == "LocalLoraLLMServer:esc-rank"
    assert find_deployment("qwen1.5-7b-chat", "esc-eval", st) == "LLMServer:qwen1_5-7b-chat"
    with pytest.raises(ChatModelError, match="not served by application 'esc-eval'") as ei:
        find_deployment("gpt-4", "esc-eval", st)
    assert ei.value.kind == "fatal"
    with pytest.raises(ChatModelError, match="no Serve application 'other'.*esc-eval serve up"):
        find_deployment("embedded", "other", st)


def test_exception_classes_map_to_kinds():
    def exc(name, base=Exception):
        return type(name, (base,), {})()

    assert classify_exception(exc("ActorDiedError")) == "transient"
    assert classify_exception(exc("ActorUnavailableError")) == "transient"
    assert classify_exception(exc("BackPressureError")) == "rate_limit"
    assert classify_exception(TimeoutError()) == "timeout"
    assert classify_exception(ValueError("bad request")) == "fatal"


def test_spec_builds_handle_model_lazily():
    m = get_chat_model("serve/esc-rank", app_name="esc-eval")
    assert isinstance(m, ServeHandleChatModel) and m.model_id == "esc-rank" and m._handle is None


def test_serve_up_rejects_unknown_model_before_touching_ray():
    from esc_eval.cli.ops.serve import serve_up

    with pytest.raises(UnknownModelError, match="did you mean.*esc-rank"):
        serve_up(models=["esc-rnk"])


async def test_close_shuts_the_handle_router_down_once():
    calls = []

    class Handle:
        is_initialized = True

        async def shutdown_async(self):
            calls.append("shutdown")

    m = ServeHandleChatModel("esc-rank")
    await m.close()  # never used: nothing to stop
    m._handle = Handle()
    await m.close()
    await m.close()
    assert calls == ["shutdown"] and m._handle is None
