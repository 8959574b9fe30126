"""Real Ray Serve on CPU: sticky routing, replica death, bounded health waits, and the
ray.serve.llm app with the embedded SmolLM2 model behind both the openai/ and serve/ backends.

Heavy: run under `flock /tmp/esc-eval-heavy.lock` with RAY_AUTH_MODE=disabled.
Routing and replica-death tests use a tiny non-LLM deployment that speaks the same `chat`
method as ray.serve.llm's LLMServer (two vLLM replicas do not fit in 2 CPUs / this budget).
Measurements are written to $ESC_EVAL_MEASUREMENTS (default /tmp/esc-eval-serve-measurements.json).
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import socket
import sys
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # Serve replicas for minutes: first, beside the fast tests

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, GenerationParams  # noqa: E402
from esc_eval.cli.ops.serve import serve_down, serve_status, serve_up  # noqa: E402
from esc_eval.serve.app.deploy import ServeStartError, wait_until_healthy  # noqa: E402
from esc_eval.serve.backends.openai_http import OpenAIChatModel  # noqa: E402
from esc_eval.serve.app.application import CONSISTENT_HASH_ROUTER  # noqa: E402
from esc_eval.serve.backends.serve_handle import ServeHandleChatModel  # noqa: E402
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy  # noqa: E402
from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases, replica_runtime_env  # noqa: E402

MEASURE = os.environ.get("ESC_EVAL_MEASUREMENTS", "/tmp/esc-eval-serve-measurements.json")
MSGS = [ChatMessage(role="user", content="I failed my exam and feel awful. What should I do?")]
measurements: dict = {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    from esc_eval.sim.pool.ray_start import start_local_ray  # Ray's start timeouts retried once

    start_local_ray(address="local", num_cpus=2, namespace="serve", include_dashboard=False, log_to_driver=False)
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield port
    try:
        if ray.is_initialized():
            serve.shutdown()
    finally:
        ray.shutdown()
        with open(MEASURE, "w") as f:
            json.dump(measurements, f, indent=2)


# runtime_env: an older vLLM's import paths for the chat requests it unpickles (serve/engines/vllm_compat.py)
@serve.deployment(name="FakeLLM:tiny", max_ongoing_requests=100, ray_actor_options={
    "num_cpus": 0, "runtime_env": replica_runtime_env() if ray_serve_llm_aliases() else {}})
class FakeLLM:
    """Answers with the id of the replica that served the request (same `chat` as LLMServer)."""

    def __init__(self):
        self.delay_s = 0.0
        self.replica = serve.get_replica_context().replica_id.to_full_id_str()

    def set_delay(self, delay_s: float) -> str:
        self.delay_s = delay_s
        return self.replica

    async def chat(self, request, raw_request_info=None):
        await asyncio.sleep(self.delay_s)
        yield {"model": request.model, "choices": [{"index": 0, "finish_reason": "stop",
               "message": {"role": "assistant", "content": self.replica}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


def _tiny_app():
    from ray.serve.config import RequestRouterConfig

    return FakeLLM.options(
        num_replicas=2,
        request_router_config=RequestRouterConfig(request_router_class=CONSISTENT_HASH_ROUTER),
    ).bind()


def _run_tiny_app(delay_s: float) -> None:
    """The two FakeLLM replicas, answering after delay_s: those an earlier test left running, told the new
    delay (serve.run again would replace both with two new replicas), else deployed."""
    if "tiny" not in serve.status().applications:
        serve.run(_tiny_app(), name="tiny", route_prefix="/tiny")
    handle = serve.get_deployment_handle("FakeLLM:tiny", app_name="tiny")
    try:
        assert len(set(handle.broadcast("set_delay", delay_s).results())) == 2  # both replicas told
    finally:
        handle.shutdown()


# 5 calls of each of 10 sessions on one replica: a router that ignored the session id would do that by chance
# with a probability of (1/16)^10
REQUESTS_PER_SESSION = 5


def test_sticky_routing_two_replicas(cluster):
    _run_tiny_app(0.0)
    async def run():
        model = ServeHandleChatModel("tiny", app_name="tiny")
        per_session = {}
        for s in range(10):
            sid = f"dialogue-{s}"
            per_session[sid] = collections.Counter(
                [(await model.chat(MSGS, session_id=sid)).text for _ in range(REQUESTS_PER_SESSION)])
        no_session = collections.Counter([(await model.chat(MSGS)).text for _ in range(20)])
        metrics = model._handle._router._asyncio_router._metrics_manager
        await model.close()
        # a router left running would restart a local Ray from its metrics thread after ray.shutdown()
        assert metrics._shutdown and model._handle is None
        return per_session, no_session

    per_session, no_session = asyncio.run(run())
    assert all(len(c) == 1 for c in per_session.values()), per_session  # every dialogue on one replica
    replicas = {next(iter(c)) for c in per_session.values()}
    assert len(replicas) == 2  # 10 sessions spread over both replicas
    assert len(no_session) == 2  # without a session id requests spread
    measurements["sticky_routing"] = {
        "sessions_per_replica": collections.Counter(next(iter(c)).rsplit("#", 1)[-1] for c in per_session.values()),
        "requests_per_session": REQUESTS_PER_SESSION,
        "no_session_split": sorted(no_session.values()),
    }


def test_kill_a_replica_under_load(cluster, caplog):
    _run_tiny_app(1.0)
    def model():
        # the handle backend behind the one retry policy, as the jobs use it
        return RetryingChatModel(ServeHandleChatModel("tiny", app_name="tiny"),
                                 RetryPolicy(max_attempts=6, initial_wait_s=0.2))

    model_factory = model

    async def first_reply():
        m = model_factory()
        try:
            return (await m.chat(MSGS)).text
        finally:
            await m.close()

    first = asyncio.run(first_reply())
    victim = ray.get_actor(first, namespace="serve")

    async def load():
        model = model_factory()
        tasks = [asyncio.create_task(model.chat(MSGS, session_id=f"d{i}")) for i in range(30)]
        await asyncio.sleep(0.4)
        ray.kill(victim, no_restart=True)
        try:
            return await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await model.close()

    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="esc_eval.retry"):
        results = asyncio.run(load())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    assert all(r.text.startswith("SERVE_REPLICA::") for r in results)
    measurements["replica_kill"] = {
        "requests": len(results), "completed": len(results) - len(errors),
        "retries_logged": caplog.text.count("attempt "), "wall_s": round(time.monotonic() - t0, 2),
    }
    serve.delete("tiny")


@serve.deployment(name="Never:never-model", ray_actor_options={"num_cpus": 0})
class NeverHealthy:
    def __init__(self):
        time.sleep(3600)


def test_replica_that_never_becomes_healthy_fails_in_bounded_time(cluster):
    serve._run(NeverHealthy.bind(), _blocking=False, name="never", route_prefix="/never")
    t0 = time.monotonic()
    with pytest.raises(ServeStartError, match="'never'.*not healthy after 4 s.*model 'never-model'"):
        wait_until_healthy("never", 4, {":never-model": "never-model"}, poll_s=0.5)
    assert time.monotonic() - t0 < 11
    serve.delete("never", _blocking=False)


def test_llm_app_embedded_end_to_end(cluster):
    import httpx

    for app in ("never", "tiny"):
        if app in serve.status().applications:
            serve.delete(app)
    t0 = time.monotonic()
    info = serve_up(models=["embedded"], port=cluster, timeout=600)
    measurements["serve_up_s"] = round(time.monotonic() - t0, 1)
    base = info["url"]
    assert base == f"http://127.0.0.1:{cluster}/v1"
    r = httpx.get(f"{base}/models", timeout=30)
    assert r.status_code == 200 and "embedded" in [m["id"] for m in r.json()["data"]]

    async def calls():
        out = {}
        http = OpenAIChatModel("embedded", base_url=base, timeout_s=120)
        res = await http.chat(MSGS, GenerationParams(max_tokens=8), session_id="dlg-1")  # a few tokens show it answers
        assert res.text.strip() and res.completion_tokens > 0 and res.prompt_tokens > 0
        out["openai_http_latency_s"] = round(res.latency_s, 2)
        out["openai_http_tokens"] = res.completion_tokens
        choice = await http.chat(MSGS, GenerationParams(max_tokens=1, choices=["0", "1", "2", "3", "4"], logprobs=5))
        assert choice.text in {"0", "1", "2", "3", "4"}
        assert choice.top_logprobs and len(choice.top_logprobs[0]) == 5
        with pytest.raises(ChatModelError) as ei:  # LoRA requested from a model without adapters
            await OpenAIChatModel("embedded", base_url=base).chat(MSGS, adapter="nope")
        # ray.serve.llm answers a LoRA request to a model without lora_config with a bare HTTP 500;
        # with "No adapter found" in the body (unknown adapter of a LoRA model) it is fatal.
        out["adapter_on_non_lora_model"] = {"kind": ei.value.kind, "message": str(ei.value)[:200]}
        assert ei.value.kind in ("fatal", "transient")
        await http.close()
        handle = ServeHandleChatModel("embedded", app_name="esc-eval")
        res2 = await handle.chat(MSGS, GenerationParams(max_tokens=8), session_id="dlg-1")
        assert res2.text.strip() and res2.completion_tokens > 0
        out["serve_handle_latency_s"] = round(res2.latency_s, 2)
        out["serve_handle_tokens"] = res2.completion_tokens
        # greedy: both paths see the same model and prompt
        out["same_text_both_paths"] = res2.text == res.text
        await handle.close()
        return out

    measurements["embedded"] = asyncio.run(calls())
    status = serve_status()
    assert str(status["esc-eval"]["status"]).endswith("RUNNING")
    _replica_reports_its_engine_and_empties_its_prefix_cache()


def _replica_reports_its_engine_and_empties_its_prefix_cache():
    """What `bench gpu` / `esc-eval check` read from engines in replicas (the GPU default): vLLM's
    counts since the replica started (the calls above), its KV cache and dtype; and the prefix cache
    emptied on request (sim/bench/engine_probe.py probe_replicas -> LLMServer.esc_engine_report)."""
    from esc_eval.serve.devices.cpu import resolve_dtype
    from esc_eval.serve.engines.embedded import embedded_model_path
    from esc_eval.sim.bench.engine_probe import probe_replicas

    (first,) = probe_replicas([("embedded", "esc-eval")])
    assert first["model"] == str(embedded_model_path()) and first["where"] == "serve replica"
    assert first["id"].startswith("SERVE_REPLICA::esc-eval#LLMServer:embedded#")
    assert first["device"] == "cpu" and first["dtype"] == resolve_dtype("auto") and first["tensor_parallel_size"] == 1
    assert first["executor"] == "uni"  # the model runs in EngineCore: no third process (serve/app/cpu_engine.py)
    assert first["kv_cache"]["tokens"] > 0 and first["counts"]["requests"] >= 3  # the three answered calls above
    assert first["engine_kwargs"]["max_num_seqs"] and first["engine_kwargs"]["enforce_eager"] == "True"

    # ~300 tokens: several KV blocks (of 32 tokens on AVX2, vLLM's 128 with AMX); a third of 300 words' prefill
    long = [ChatMessage(role="user", content=" ".join(f"word{i}" for i in range(100)))]

    async def ask() -> None:
        handle = ServeHandleChatModel("embedded", app_name="esc-eval")
        await handle.chat(long, GenerationParams(max_tokens=1))
        await handle.close()

    def cached_by(step) -> int:
        before = probe_replicas([("embedded", "esc-eval")])[0]["counts"]
        step()
        after = probe_replicas([("embedded", "esc-eval")])[0]["counts"]
        return after["cached_prompt_tokens"] - before["cached_prompt_tokens"]

    asyncio.run(ask())
    assert cached_by(lambda: asyncio.run(ask())) > 0  # the same prompt again: served from the prefix cache
    probe_replicas([("embedded", "esc-eval")], reset_prefix_cache=True)
    assert cached_by(lambda: asyncio.run(ask())) == 0  # emptied in the replica: prefilled again



def test_serve_down(cluster):
    import httpx

    serve_down(app_name="esc-eval")
    assert not ray.is_initialized()
    try:
        r = httpx.get(f"http://127.0.0.1:{cluster}/v1/models", timeout=5)
    except httpx.HTTPError:
        return
    assert r.status_code != 200
