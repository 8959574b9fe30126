"""`esc-eval score --batch` in separate processes against the batch stand-in, killed with kill -9 where
it hurts (with a batch in flight and another one's create on the wire) and started again: every
score row exactly once, no batch made twice (the stand-in counts them), no request run twice; bad
input is one line before anything is written (the command in this process)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "serve"))
from batch_standins import BatchOpenAI, write_dialogues  # noqa: E402

from esc_eval.sim.batching.book import BatchBook  # noqa: E402
from esc_eval.sim.runs.runfolder import RunFolder  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def start(run: Path, cfg: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "score", "-i", str(run), "-c", str(cfg), "--batch"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_for(what, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not what():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def finish(run: Path, cfg: Path, env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "esc_eval.cli", "score", "-i", str(run), "-c", str(cfg), "--batch"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def physical_rows(run: Path) -> list[dict]:
    return [r for p in sorted((run / "scores").glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


# Two processes that import LiteLLM and torch (about 10 s each alone, 30 s beside the slow tests' engines):
# slow, and beside (light: no engine, no Ray).
@pytest.mark.slow
@pytest.mark.beside
@pytest.mark.light  # no engine, no Ray: starts while the heavy tests run (tests/slow_apart.py)
def test_killed_with_a_batch_in_flight_and_one_in_its_create_every_score_once_no_batch_twice(tmp_path):
    # the first batch stays in progress; the second one's create is held: made at the stand-in, never answered
    srv = BatchOpenAI(key="sk-local", polls=10**6, create_delay_s=120, hold_create_at=2).start()
    try:
        run, cfg = tmp_path / "run", tmp_path / "score.yaml"
        write_dialogues(run, 6)
        cfg.write_text("judge: {model: {model: openai/gpt-4}}\nexecution: {executor: local}\n"
                       "batch: {poll_s: 0.05, max_requests: 14}\n")
        env = {**os.environ, "OPENAI_BASE_URL": srv.base_url + "/v1", "OPENAI_API_KEY": "sk-local"}
        proc = start(run, cfg, env)
        wait_for(lambda: srv.create_seen == 2, proc)
        kill(proc)
        first, second = BatchBook(RunFolder(run)).records()
        assert first["state"] == "submitted" and second["state"] == "pending" and second["create_started"]
        assert len(srv.created) == 2 and physical_rows(run) == [] and srv.executed == {}
        # started again: it follows the first, finds the second (never told its id), sends the third
        srv.create_delay_s, srv.polls = 0, 1
        err = finish(run, cfg, env)
    finally:
        srv.stop()
    rows = physical_rows(run)
    keys = [(r["dialogue_id"], r["judge"], r["dimension"]) for r in rows]
    assert len(keys) == len(set(keys)) == 42 and all(r["parse_status"] == "ok" and r["transport"] == "batch" for r in rows)
    assert len(srv.created) == 3 and srv.repeated_lines() == 0 and sum(srv.executed.values()) == 42
    assert [r["state"] for r in BatchBook(RunFolder(run)).records()] == ["ended"] * 3
    assert "score rows 42/42" in err and "batches 3 (3 completed)" in err


def test_bad_input_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    from esc_eval.cli.app import main

    run = tmp_path / "run"
    write_dialogues(run, 1)
    before = sorted(p.name for p in run.rglob("*"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    for args, words in ((["--judge", "vllm/embedded", "--batch"], "error: --batch: model 'vllm/embedded' is no API "
                                                                   "model"),
                        (["--judge", "openai/gpt-4", "--batch-fallback", "online"], "error: --batch-fallback says"),
                        (["--judge", "openai/gpt-4", "--batch", "--batch-fallback", "later"],
                         "error: config: field 'batch.fallback': Input should be 'batch' or 'online'")):
        monkeypatch.setattr(sys, "argv", ["esc-eval", "score", "-i", str(run), *args])  # as the console script runs
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main()
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert e.value.code == 2 and len(lines) == 1 and lines[0].startswith(words), lines
    assert sorted(p.name for p in run.rglob("*")) == before
