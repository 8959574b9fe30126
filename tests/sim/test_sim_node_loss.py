"""Node loss on a real two-node Ray cluster on this machine (slow).

A head node and a second node are started as separate raylets (ray.cluster_utils.Cluster starts the
same GCS and raylet processes `ray start` does), each with one CPU, so the simulation's two worker
actors land one per node. `esc-eval simulate --config` (a separate driver process, joined to the
cluster by `execution.ray_address`) runs fake-backend dialogues; mid-run the second node's raylet
is killed with SIGKILL, which takes its worker processes down with it. The lost worker cannot be
restarted (no free CPU left on the cluster), so the pool must re-send its chunks to the worker on
the head, which resumes them from the lost worker's turn checkpoints. Every dialogue must end up
in exactly one row, each ok or failed with a reason."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esc_eval.sim.checkpoints import LOG_GLOB

REPO = Path(__file__).resolve().parents[2]
DIALOGUES = 24


@pytest.fixture
def two_node_cluster():
    from ray import ray_constants
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    second = cluster.add_node(num_cpus=1)
    raylet = second.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process
    try:
        yield cluster, raylet
    finally:
        cluster.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_losing_a_node_mid_run_leaves_every_dialogue_exactly_once(two_node_cluster, tmp_path):
    from esc_eval.sim.bench.simulation import synthetic_cards
    from esc_eval.sim.cards import write_cards

    cluster, raylet = two_node_cluster
    write_cards(synthetic_cards(DIALOGUES), tmp_path / "cards.json")
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"""
cards: {tmp_path / 'cards.json'}
role: {{model: "fake/seeker?latency=0.25"}}
targets: [{{model: "fake/echo?latency=0.25"}}]
execution:
  ray_address: "{cluster.address}"
  workers: 2
  num_cpus_per_worker: 1
  concurrency: 4
  chunk_size: 2
  flush_rows: 1
  placement_timeout_s: 60
  log_to_driver: false
""")
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "simulate", "--config", str(cfg), "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    # Both workers are writing turn checkpoints: the second node holds dialogues in flight.
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        logs = list((out / "checkpoints").glob(LOG_GLOB)) if (out / "checkpoints").is_dir() else []
        if len(logs) >= 2 and all(p.stat().st_size > 0 for p in logs):
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    time.sleep(1.0)
    os.kill(raylet.pid, signal.SIGKILL)
    killed_at = time.time()
    try:
        output, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, output[-3000:]
    assert "lost" in output, output[-3000:]  # the pool said it lost a worker and re-sent its chunks

    rows = [r for p in sorted((out / "dialogues").glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]
    ids = [r["dialogue_id"] for r in rows]
    assert len(ids) == len(set(ids)) == DIALOGUES  # exactly once, nothing missing
    for r in rows:
        assert r["status"] == "ok" and r["n_turns"] == 11 or (r["status"] == "failed" and r["termination_reason"]), r
    assert sum(r["status"] == "ok" for r in rows) == DIALOGUES  # fake models do not fail: all complete
    assert not list((out / "checkpoints").glob(LOG_GLOB))
    assert time.time() - killed_at < 200
