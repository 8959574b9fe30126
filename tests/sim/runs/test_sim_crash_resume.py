"""kill -9 the driver mid-run, resume: every dialogue present exactly once."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[3]


def write_config(tmp_path, executor):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"""
cards: {tmp_path / 'cards.json'}
role: {{model: "fake/seeker?latency=0.02"}}
targets: [{{model: "fake/echo?latency=0.02"}}]
execution: {{executor: {executor}, workers: 1, concurrency: 16, chunk_size: 4, flush_rows: 8, flush_seconds: 0.5}}
""")
    from esc_eval.sim.bench.loops.simulation import synthetic_cards
    from esc_eval.sim.cards.card import write_cards

    write_cards(synthetic_cards(120), tmp_path / "cards.json")
    return cfg


def start(cfg, out):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "simulate", "--config", str(cfg), "--out", str(out)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def rows(out):
    return [r for p in sorted((out / "dialogues").glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.beside])])
def test_kill_driver_then_resume_exactly_once(tmp_path, executor):
    cfg, out = write_config(tmp_path, executor), tmp_path / "run"
    proc = start(cfg, out)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "dialogues").glob("part-*.parquet"))) < 2:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started (local Ray included)
    proc.wait()
    partial = rows(out)
    assert 0 < len(partial) < 120, "kill should land mid-run"
    done = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "--config", str(cfg), "--out", str(out)],
                          cwd=REPO, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    final = rows(out)
    ids = [r["dialogue_id"] for r in final]
    assert len(ids) == 120 and len(set(ids)) == 120
    assert all(r["status"] == "ok" and r["n_turns"] == 11 for r in final)
