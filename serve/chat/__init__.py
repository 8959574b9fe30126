"""serve.chat: the chat-model seam every model call goes through. `ChatModel.chat` (one required
async method; every other hook declared with a default), `WrapperChatModel` (retries, cache,
counters pass every hook on), messages, generation parameters, results, the errors every backend
raises, and `get_chat_model(spec)`, which picks a `Backend` by the string before the slash
(`BACKENDS`: vllm/, serve/, openai/, litellm/, fake/; `register_backend` adds one) and imports it by
name, so no backend is imported until used.

Layer: above config; imports no other room of serve (the backends are named by strings)."""
from esc_eval.serve.chat.interface import (BACKENDS, Backend, Capabilities, ChatMessage, ChatModel, ChatModelError,
                                           ContextOverflowError,
                                           ChatResult, EngineStartError, GenerationParams, RunStopError, UnknownModelError,
                                           WrapperChatModel, as_messages, get_chat_model, is_api_spec, parse_spec,
                                           register_backend)

__all__ = ["BACKENDS", "Backend", "Capabilities", "ChatMessage", "ChatModel", "ChatModelError", "ChatResult",
           "ContextOverflowError", "EngineStartError", "GenerationParams", "RunStopError", "UnknownModelError", "WrapperChatModel", "as_messages",
           "get_chat_model", "is_api_spec", "parse_spec", "register_backend"]
