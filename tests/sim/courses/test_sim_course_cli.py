"""A course through the CLI, each command a process of its own, on the fake backends: `esc-eval
simulate --sessions 3` killed with -9 in session 2, then resumed: it continues in session 2 at its last
checkpointed turn (session 1 and session 2's saved turns are not asked again, and keep their times);
then `esc-eval score` with continuity and `esc-eval report`, whose courses section reads the run."""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from esc_eval.sim.jobs.simulation_courses import SESSION_RECORD
from esc_eval.sim.runs.checkpoints import read_folder
from esc_eval.sim.runs.records import session_dialogue_id
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
SEVEN = "fluency,expression,empathy,information,skillful,humanoid,overall"


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RAY_AUTH_MODE": "disabled"})


def _saved(out: Path) -> dict:
    folder = out / "checkpoints"
    return read_folder(folder) if folder.exists() else {}


def test_a_course_killed_in_session_2_resumes_there_then_scores_and_reports(tmp_path):
    # one card, 3 sessions of 2 rounds, the target's own notes: 12 turns and 4 calls between sessions
    slow = "latency=0.25"
    cfg = {"cards": "sample", "languages": ["en"], "limit": 1, "rounds": 2, "sessions": 3, "memory": "summary",
           "role": {"model": f"fake/seeker?{slow}"}, "targets": [{"model": f"fake/echo?{slow}"}],
           "execution": {"executor": "local", "flush_seconds": 0.2}}
    config, out = tmp_path / "sim.yaml", tmp_path / "run"
    config.write_text(yaml.safe_dump(cfg))
    from esc_eval.sim.cards.card import sample_cards

    card = sample_cards(language="en")[0].id
    s2 = session_dialogue_id(card, f"fake/echo?{slow}", f"fake/seeker?{slow}", "official", 0, 2)
    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "simulate", "-c", str(config), "-o", str(out)],
                            cwd=REPO, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and len(_saved(out).get(s2, [])) < 2:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        killed_at = dt.datetime.now(dt.timezone.utc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(RunFolder(out).iter_rows("dialogues")) == [], "the kill should land before the course's end"
    saved = _saved(out)
    records = [saved[k][-1] for k in saved if k.endswith(SESSION_RECORD)]
    assert sorted(r["index"] for r in records) == [1, 2] and not [r for r in records if r["index"] == 2][0]["ended"]
    # what the killed run had asked for: session 1's 4 turns, session 2's update and notes, its saved turns
    asked = sum(len(r["calls"]) for r in records) + sum(len(t) - 1 for k, t in saved.items() if not k.endswith(SESSION_RECORD))
    s2_turns = [t["text"] for t in saved[s2]]

    resumed = cli("simulate", "-c", str(config), "-o", str(out))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    got = sorted(RunFolder(out).read("dialogues").to_pylist(), key=lambda r: r["session"])
    assert [(r["session"], r["status"], r["n_turns"]) for r in got] == [(1, "ok", 5), (2, "ok", 5), (3, "ok", 5)]
    assert got[0]["finished_at"] < killed_at and got[1]["started_at"] < killed_at < got[2]["started_at"]
    assert [t["text"] for t in got[1]["turns"][:len(s2_turns)]] == s2_turns
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["simulation"]["last"]["model_calls"] == 12 + 4 - asked, asked  # only what the kill lost

    scored = cli("score", "-i", str(out), "-j", "fake/judge", "--dimensions", SEVEN + ",continuity")
    assert scored.returncode == 0, scored.stderr[-3000:]
    dims = [s["dimension"] for s in RunFolder(out).read("scores").to_pylist()]
    assert len(dims) == 3 * 7 + 2 and dims.count("continuity") == 2  # sessions 2 and 3 only
    report = cli("report", str(out))
    assert report.returncode == 0, report.stderr[-3000:]
    md = (out / "report" / "report.md").read_text()
    part = md.split("## Courses of sessions (beyond the paper)")[1].split("\n## ")[0]
    assert "1 courses, 3 sessions" in part and "Continuity by session" in part
    change = part.split("**Change from the first session to the last**")[1]
    assert f"| en | fake/echo?{slow} | summary | fake/judge:logprob:official | 1 |" in change
