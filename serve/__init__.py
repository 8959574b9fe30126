"""serve: model hosting, one room per concept.

  config/    the run-config loader every package uses (pydantic, YAML, validated at the door)
  devices/   the CPU (ISA, dtype) and the GPUs a run may use
  chat/      the chat-model seam (`ChatModel.chat`) and the backend picked by a spec string
  calls/     the policy every call runs under: retries, deadlines, limits and spend, the call cache
  registry/  the models by name (the paper's targets, ESC-Role, ESC-RANK, the embedded model)
  engines/   how a vLLM engine is configured and started here; why one did not start
  backends/  the seam's implementations: vllm/, serve/, openai/, litellm/, fake/
  app/       the Ray Serve LLM application, its deployment, Ray itself
  plan/      where a run's models go (GPUs, replicas, KV) and how long the run takes

Layers (pyproject [tool.importlinter], checked in CI): plan > app | backends > engines | registry >
calls > chat > config | devices. serve is the bottom of the project: it imports nothing of sim,
train, analysis or cli; everything that calls a model goes through it, including the one retry
policy (calls/retry.py) and the one name-or-spec resolver (registry/registry.py). Backends import
their heavy dependencies lazily. This package exports the names most callers need."""
from esc_eval.serve.app import ReplicaMeter
from esc_eval.serve.chat import (BACKENDS, Backend, ChatMessage, ChatModel, ChatModelError, ChatResult, EngineStartError,
                                 GenerationParams, RunStopError, UnknownModelError, WrapperChatModel, get_chat_model,
                                 parse_spec, register_backend)
from esc_eval.serve.config import ConfigError, load_config
from esc_eval.serve.devices import GpuInventory, detect_gpus
from esc_eval.serve.plan import (PlacementConfig, Plan, PlanError, Projection, Rates, RatesError, Workload, load_rates,
                                 plan_run, project)
from esc_eval.serve.registry import (ModelEntry, ModelRef, Registry, build_chat_model, default_registry, load_registry,
                                     resolve_spec)

__all__ = [
    "BACKENDS", "Backend", "ChatMessage", "ChatModel", "ChatModelError", "ChatResult", "ConfigError", "EngineStartError", "GenerationParams", "GpuInventory",
    "ModelEntry", "ModelRef", "load_config", "RunStopError", "PlacementConfig", "Plan", "PlanError", "Registry", "ReplicaMeter", "detect_gpus", "UnknownModelError", "build_chat_model", "default_registry", "get_chat_model", "load_registry",
    "parse_spec", "plan_run", "register_backend", "WrapperChatModel", "project", "Projection", "Rates", "RatesError", "load_rates", "resolve_spec", "Workload",
]
