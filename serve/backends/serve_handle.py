"""`serve/<model>`: call a ray.serve.llm deployment through a DeploymentHandle (no HTTP hop).

The spec names the served model id (the registry name used by serve.app.application); options:
  app_name   Serve application (default "esc-eval")
  address    Ray cluster to join when this process is not connected yet (default "auto")
  namespace  Ray namespace of the Serve app (default "serve")
  capacity   the part of the deployment this caller may keep busy (EngineCapacity fields; the run's
             plan gives each pool worker its share, and the pool sizes its items in flight by it)
The request is ray.serve.llm's OpenAI-style ChatCompletionRequest; session_id goes to
`handle.options(session_id=...)` so the ConsistentHashRouter keeps a dialogue on one replica;
adapter selects a LoRA via model "base:adapter" and multiplexed_model_id. Replica deaths and
back-pressure are classified transient / rate_limit (retried by serve/calls/retry.py); bad requests fatal.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from esc_eval.serve.chat.interface import Backend, Capabilities, ChatModel, ChatModelError, ChatResult, GenerationParams, as_messages
from esc_eval.serve.engines.args import EngineCapacity
from esc_eval.serve.registry.ref import SERVE_APP_NAME
from esc_eval.serve.backends.openai_http import adapter_model_name, build_request_body, parse_response

log = logging.getLogger("esc_eval.serve.backends.serve_handle")
INSTALL_HINT = "the serve/ backend needs Ray Serve: pip install 'ray[serve]==2.60.0'"


def _ray():
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray, serve


def find_deployment(model_id: str, app_name: str, status: Any) -> str:
    """The deployment serving `model_id` in `app_name`, from a serve.status() object."""
    app = status.applications.get(app_name)
    if app is None:
        raise ChatModelError(
            f"no Serve application {app_name!r} (running: {', '.join(status.applications) or 'none'}); "
            "start it with `esc-eval serve up`", kind="fatal")
    suffix = ":" + model_id.replace("/", "--").replace(".", "_")
    for name in app.deployments:
        if name.endswith(suffix):
            return name
    raise ChatModelError(
        f"model {model_id!r} is not served by application {app_name!r} "
        f"(deployments: {', '.join(app.deployments)})", kind="fatal")


def classify_exception(exc: BaseException) -> str:
    """Map an exception raised by a handle call to a ChatModelError kind."""
    name = type(exc).__name__
    if name in ("BackPressureError",):
        return "rate_limit"
    if name in ("ActorDiedError", "RayActorError", "ActorUnavailableError", "DeploymentUnavailableError",
                "RequestCancelledError", "WorkerCrashedError", "NodeDiedError", "ConnectionError",
                "RaySystemError", "ObjectLostError", "OwnerDiedError"):
        return "transient"
    if isinstance(exc, TimeoutError) or name == "GetTimeoutError":
        return "timeout"
    return "fatal"


class ServeHandleChatModel(ChatModel):
    def __init__(
        self,
        model_id: str,
        *,
        app_name: str = SERVE_APP_NAME,
        address: str | None = "auto",
        namespace: str = "serve",
        timeout_s: float = 300.0,
        default_params: GenerationParams | None = None,
        capacity: dict[str, Any] | None = None,
    ):
        self.name = model_id
        self.model_id = model_id
        self.app_name = app_name
        self.address = address
        self.namespace = namespace
        self.timeout_s = timeout_s
        self.default_params = default_params or GenerationParams()
        self._handle = None
        self._share = EngineCapacity(**capacity) if capacity else None

    def capacity(self) -> EngineCapacity | None:
        """This caller's share of the deployment (from the run's plan), or None when none was given."""
        return self._share

    @property
    def capabilities(self) -> Capabilities:
        return SERVE_CAPABILITIES

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "serve", "model": self.model_id, "app": self.app_name}

    def _get_handle(self):
        if self._handle is not None:
            return self._handle
        from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases

        ray_serve_llm_aliases()  # before _call_once imports ray.serve.llm (an older vLLM: serve/engines/vllm_compat.py)
        ray, serve = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address, namespace=self.namespace, log_to_driver=False)
        deployment = find_deployment(self.model_id, self.app_name, serve.status())
        self._handle = serve.get_deployment_handle(deployment, app_name=self.app_name)
        return self._handle

    async def _call_once(self, body: dict[str, Any], session_id: str | None, adapter: str | None) -> dict[str, Any]:
        import asyncio

        from ray.serve.llm.openai_api_models import ChatCompletionRequest

        request = ChatCompletionRequest(**body)
        opts: dict[str, Any] = {"stream": True}
        if session_id:
            opts["session_id"] = session_id
        if adapter:
            opts["multiplexed_model_id"] = body["model"]
        handle = self._get_handle().options(**opts)

        async def run():
            last = None
            async for item in handle.chat.remote(request):
                last = item
            return last

        last = await asyncio.wait_for(run(), self.timeout_s)
        if isinstance(last, list):  # batched stream chunks are not expected with stream=False requests
            last = last[-1] if last else None
        if last is None:
            raise ChatModelError(f"{self.model_id}: empty response from the deployment", kind="transient")
        data = last.model_dump() if hasattr(last, "model_dump") else last
        if isinstance(data, dict) and "error" in data and "choices" not in data:
            err = data["error"] or {}
            code = int(err.get("code") or 500)
            kind = "rate_limit" if code == 429 else "transient" if code >= 500 else "fatal"
            # an unknown LoRA adapter comes back as a 500 that will never succeed
            from esc_eval.serve.backends.openai_http import PERMANENT_5XX

            if any(p in str(err.get("message")).lower() for p in PERMANENT_5XX):
                kind = "fatal"
            raise ChatModelError(f"{self.model_id}: HTTP {code}: {err.get('message')}", kind=kind)
        return data

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        params = params or self.default_params
        body = build_request_body(adapter_model_name(self.model_id, adapter), as_messages(messages), params)
        body["stream"] = False
        start = time.perf_counter()
        try:
            data = await self._call_once(body, session_id, adapter)
        except ChatModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified here, retried by serve/calls/retry.py
            kind = classify_exception(exc)
            raise ChatModelError(f"{self.model_id}: {type(exc).__name__}: {exc}"[:2000], kind=kind) from exc
        return parse_response(data, time.perf_counter() - start)

    async def close(self) -> None:
        """Stop this handle's router. A router left running keeps a background thread pushing
        metrics; after ray.shutdown() that thread's ray.wait would silently start a new local Ray."""
        handle, self._handle = self._handle, None
        if handle is not None and handle.is_initialized:
            await handle.shutdown_async()


# ray.serve.llm runs vLLM's OpenAI frontend: structured outputs and up to 20 top log-probabilities.
SERVE_CAPABILITIES = Capabilities(logprobs=True, max_top_logprobs=20, choice="structured", logit_bias=True, json_schema=True)


def make_serve_model(name: str, **options: Any) -> ChatModel:
    """Factory for spec `serve/<model id>`; options are ServeHandleChatModel keyword arguments."""
    return ServeHandleChatModel(name, **options)


class ServeBackend(Backend):
    """`serve/<name>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_serve_model(name, **options)

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        return SERVE_CAPABILITIES


BACKEND = ServeBackend()
