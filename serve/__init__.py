"""serve: model hosting. The chat-model seam every caller uses (`ChatModel.chat`), its backends
picked by spec string (vllm/, serve/, openai/, fake/), the Ray Serve LLM app and the model
registry. Backends import their heavy dependencies lazily."""
from serve.chat import (
    BACKENDS,
    ChatMessage,
    ChatModel,
    ChatModelError,
    ChatResult,
    GenerationParams,
    UnknownModelError,
    get_chat_model,
    parse_spec,
)
from serve.registry import ModelEntry, Registry, build_chat_model, default_registry, load_registry, resolve_spec

__all__ = [
    "BACKENDS", "ChatMessage", "ChatModel", "ChatModelError", "ChatResult", "GenerationParams", "ModelEntry",
    "Registry", "UnknownModelError", "build_chat_model", "default_registry", "get_chat_model", "load_registry",
    "parse_spec", "resolve_spec",
]
