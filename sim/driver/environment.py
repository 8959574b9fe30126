"""The driver's environment, passed on to the workers and engines of a job: what its engines read
(the KV cache, vLLM's log level, the model cache and paths) must be the same in every worker as in the
process that launched the job, and the engines' own logs stay in Ray's files unless asked for."""
from __future__ import annotations

import os

from esc_eval.serve.devices.cpu import KV_CACHE_ENV

# Environment variables that workers and engines must see as the driver does.
ENGINE_ENV_KEYS = (KV_CACHE_ENV, "VLLM_LOGGING_LEVEL", "ESC_EVAL_CACHE", "ESC_EVAL_MODEL_PATHS",
                   "ESC_EVAL_MODEL_PATHS_FILE", "HF_HUB_OFFLINE")


def driver_env() -> dict[str, str]:
    """The driver's values of ENGINE_ENV_KEYS (those set)."""
    return {k: os.environ[k] for k in ENGINE_ENV_KEYS if k in os.environ}


def pass_driver_env(execution, verbose: bool = False) -> None:
    """Give the workers of an ExecutionConfig the driver's engine environment; engines are chatty: their
    logs stay in Ray's log files unless `verbose` (esc-eval --verbose)."""
    execution.env = {**execution.env, **driver_env()}
    execution.log_to_driver = execution.log_to_driver and verbose


__all__ = ["ENGINE_ENV_KEYS", "driver_env", "pass_driver_env"]
