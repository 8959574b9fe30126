"""serve/engines/vllm_compat.py: the replicas' setup hook as Ray Serve LLM and Ray see it."""
from __future__ import annotations

import pytest

pytest.importorskip("ray.serve.llm")


class _NoJobContext:
    runtime_env: dict = {}  # a driver with no job runtime_env (what get_runtime_context() gives after ray.init)


def _replica_runtime_env(monkeypatch, runtime_env: dict) -> dict:
    """The replica actor's runtime_env as Ray Serve LLM builds it for an LLMConfig with `runtime_env`
    (its own get_deployment_options; no Ray started)."""
    import ray
    from ray.llm._internal.serve.core.server.llm_server import LLMServer
    from ray.serve.llm import LLMConfig

    monkeypatch.setattr(ray, "get_runtime_context", lambda: _NoJobContext())
    cfg = LLMConfig(model_loading_config={"model_id": "m", "model_source": "/nonexistent"}, runtime_env=runtime_env)
    return LLMServer.get_deployment_options(cfg)["ray_actor_options"]["runtime_env"]


def test_a_process_under_the_replica_may_ray_init_with_its_runtime_env(monkeypatch):
    # vLLM's Ray executor (a GPU engine) calls ray.init with the replica's runtime_env; Ray checks the
    # hook field against the hook variable there. On an H200 the variable alone was refused.
    from ray._private.runtime_env.setup_hook import upload_worker_process_setup_hook_if_needed

    from esc_eval.serve.engines.vllm_compat import SETUP_HOOK, SETUP_HOOK_ENV, with_replica_hook

    env = _replica_runtime_env(monkeypatch, with_replica_hook({"env_vars": {"KEEP": "1"}}))
    assert env["env_vars"] == {"KEEP": "1", SETUP_HOOK_ENV: SETUP_HOOK}
    assert upload_worker_process_setup_hook_if_needed(dict(env), worker=None)["worker_process_setup_hook"] == SETUP_HOOK

    variable_only = _replica_runtime_env(monkeypatch, {"env_vars": {SETUP_HOOK_ENV: SETUP_HOOK}})
    with pytest.raises(RuntimeError, match="Conflicting worker_process_setup_hook"):
        upload_worker_process_setup_hook_if_needed(dict(variable_only), worker=None)
