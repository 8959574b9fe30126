"""GPU time of Serve replicas (serve/app/replica_meter.py) from a scripted serve.status() and clock."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from esc_eval.serve.app.replica_meter import ReplicaMeter, replica_counts


def _status(role: dict, target: dict):
    deployments = {"LLMServer:esc-role": SimpleNamespace(replica_states=role),
                   "LocalLoraLLMServer:qwen1_5-7b-chat": SimpleNamespace(replica_states=target),
                   "OpenAiIngress": SimpleNamespace(replica_states={"RUNNING": 1})}
    return SimpleNamespace(applications={"run": SimpleNamespace(deployments=deployments)})


def test_replicas_in_any_state_hold_their_gpus():
    counts = replica_counts(_status({"RUNNING": 1, "STARTING": 1}, {"STOPPING": 1}), "run",
                            ["esc-role", "qwen1.5-7b-chat"])
    assert counts == {"esc-role": 2, "qwen1.5-7b-chat": 1}
    assert replica_counts(SimpleNamespace(applications={}), "run", ["esc-role"]) == {"esc-role": 0}


def test_replica_seconds_integrate_the_counts_between_samples():
    script = [(0, {}, {}), (10, {"STARTING": 1}, {"STARTING": 1}), (20, {"RUNNING": 2}, {"RUNNING": 1}),
              (30, {}, {})]  # deployed, up, scaled up, deleted
    clock = iter(t for t, _, _ in script)
    states = iter(_status(r, t) for _, r, t in script)
    meter = ReplicaMeter("run", {"esc-role": 0.6261, "qwen1.5-7b-chat": 0.3739}, status=lambda: next(states),
                         clock=lambda: next(clock))
    for _ in script:
        meter.sample()
    totals = meter.totals()
    assert totals["esc-role"]["replica_seconds"] == 0 * 10 + 1 * 10 + 2 * 10
    assert totals["esc-role"]["gpu_seconds"] == pytest.approx(30 * 0.6261)
    assert totals["qwen1.5-7b-chat"] == {"replica_seconds": 20.0, "gpus_per_replica": 0.3739,
                                         "gpu_seconds": pytest.approx(20 * 0.3739), "most_replicas": 1}


def test_a_failing_status_call_keeps_the_last_count():
    calls = iter([_status({"RUNNING": 1}, {}), RuntimeError("controller restarting"), _status({}, {})])
    clock = iter([0.0, 5.0, 10.0])

    def status():
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    meter = ReplicaMeter("run", {"esc-role": 1.0, "qwen1.5-7b-chat": 1.0}, status=status, clock=lambda: next(clock))
    meter.sample()
    meter.sample()  # fails: skipped (its clock reading unused)
    meter.sample()
    assert meter.totals()["esc-role"]["replica_seconds"] == 5.0  # 1 replica from 0 until the next good sample


def test_the_background_thread_samples_until_stopped():
    import time

    n = {"calls": 0}

    def status():
        n["calls"] += 1
        return _status({"RUNNING": 1}, {})

    meter = ReplicaMeter("run", {"esc-role": 0.5}, interval_s=0.01, status=status).start()
    time.sleep(0.1)
    meter.stop()
    assert n["calls"] >= 3 and meter.totals()["esc-role"]["replica_seconds"] > 0.05
