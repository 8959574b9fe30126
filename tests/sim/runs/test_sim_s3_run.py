"""A whole run in object storage, through the CLI, on a real S3-protocol server (moto, auth on):
simulate with Ray workers writing s3:// directly, kill -9 of the driver mid-run, resume, score,
report, view and export, every one on the s3:// folder; every dialogue and score exactly once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from esc_eval.sim.runs.checkpoints import read_folder
from esc_eval.sim.runs.open import open_storage
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
CARDS = 60


def cli(*args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _in_flight(store, uri: str) -> int:
    """Dialogues part-way through (2 to 8 of 11 turns) in the bucket's checkpoints, without a row (0
    before any row). A finished dialogue awaiting its row's flush does not count: the workers, which
    outlive the driver's kill by a moment, may still write its row."""
    if not store.list("dialogues", ".parquet"):
        return 0
    turns = read_folder("checkpoints", store)
    done = set(RunFolder(uri, create=False).read("dialogues", columns=["dialogue_id"]).column("dialogue_id").to_pylist())
    return sum(1 for d, t in turns.items() if 2 <= len(t) <= 8 and d not in done)


@pytest.mark.slow
@pytest.mark.beside
@pytest.mark.timeout(600)
def test_simulate_kill_resume_score_report_view_export_on_s3(s3_env, s3_uri, tmp_path):
    from esc_eval.sim.bench.loops.simulation import synthetic_cards
    from esc_eval.sim.cards.card import write_cards

    write_cards(synthetic_cards(CARDS), tmp_path / "cards.json")
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"""
cards: {tmp_path / 'cards.json'}
role: {{model: "fake/seeker?latency=0.3"}}
targets: [{{model: "fake/echo?latency=0.3"}}]
execution: {{workers: 2, concurrency: 8, chunk_size: 4, flush_rows: 4, flush_seconds: 0.5, log_to_driver: false}}
""")
    env = {**os.environ, **s3_env["env"], "RAY_AUTH_MODE": "disabled"}
    store = open_storage(s3_uri)
    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "simulate", "-c", str(cfg), "-o", s3_uri], cwd=REPO,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    # Kill once rows are in the bucket and at least two dialogues are part-way through in its checkpoints
    # (which go to an object store once a second, so rows alone do not mean that).
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and _in_flight(store, s3_uri) < 2:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the local Ray it started, workers included
    proc.wait()
    partial = RunFolder(s3_uri, create=False).read("dialogues", columns=["dialogue_id"]).num_rows
    assert 0 < partial < CARDS, "the kill should land mid-run"
    assert store.list("checkpoints", ".log"), "dialogues in flight left their turns in the bucket"

    done = cli("simulate", "-c", str(cfg), "-o", s3_uri, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["rows_checked"] == result["items"] == CARDS - result["skipped_done"]
    run = RunFolder(s3_uri, create=False)
    ids = run.read("dialogues", columns=["dialogue_id"]).column("dialogue_id").to_pylist()
    assert len(ids) == len(set(ids)) == CARDS
    assert not store.list("checkpoints", ".log")
    # Workers that resumed a dialogue from the bucket's checkpoints made fewer than its 10 calls.
    assert result["model_calls"] < 10 * result["items"]

    scored = cli("score", "-i", s3_uri, "--judge", "fake/judge", env=env)
    assert scored.returncode == 0, scored.stderr[-3000:]
    keys = run.read("scores", columns=["dialogue_id", "dimension", "judge"]).to_pylist()
    assert len(keys) == len({tuple(k.values()) for k in keys}) == 7 * CARDS

    report = cli("report", s3_uri, "--n-boot", "0", env=env)
    assert report.returncode == 0, report.stderr[-3000:]
    assert json.loads(report.stdout)["html"] == f"{s3_uri}/report/report.html"
    assert b"<html" in store.read("report/report.html") and store.list("report/figures", ".png")

    export = cli("export", s3_uri, "--official", str(tmp_path / "official"), env=env)
    assert export.returncode == 0, export.stderr[-3000:]
    official = json.loads(export.stdout)
    assert official["n_dialogues"] == CARDS and official["scores"]
    assert sum(len(json.loads(Path(f).read_text())) for f in official["dialogues"]) == CARDS

    from esc_eval.analysis.web.viewer import ResultsViewer

    viewer = ResultsViewer([s3_uri])
    page = viewer.query(limit=5)
    assert page["total"] == CARDS
    first = viewer.dialogue(page["rows"][0]["run"], page["rows"][0]["dialogue_id"])
    assert len(first["turns"]) == 11 and len(first["scores"]) == 7
    assert viewer.query(q="echo:")["total"] == CARDS  # full-text search streams the bucket's parts

    manifest = store.read("manifest.json").decode()
    for secret in (s3_env["env"]["AWS_SECRET_ACCESS_KEY"], s3_env["env"]["AWS_ACCESS_KEY_ID"]):
        assert secret not in manifest
