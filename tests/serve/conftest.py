"""Fixtures of the serve tests."""
from __future__ import annotations

import sys
import types

import pytest


@pytest.fixture
def fake_vllm(monkeypatch):
    """Stand-ins for vllm.engine.arg_utils / vllm.v1.engine.async_llm that record the engine
    arguments an in-process engine starts with: `fake_vllm(error, seen)` (error raised at start)."""

    def install(error: Exception | None, seen: dict) -> dict:
        arg_utils = types.ModuleType("vllm.engine.arg_utils")
        async_llm = types.ModuleType("vllm.v1.engine.async_llm")

        class AsyncEngineArgs:
            def __init__(self, model, **kw):
                seen.update(kw, model=model)

        class AsyncLLM:
            @classmethod
            def from_engine_args(cls, args):
                if error is not None:
                    raise error
                return cls()

            def shutdown(self):
                pass

        arg_utils.AsyncEngineArgs = AsyncEngineArgs
        async_llm.AsyncLLM = AsyncLLM
        for name in ("vllm", "vllm.engine", "vllm.v1", "vllm.v1.engine"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "vllm.engine.arg_utils", arg_utils)
        monkeypatch.setitem(sys.modules, "vllm.v1.engine.async_llm", async_llm)
        import transformers

        monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", classmethod(lambda cls, *a, **k: object()))
        return seen

    return install
