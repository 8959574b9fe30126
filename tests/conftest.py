"""Shared fixtures: the shared data folder, a local Ray, the embedded vLLM engine.

Engines and Ray start once per test session (an engine start costs ~25-45 s on CPU).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# Our code always calls ray.init explicitly; without this, a background thread left by one test
# (a Serve handle's metrics pusher) can silently start a new local Ray under a later test.
os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, which CI has and a user's clone may not."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not present at {path} (only in the project's CI and dev machines)")
    return path


@pytest.fixture
def ray_local():
    """A local Ray (2 CPUs, no dashboard) for one test, shut down after it: other tests check
    that bad input fails before Ray starts, so none may be left running in this process."""
    import ray

    started = False
    if not ray.is_initialized():
        # address="local": a fresh instance, never a cluster another test left behind
        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}})
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="session")
def embedded_model():
    """The real vLLM-CPU engine with the embedded SmolLM2, in this process."""
    from esc_eval.serve.vllm_engine import VLLMChatModel, shutdown_engines

    model = VLLMChatModel("embedded")
    model.host.ensure_started()
    yield model
    shutdown_engines()
