"""Turn-level resume end to end: kill -9 the `esc-eval simulate` driver mid-dialogue (real turn
checkpoints written by the run, not hand-made ones), resume, and check that each resumed dialogue
continued at its checkpointed turn: its first turns are byte-identical to the checkpoint (timings
included, which a re-generated turn would not reproduce) and only the missing turns were called."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from esc_eval.sim.runs.checkpoints import read_folder

REPO = Path(__file__).resolve().parents[3]
TOTAL_TURNS = 11


def test_kill_driver_mid_dialogue_then_resume_continues_at_the_checkpointed_turn(tmp_path):
    from esc_eval.sim.bench.loops.simulation import synthetic_cards
    from esc_eval.sim.cards.card import write_cards

    write_cards(synthetic_cards(6), tmp_path / "cards.json")
    cfg = tmp_path / "sim.yaml"
    # Slow fake models and a large flush_rows: no row is written before the kill, only checkpoints.
    cfg.write_text(f"""
cards: {tmp_path / 'cards.json'}
role: {{model: "fake/seeker?latency=0.15"}}
targets: [{{model: "fake/echo?latency=0.15"}}]
execution: {{executor: local, concurrency: 3, flush_rows: 1000, flush_seconds: 600, turn_checkpoints: true}}
""")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "esc_eval.cli", "simulate", "--config", str(cfg), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    ckpt_dir = out / "checkpoints"

    def checkpoints() -> dict[str, list[dict]]:
        return read_folder(ckpt_dir)  # complete lines only: a line being written is not read

    deadline = time.time() + 120
    while time.time() < deadline and not any(len(t) >= 5 for t in checkpoints().values()):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = checkpoints()  # what the killed driver left on disk
    assert any(5 <= len(t) < TOTAL_TURNS for t in saved.values()), f"kill should land mid-dialogue: {saved.keys()}"
    assert not list((out / "dialogues").glob("part-*.parquet")) if (out / "dialogues").is_dir() else True

    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["dialogue_id"]: r for p in sorted((out / "dialogues").glob("part-*.parquet"))
            for r in pq.read_table(p).to_pylist()}
    assert len(rows) == 6 and all(r["status"] == "ok" and r["n_turns"] == TOTAL_TURNS for r in rows.values())
    for did, turns in saved.items():
        final = rows[did]["turns"]
        assert json.dumps(final[: len(turns)], sort_keys=True) == json.dumps(turns, sort_keys=True), did
        assert [t["index"] for t in final] == list(range(TOTAL_TURNS))
    # Only the missing turns were generated on resume (the opener is not a model call).
    manifest = json.loads((out / "manifest.json").read_text())
    expected_calls = sum(TOTAL_TURNS - max(len(saved.get(did, [])), 1) for did in rows)
    assert manifest["simulation"]["last"]["model_calls"] == expected_calls
    assert not list(ckpt_dir.iterdir())  # dropped once the rows are written
