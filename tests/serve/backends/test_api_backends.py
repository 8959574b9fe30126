"""API backends against local servers speaking the providers' real protocols (tests/serve/api_standins.py):
openai/ and litellm/ (OpenAI's chat completions, Anthropic's messages API), what they declare they
support, their 429 handling through the one retry policy, their checks before any call, and that
LiteLLM reaches nothing but the server it is pointed at."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from api_standins import StrictAnthropic, StrictOpenAI
from esc_eval.serve.chat.interface import (ChatMessage, ChatModelError, GenerationParams, backend_capabilities,
                                 backend_preflight, get_chat_model)
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy

JUDGE = [ChatMessage(role="system", content="You are a judge."),
         ChatMessage(role="user", content="Dialogue ... Based on the rules, give your empathy score (The number only).")]
CHAT = [ChatMessage(role="system", content="be kind"), ChatMessage(role="user", content="I feel low")]
LABELS = list("01234")


@pytest.fixture(scope="module")
def openai_server():
    srv = StrictOpenAI(key="sk-local").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def anthropic_server():
    srv = StrictAnthropic(key="ak-local").start()
    yield srv
    srv.stop()


def retrying(model, attempts=3):
    return RetryingChatModel(model, RetryPolicy(max_attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05))


async def test_openai_default_never_sends_vllm_fields_to_openai(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    caps = backend_capabilities("openai/gpt-4")
    assert (caps.choice, caps.max_top_logprobs) == ("logit_bias", 20)
    m = get_chat_model("openai/gpt-4", base_url=openai_server.base_url + "/v1")
    res = await m.chat(JUDGE, GenerationParams(max_tokens=1, temperature=0, choices=LABELS, logprobs=20))
    await m.close()
    assert res.text in LABELS and set(LABELS) <= set(res.top_logprobs[0]) and res.tokens == [res.text]
    # a name OpenAI's tokenizers do not cover: no way to constrain the answer, top_logprobs only
    assert backend_capabilities("openai/my-local-model").choice is None
    assert backend_capabilities("openai/my-local-model", api="vllm").choice == "structured"


async def test_openai_standin_is_as_strict_as_openai(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    m = retrying(get_chat_model("openai/judge", base_url=openai_server.base_url + "/v1"))
    with pytest.raises(ChatModelError, match="Unrecognized request argument supplied: structured_outputs") as ei:
        await m.chat(JUDGE, GenerationParams(max_tokens=1, choices=LABELS))  # vLLM's field, as before
    assert ei.value.kind == "fatal" and ei.value.attempts == 1
    with pytest.raises(ChatModelError, match="top_logprobs") as ei:
        await m.chat(JUDGE, GenerationParams(max_tokens=1, logprobs=21))
    assert ei.value.kind == "fatal"
    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    with pytest.raises(ChatModelError, match="HTTP 401"):
        await m.chat(CHAT)
    await m.close()


async def test_openai_429_with_retry_after_is_honoured(monkeypatch):
    srv = StrictOpenAI(fail_every=2, retry_after=0.25).start()
    try:
        m = retrying(get_chat_model("openai/gpt-4", base_url=srv.base_url + "/v1", api_key_env="ESC_NO_KEY"))
        r1 = await m.chat(CHAT)
        r2 = await m.chat(CHAT)  # the server's second request answers 429
        await m.close()
        assert (r1.attempts, r2.attempts, srv.refused_429) == (1, 2, 1)
        assert srv.times[-1] - srv.times[-2] >= 0.25
    finally:
        srv.stop()


async def test_litellm_openai_protocol_with_logprobs_bias_and_429(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    backend_preflight("litellm/openai/gpt-4")
    caps = backend_capabilities("litellm/openai/gpt-4")
    assert caps.logprobs and caps.choice == "logit_bias"
    m = retrying(get_chat_model("litellm/openai/gpt-4", api_base=openai_server.base_url + "/v1"))
    res = await m.chat(JUDGE, GenerationParams(max_tokens=1, temperature=0, choices=LABELS, logprobs=20))
    assert res.text in LABELS and set(LABELS) <= set(res.top_logprobs[0])
    chat = await m.chat(CHAT, GenerationParams(max_tokens=8, temperature=0, seed=1))
    assert chat.text.startswith("I hear you") and chat.prompt_tokens > 0 and chat.completion_tokens > 0
    openai_server.fail_every, start = 1, openai_server.requests
    try:
        with pytest.raises(ChatModelError) as ei:
            await m.chat(CHAT)
    finally:
        openai_server.fail_every = 0
    assert ei.value.kind == "rate_limit" and ei.value.retry_after == pytest.approx(0.2, abs=0.01)
    assert openai_server.requests - start == 3  # LiteLLM's own retries are off: 3 attempts, ours


@pytest.mark.parametrize("spec, where", [("openai/gpt-4", "base_url"), ("litellm/openai/gpt-4", "api_base")])
async def test_a_prompt_past_the_context_window_is_a_context_overflow_not_retried(openai_server, monkeypatch, spec, where):
    """What ends a long dialogue that outgrew the model's context (sim/dialogue/dialogue.py): both API
    backends say ContextOverflowError for OpenAI's context_length_exceeded, and the retry policy does not retry it."""
    from esc_eval.serve.chat.interface import ContextOverflowError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    m = retrying(get_chat_model(spec, **{where: openai_server.base_url + "/v1"}))
    openai_server.context, ok = 40, openai_server.ok
    try:
        assert (await m.chat(CHAT, GenerationParams(max_tokens=8))).text  # fits
        with pytest.raises(ContextOverflowError, match="context_overflow") as ei:
            await m.chat([*CHAT, ChatMessage(role="user", content="word " * 200)], GenerationParams(max_tokens=8))
    finally:
        openai_server.context = None
        await m.close()
    assert ei.value.kind == "fatal" and ei.value.attempts == 1 and openai_server.ok - ok == 1


async def test_litellm_anthropic_messages_protocol(anthropic_server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-local")
    spec = "litellm/anthropic/claude-3-5-sonnet-20240620"
    backend_preflight(spec)
    caps = backend_capabilities(spec)
    assert not caps.logprobs and caps.choice is None  # the judge falls back to generate
    m = retrying(get_chat_model(spec, api_base=anthropic_server.base_url))
    res = await m.chat(JUDGE, GenerationParams(max_tokens=4, temperature=0))
    assert res.text in LABELS and res.prompt_tokens > 0  # system went to the top level, as the API wants
    anthropic_server.fail_every = 1
    try:
        with pytest.raises(ChatModelError) as ei:
            await m.chat(CHAT, GenerationParams(max_tokens=8))
    finally:
        anthropic_server.fail_every = 0
    assert ei.value.kind == "rate_limit" and ei.value.retry_after is not None


def test_bad_input_is_one_line_naming_model_and_setting(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cases = {
        "litellm/nosuchprovider/x": "unknown LiteLLM provider 'nosuchprovider'",
        "litellm/anthropic/claude-3-5-sonnet-20240620": "set the environment variable ANTHROPIC_API_KEY",
        "openai/gpt-4": "set the environment variable OPENAI_API_KEY",
        "litellm/gpt-4": "expected litellm/<provider>/<model>",
    }
    for spec, text in cases.items():
        with pytest.raises(ValueError) as ei:
            backend_preflight(spec)
        msg = str(ei.value)
        assert text in msg and "\n" not in msg and spec.partition("/")[2] in msg, msg


def test_litellm_reaches_only_the_server_it_is_pointed_at(openai_server, anthropic_server, tmp_path):
    """In a fresh process (so LiteLLM's import is watched too): every socket it opens goes to
    127.0.0.1, and no name is looked up (no price list, no tiktoken download)."""
    script = tmp_path / "watch.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, json, sys
        events = []
        sys.addaudithook(lambda ev, args: events.append([ev, str(args[1] if ev == "socket.connect" else args[0])])
                         if ev in ("socket.connect", "socket.getaddrinfo") else None)
        from esc_eval.serve.chat.interface import ChatMessage, GenerationParams, backend_preflight, get_chat_model
        from esc_eval.serve.backends.litellm_api import list_price
        msgs = [ChatMessage(role="user", content="hello")]
        async def main():
            backend_preflight("litellm/anthropic/claude-3-5-sonnet-20240620")
            a = get_chat_model("litellm/anthropic/claude-3-5-sonnet-20240620", api_base="{anthropic_server.base_url}")
            o = get_chat_model("litellm/openai/gpt-4o", api_base="{openai_server.base_url}/v1")
            await a.chat(msgs, GenerationParams(max_tokens=8))
            await o.chat(msgs, GenerationParams(max_tokens=1, choices=list("01234"), logprobs=5))
            return list_price("openai/gpt-4o")
        price = asyncio.run(main())
        print(json.dumps({{"events": events, "price": price.prompt_per_1m if price else None}}))
    """))
    env = {**os.environ, "ANTHROPIC_API_KEY": "ak-local", "OPENAI_API_KEY": "sk-local"}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    hosts = {e[1] for e in data["events"]}
    assert data["events"] and all("127.0.0.1" in h for h in hosts), hosts
    assert data["price"] and data["price"] > 0  # the price list shipped in the wheel, offline
    assert "cost map" not in out.stderr.lower()
