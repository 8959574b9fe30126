"""serve: model hosting. The chat-model seam every caller uses (`ChatModel.chat`), its backends
picked by spec string (vllm/, serve/, openai/, fake/), the Ray Serve LLM app and the model
registry. Backends import their heavy dependencies lazily.

Layer: the bottom. serve imports nothing of sim, train, analysis or cli (checked by import-linter,
pyproject.toml); everything that calls a model goes through it, including the one retry policy
(serve/retry.py) and the one name-or-spec resolver (serve/registry.py: `resolve`, `is_spec`)."""
from esc_eval.serve.chat import (BACKENDS, ChatMessage, ChatModel, ChatModelError, ChatResult, EngineStartError,
                                 GenerationParams, RunStopError, UnknownModelError, get_chat_model, parse_spec)
from esc_eval.serve.config_base import ConfigError, load_config
from esc_eval.serve.gpu_detect import GpuInventory, detect_gpus
from esc_eval.serve.model_entry import ModelEntry
from esc_eval.serve.model_ref import ModelRef
from esc_eval.serve.plan import PlacementConfig, Plan, PlanError, plan_run
from esc_eval.serve.plan_time import Projection, Rates, RatesError, Workload, load_rates, project
from esc_eval.serve.registry import Registry, build_chat_model, default_registry, load_registry, resolve_spec
from esc_eval.serve.replica_meter import ReplicaMeter

__all__ = [
    "BACKENDS", "ChatMessage", "ChatModel", "ChatModelError", "ChatResult", "ConfigError", "EngineStartError", "GenerationParams", "GpuInventory",
    "ModelEntry", "ModelRef", "load_config", "RunStopError", "PlacementConfig", "Plan", "PlanError", "Registry", "ReplicaMeter", "detect_gpus", "UnknownModelError", "build_chat_model", "default_registry", "get_chat_model", "load_registry",
    "parse_spec", "plan_run", "project", "Projection", "Rates", "RatesError", "load_rates", "resolve_spec", "Workload",
]
