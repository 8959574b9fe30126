"""A 30-round dialogue on the embedded model (role and target), `esc-eval simulate` killed with -9
once the dialogue's turn checkpoints reach round 27, then resumed: the row is written exactly once,
with all 30 rounds, and the resume asked the models only for the rounds the kill lost (turn-level
resume from a late round, not a restart).

The killed run is a process of its own (its own engine); the resume runs in this process on the
session's engine, with the same config."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from esc_eval.sim.runs.checkpoints import read_folder
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
ROUNDS, KILL_AT = 30, 27
pytestmark = [pytest.mark.slow, pytest.mark.beside]


def _config(tmp_path: Path) -> Path:
    # short turns: the rounds and the kill are what this proves, not long replies (decode is its time)
    side = {"model": "vllm/embedded", "params": {"max_tokens": 8}}
    # seeker_stop off: all 30 rounds are what this resumes (on by default past 5 rounds, the seeker could end it)
    cfg = {"cards": "sample", "languages": ["en"], "limit": 1, "rounds": ROUNDS, "seeker_stop": False, "role": side, "targets": [side],
           "execution": {"executor": "local", "log_to_driver": False}}
    path = tmp_path / "sim.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _turns(out: Path) -> int:
    folder = out / "checkpoints"
    return max((len(t) for t in read_folder(folder).values()), default=0) if folder.exists() else 0


def test_a_30_round_dialogue_killed_at_round_27_resumes_exactly_once(embedded_model, tmp_path):
    config, out = _config(tmp_path), tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "simulate", "-c", str(config), "-o", str(out)],
                            cwd=REPO, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        # the opener and two turns a round: round 27 done at 1 + 2 x 27 turns
        while time.monotonic() < deadline and proc.poll() is None and _turns(out) < 1 + 2 * KILL_AT:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(RunFolder(out).iter_rows("dialogues")) == [], "the kill should land before the dialogue's end"
    saved = max(read_folder(out / "checkpoints").values(), key=len)
    on_disk = len(saved)
    assert 1 + 2 * KILL_AT <= on_disk < 1 + 2 * ROUNDS, on_disk

    from esc_eval.serve.config import load_config
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation

    result = run_simulation(load_config(config, SimulationConfig), out)
    (row,) = list(RunFolder(out).iter_rows("dialogues"))
    assert row["status"] == "ok" and row["n_turns"] == 1 + 2 * ROUNDS and row["termination_reason"] != "seeker_ended"
    assert result["items"] == 1 and result["failed"] == 0
    # only the turns the kill lost were asked for: one call per missing turn, not the 60 of a restart
    assert result["model_calls"] == 1 + 2 * ROUNDS - on_disk, (result["model_calls"], on_disk)
    assert [t["text"] for t in row["turns"][:on_disk]] == [t["text"] for t in saved]  # the saved turns, kept
    manifest = json.loads((out / "manifest.json").read_text())
    starts = [ev for ev in manifest["events"] if ev["kind"] == "simulation_start"]
    assert len(starts) == 2 and [ev["kind"] for ev in manifest["events"]].count("simulation_end") == 1
