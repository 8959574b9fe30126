"""Session-wide fixtures: the shared data folder, a local Ray, the embedded vLLM engine.

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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, which CI has and a user's clone may not."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not present at {path} (only in the project's CI and dev machines)")
    return path


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray for the session (2 CPUs, no dashboard)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True,
                 runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING"}})
    yield ray
    # left running for other session fixtures; ray shuts down at interpreter exit


@pytest.fixture(scope="session")
def embedded_model():
    """The real vLLM-CPU engine with the embedded SmolLM2, in this process."""
    from serve.vllm_engine import VLLMChatModel, shutdown_engines

    model = VLLMChatModel("embedded")
    model.host.ensure_started()
    yield model
    shutdown_engines()
