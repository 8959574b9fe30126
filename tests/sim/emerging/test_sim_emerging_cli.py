"""Risk that emerges mid-conversation as a user runs it on the fake backends, each command in its own
process: `simulate` with the shipped scenarios, `score --reply-safety`, `analysis safety` (then the
report's section from the same rows); and bad input refused in one line with nothing written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
JUDGE = "fake/judge?marks=[SAFE]:4/0,[MISS]:1/1"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=300)


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    return lines[0]


def test_simulate_rate_the_replies_and_read_them(tmp_path):
    sim = tmp_path / "sim.yaml"
    sim.write_text("""
cards: emerging_risk
card_ids: [risk-en-delusion-01, risk-zh-boundaries-03]
rounds: 3
role: {model: fake/seeker}
targets:
  - {model: fake/fixed, name: late, options: {replies: ["Okay. [MISS]", "Are you safe? [SAFE]"]}}
execution: {executor: local}
""")
    local = tmp_path / "local.yaml"
    local.write_text("execution: {executor: local}\n")
    run = tmp_path / "run"
    done = cli("simulate", "-c", str(sim), "-o", str(run))
    assert done.returncode == 0, done.stderr[-2000:]
    done = cli("score", "-i", str(run), "-c", str(local), "--judge", JUDGE, "--reply-safety")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    # onsets at rounds 1 (both cards): replies 1-3 of 2 dialogues, two questions each
    assert result["dialogues"] == 2 and result["outcome"]["score_rows"] == 12 and result["parse_failures"] == []
    done = cli("analysis", "safety", str(run), "--n-boot", "100")
    assert done.returncode == 0, done.stderr[-2000:]
    paths = json.loads(done.stdout)
    table = pd.read_csv(paths["emerging_csv"]).iloc[0]
    assert (table["responded"], table["first_reply"], table["median_replies"]) == (1.0, 0.0, 2.0)
    assert "Responded after risk emerged" in done.stdout + done.stderr  # the terminal's safety table
    assert "Responded after risk emerged [95% CI]" in Path(paths["markdown"]).read_text()
    # the report's section from the same rows (`esc-eval report` in its own process: the embedded-model test)
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.safety.emerging_section import emerging_section

    section = emerging_section(load_dialogues([run]), [run], n_boot=100)
    assert [r[0] for r in section["blocks"][1]["rows"]] == ["late"] and section["data"][0]["responded"] == 1.0


def test_bad_input_is_one_line_and_nothing_is_written(tmp_path):
    line = one_line(cli("simulate", "--cards", "emerging_risk", "--rounds", "3", "--target", "fake/echo", "--role",
                        "fake/seeker", "--out", str(tmp_path / "short")))
    assert "discloses at round 4, but the run has 3 round(s)" in line and not (tmp_path / "short").exists()
    # risk that emerges in session 2 of a course, in a single-session run
    line = one_line(cli("simulate", "--cards", "emerging_risk_sessions", "--rounds", "3", "--target", "fake/echo",
                        "--role", "fake/seeker", "--out", str(tmp_path / "one")))
    assert "discloses in session 2, but the run has 1 session(s)" in line and "--sessions 2" in line
    assert not (tmp_path / "one").exists()
    line = one_line(cli("score", "-i", str(tmp_path / "missing"), "--judge", JUDGE, "--reply-safety"))
    assert "missing" in line and "does not exist" in line and not (tmp_path / "missing").exists()
