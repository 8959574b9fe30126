"""The openai/ backend against a real local HTTP server (aiohttp on 127.0.0.1, random port)."""
from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest
from aiohttp import web

from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, GenerationParams, get_chat_model
from esc_eval.serve.backends.openai_http import OpenAIChatModel, parse_retry_after
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy

MSGS = [ChatMessage(role="system", content="be kind"), ChatMessage(role="user", content="I feel low")]

OK_BODY = {
    "id": "x", "object": "chat.completion", "model": "m",
    "choices": [{
        "index": 0, "finish_reason": "length",
        "message": {"role": "assistant", "content": "3"},
        "logprobs": {"content": [{"token": "3", "logprob": -0.1,
                                  "top_logprobs": [{"token": "3", "logprob": -0.1},
                                                   {"token": "2", "logprob": -2.5}]}]},
    }],
    "usage": {"prompt_tokens": 11, "completion_tokens": 1, "total_tokens": 12},
}


class Server:
    """Scripted responses, one per request; the last one repeats."""

    def __init__(self):
        self.script: list[str] = ["ok"]
        self.requests: list[tuple[dict, dict]] = []
        self.times: list[float] = []

    async def handler(self, request: web.Request) -> web.Response:
        self.requests.append((await request.json(), dict(request.headers)))
        self.times.append(time.monotonic())
        step = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if step == "ok":
            return web.json_response(OK_BODY)
        if step.startswith("429"):
            _, _, after = step.partition(":")
            return web.json_response({"error": "slow down"}, status=429,
                                     headers={"Retry-After": after} if after else None)
        if step == "hang":
            await asyncio.sleep(2)
        if step == "500-lora":
            return web.json_response({"error": {"message": "No adapter found for embedded:nope"}}, status=500)
        return web.json_response({"error": {"message": f"scripted {step}"}}, status=int(step))


@pytest.fixture()
async def server():
    srv = Server()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", srv.handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    srv.base_url = f"http://127.0.0.1:{port}/v1"
    yield srv
    await runner.cleanup()


def model(srv, max_attempts=3, **kw):
    """The HTTP backend behind the one retry policy, as the jobs use it."""
    opts = dict(base_url=srv.base_url, api_key_env="ESC_TEST_KEY", timeout_s=5)
    opts.update(kw)
    return RetryingChatModel(OpenAIChatModel("judge", **opts),
                             RetryPolicy(max_attempts=max_attempts, initial_wait_s=0.01, max_wait_s=0.05))


async def test_success_maps_params_headers_and_result(server, monkeypatch, caplog):
    monkeypatch.setenv("ESC_TEST_KEY", "sk-secret-123")
    m = get_chat_model("openai/judge", base_url=server.base_url, api_key_env="ESC_TEST_KEY")
    params = GenerationParams(temperature=0.0, max_tokens=1, seed=7, stop=["\n"],
                              choices=["0", "1", "2", "3", "4"], logprobs=5)
    res = await m.chat(MSGS, params, adapter="fluency_en", session_id="dlg-42")
    await m.close()
    body, headers = server.requests[0]
    assert body["model"] == "judge:fluency_en"
    assert body["messages"] == [{"role": "system", "content": "be kind"}, {"role": "user", "content": "I feel low"}]
    assert body["structured_outputs"] == {"choice": ["0", "1", "2", "3", "4"]}
    assert (body["max_tokens"], body["seed"], body["stop"], body["temperature"]) == (1, 7, ["\n"], 0.0)
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert headers["Authorization"] == "Bearer sk-secret-123"
    assert headers["x-session-id"] == "dlg-42"
    assert res.text == "3" and res.finish_reason == "length"
    assert (res.prompt_tokens, res.completion_tokens) == (11, 1)
    assert res.top_logprobs == [{"3": -0.1, "2": -2.5}]
    assert res.latency_s > 0
    assert "sk-secret-123" not in caplog.text


async def test_guided_choice_mode_and_no_key_for_local_server(server, monkeypatch):
    monkeypatch.delenv("ESC_TEST_KEY", raising=False)
    m = model(server, structured_outputs="guided_choice")
    await m.chat(MSGS, GenerationParams(choices=["yes", "no"]))
    await m.close()
    body, headers = server.requests[0]
    assert body["guided_choice"] == ["yes", "no"] and "structured_outputs" not in body
    assert "Authorization" not in headers and "x-session-id" not in headers


async def test_429_honours_retry_after_then_succeeds(server, caplog):
    server.script = ["429:0.3", "ok"]
    m = model(server)
    with caplog.at_level(logging.WARNING, logger="esc_eval.retry"):
        res = await m.chat(MSGS)
    await m.close()
    assert res.text == "3" and len(server.requests) == 2 and res.attempts == 2
    assert server.times[1] - server.times[0] >= 0.29
    assert "attempt 1 of 3 failed: HTTP 429" in caplog.text and "retrying in 0.30 s" in caplog.text


async def test_429_exhausted_is_rate_limit(server):
    server.script = ["429"]
    m = model(server)
    with pytest.raises(ChatModelError) as ei:
        await m.chat(MSGS)
    await m.close()
    assert ei.value.kind == "rate_limit" and len(server.requests) == 3


async def test_5xx_retries_with_backoff_then_transient(server):
    server.script = ["500", "503", "502"]
    m = model(server)
    with pytest.raises(ChatModelError, match="HTTP 502") as ei:
        await m.chat(MSGS)
    await m.close()
    assert ei.value.kind == "transient" and ei.value.attempts == 3 and len(server.requests) == 3


async def test_5xx_then_success(server):
    server.script = ["500", "ok"]
    m = model(server)
    assert (await m.chat(MSGS)).text == "3"
    await m.close()
    assert len(server.requests) == 2


async def test_4xx_is_fatal_without_retry(server):
    server.script = ["404"]
    m = model(server)
    with pytest.raises(ChatModelError, match="HTTP 404.*scripted 404") as ei:
        await m.chat(MSGS)
    await m.close()
    assert ei.value.kind == "fatal" and len(server.requests) == 1


async def test_hanging_server_times_out_in_bounded_time(server):
    server.script = ["hang"]
    m = model(server, timeout_s=0.3, max_attempts=2)
    t0 = time.monotonic()
    with pytest.raises(ChatModelError) as ei:
        await m.chat(MSGS)
    await m.close()
    assert ei.value.kind == "timeout" and len(server.requests) == 2
    assert time.monotonic() - t0 < 3


async def test_unreachable_endpoint_fails_fast_and_clearly():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = RetryingChatModel(OpenAIChatModel("x", base_url=f"http://127.0.0.1:{port}/v1"),
                          RetryPolicy(max_attempts=2, initial_wait_s=0.01, max_wait_s=0.02))
    t0 = time.monotonic()
    with pytest.raises(ChatModelError, match=f"cannot reach http://127.0.0.1:{port}/v1") as ei:
        await m.chat(MSGS)
    assert ei.value.kind == "transient" and time.monotonic() - t0 < 5


async def test_openai_without_key_is_fatal(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ChatModelError, match="set the environment variable OPENAI_API_KEY") as ei:
        await OpenAIChatModel("gpt-4").chat(MSGS)
    assert ei.value.kind == "fatal"


def test_base_url_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert OpenAIChatModel("m").base_url == "http://127.0.0.1:9/v1"


def test_parse_retry_after():
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 50 < parse_retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 60))) <= 61


async def test_unknown_lora_adapter_500_is_fatal(server):
    server.script = ["500-lora"]
    m = model(server)
    with pytest.raises(ChatModelError, match="No adapter found") as ei:
        await m.chat(MSGS, adapter="nope")
    await m.close()
    assert ei.value.kind == "fatal" and len(server.requests) == 1


async def test_the_backend_itself_never_retries(server):
    server.script = ["503", "ok"]
    m = OpenAIChatModel("judge", base_url=server.base_url, api_key_env="ESC_TEST_KEY", timeout_s=5)
    with pytest.raises(ChatModelError) as ei:
        await m.chat(MSGS)
    await m.close()
    assert ei.value.kind == "transient" and len(server.requests) == 1
