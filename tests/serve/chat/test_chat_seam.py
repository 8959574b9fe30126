"""serve/chat/interface.py: a backend registers itself by prefix and is built by spec; every hook of
ChatModel has a default and passes through every wrapper (retries, the call cache, the pool's)."""
import asyncio
import sys
import types

import pytest

from esc_eval.serve.chat.interface import (BACKENDS, Backend, Capabilities, ChatModel, ChatResult, GenerationParams,
                                           backend_capabilities, backend_preflight, get_chat_model, register_backend)


class _Echo(ChatModel):
    def __init__(self, name: str, **options):
        self.name, self.options, self.closed = f"mine/{name}", options, False

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        return ChatResult(text=messages[-1]["content"] if isinstance(messages[-1], dict) else messages[-1].content)

    async def close(self):
        self.closed = True


class _MineBackend(Backend):
    def make(self, name, **options):
        return _Echo(name, **options)

    def required_env(self, name, **options):
        return ["MINE_KEY"]


@pytest.fixture
def mine(monkeypatch):
    module = types.ModuleType("esc_eval_test_mine_backend")
    module.BACKEND, module.NOT_ONE = _MineBackend(), object()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr("esc_eval.serve.chat.interface.BACKENDS", dict(BACKENDS))
    register_backend("mine", f"{module.__name__}:BACKEND")
    return module


def test_a_registered_backend_is_built_by_spec_with_the_defaults_it_did_not_override(mine):
    model = get_chat_model("mine/x", temperature=0.5)
    assert isinstance(model, _Echo) and model.name == "mine/x" and model.options == {"temperature": 0.5}
    assert backend_capabilities("mine/x") == Capabilities()  # not overridden: the default
    assert backend_preflight("mine/x") == ["MINE_KEY"]
    # the ChatModel hooks it did not write
    assert (model.holds_engine, model.released, model.default_params, model.capacity(), model.release()) == (
        False, False, None, None, False)
    model.start()  # nothing to start


def test_registering_checks_the_names_and_building_checks_the_kind(mine, monkeypatch):
    with pytest.raises(ValueError, match="a prefix without '/'"):
        register_backend("a/b", "m:B")
    with pytest.raises(ValueError, match="'module:attribute'"):
        register_backend("x", "no_colon")
    register_backend("odd", f"{mine.__name__}:NOT_ONE")
    with pytest.raises(TypeError, match="is not a serve.chat.interface.Backend"):
        get_chat_model("odd/y")


def test_every_shipped_backend_is_a_backend():
    import importlib

    for prefix, where in BACKENDS.items():
        module, _, attribute = where.partition(":")
        assert isinstance(getattr(importlib.import_module(module), attribute), Backend), prefix


def test_wrappers_pass_every_hook_to_the_model_inside(tmp_path):
    from esc_eval.serve.calls.cache import ArrowFsStore, CachedChatModel
    from esc_eval.serve.calls.retry import RetryingChatModel

    class Engine(_Echo):
        holds_engine = True
        default_params = GenerationParams(max_tokens=7)

        def capacity(self):
            return "one engine's capacity"

        def release(self):
            self.released = True
            return True

    inner = Engine("e")
    outer = CachedChatModel(RetryingChatModel(inner), ArrowFsStore(str(tmp_path / "cache")))
    assert outer.holds_engine and outer.capacity() == "one engine's capacity" and outer.name == "mine/e"
    assert outer.default_params.max_tokens == 7 and outer.cache_identity() == inner.cache_identity()
    assert outer.release() and outer.released and inner.released
    asyncio.run(outer.close())
    assert inner.closed
