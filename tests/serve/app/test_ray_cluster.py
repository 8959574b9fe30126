"""Ray's own security stays on, and a stale Ray address file fails fast (no cluster needed)."""
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from esc_eval.serve.app import ray_cluster
from esc_eval.serve.app.ray_cluster import StaleRayAddressError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def clean_auth_env(monkeypatch, tmp_path):
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ADDRESS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "ray" / "auth_token"))
    return tmp_path


def test_prepare_auth_never_disables_and_respects_an_explicit_choice(clean_auth_env, monkeypatch):
    refreshed = []
    monkeypatch.setattr(ray_cluster, "_refresh_ray_config", lambda: refreshed.append(1))  # keep this process's Ray config
    assert ray_cluster.prepare_auth(None) == "" and "RAY_AUTH_MODE" not in os.environ  # Ray's default: token
    assert ray_cluster.prepare_auth("10.0.0.5:6379") == ""  # no token provided: Ray's own behaviour
    monkeypatch.setenv("RAY_AUTH_TOKEN", "abc")
    assert ray_cluster.prepare_auth("10.0.0.5:6379") == "token" and os.environ["RAY_AUTH_MODE"] == "token"
    assert refreshed == [1]  # Ray's cached config re-read, else no token is sent
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert ray_cluster.prepare_auth("10.0.0.5:6379") == "disabled"


def test_ray_start_env_asks_for_token_auth_with_a_private_token(clean_auth_env, monkeypatch):
    env = ray_cluster.start_env()
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert env["RAY_AUTH_MODE"] == "token" and token.stat().st_size > 16
    assert "RAY_AUTH_MODE" not in os.environ  # this process joins with "auto": Ray turns token mode on itself
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    before = token.read_text()
    ray_cluster.start_env()
    assert token.read_text() == before  # an existing token is kept (workers and clients share it)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert ray_cluster.start_env()["RAY_AUTH_MODE"] == "disabled"


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stale_address_file_fails_fast_or_is_forgotten(clean_auth_env, monkeypatch):
    f = clean_auth_env / "ray_current_cluster"
    f.write_text(f"127.0.0.1:{_dead_port()}")
    monkeypatch.setattr(ray_cluster, "address_file", lambda: f)
    t = time.monotonic()
    with pytest.raises(StaleRayAddressError, match="does not answer"):
        ray_cluster.live_local_address()
    from esc_eval.serve.app.deploy import connect

    with pytest.raises(ConnectionError, match="stale"):
        connect(None, start_local=False)  # `serve status/down`: one line, no retry loop
    assert time.monotonic() - t < 10
    ray_cluster.forget_stale_address()
    assert not f.exists() and ray_cluster.live_local_address() is None


def test_live_address_file_is_used(clean_auth_env, monkeypatch):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        f = clean_auth_env / "ray_current_cluster"
        f.write_text(f"127.0.0.1:{srv.getsockname()[1]}")
        monkeypatch.setattr(ray_cluster, "address_file", lambda: f)
        assert ray_cluster.live_local_address() == f.read_text()


def test_serve_binds_localhost_by_default():
    from esc_eval.serve.app.application import ServeConfig

    assert ServeConfig.model_fields["host"].default == "127.0.0.1"


def test_workers_that_can_never_be_placed_fail_at_once_saying_why(monkeypatch):
    import ray

    from esc_eval.sim.pool.on_ray import PlacementError, check_placeable, describe_resources

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": 0.0})
    with pytest.raises(PlacementError, match=r"3 workers can never be placed: need 3 CPU in total, the cluster has 2 \(0 free\)"):
        check_placeable({"CPU": 3.0, "GPU": 0.0}, 3)
    check_placeable({"CPU": 2.0, "GPU": 0.0}, 2)  # fits once the holder lets go: the timed wait decides
    assert "need 1 GPU in total, the cluster has 0" in describe_resources({"GPU": 1.0})
