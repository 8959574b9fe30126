"""A local Ray that misses one of Ray's 30 s start-up waits (its raylet's registration, the GCS's
port file; a busy 2-core machine) is started once more (sim/pool/ray_start.py, through ensure_ray),
and the GCS's port gets 120 s unless the environment says otherwise; any other start error, or a
second timeout, is the caller's."""
from __future__ import annotations

import os

import pytest

from esc_eval.sim.pool import on_ray
from esc_eval.sim.pool.config import ExecutionConfig

TIMEOUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                    "failed to startup or the GCS has become overloaded.")
GCS_PORT_TIMEOUT = RuntimeError("Timed out waiting for file /tmp/ray/session_x/gcs_server_port_4906743281c38b2cda9c")


@pytest.fixture
def fake_ray(monkeypatch):
    import ray

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr("esc_eval.serve.app.ray_cluster.prepare_auth", lambda address: None)
    monkeypatch.setattr("esc_eval.serve.app.ray_cluster.forget_stale_address", lambda: None)

    def script(*errors):
        left = list(errors)

        def init(**kwargs):
            calls.append("init")
            if left:
                raise left.pop(0)

        monkeypatch.setattr(ray, "init", init)
        return calls

    return script


@pytest.mark.parametrize("timeout", [TIMEOUT, GCS_PORT_TIMEOUT], ids=["raylet", "gcs-port"])
def test_a_start_timeout_is_retried_once(fake_ray, timeout):
    calls = fake_ray(timeout)
    on_ray.ensure_ray(ExecutionConfig())
    assert calls == ["init", "shutdown", "init"]


def test_the_gcs_port_gets_longer_than_rays_30_s_unless_the_environment_says(fake_ray, monkeypatch):
    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    fake_ray()
    on_ray.ensure_ray(ExecutionConfig())
    assert os.environ["RAY_gcs_server_port_wait_time_s"] == "120"
    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "45")
    on_ray.ensure_ray(ExecutionConfig())
    assert os.environ["RAY_gcs_server_port_wait_time_s"] == "45"


def test_a_second_timeout_or_another_error_is_raised(fake_ray):
    calls = fake_ray(TIMEOUT, TIMEOUT)
    with pytest.raises(Exception, match="timed out during startup"):
        on_ray.ensure_ray(ExecutionConfig())
    assert calls == ["init", "shutdown", "init"]
    calls = fake_ray(RuntimeError("no space left on device"))
    calls.clear()
    with pytest.raises(RuntimeError, match="no space left"):
        on_ray.ensure_ray(ExecutionConfig())
    assert calls == ["init"]
