"""Pairwise judging as a user runs it, each command in its own process: `esc-eval pairwise` with a fake
judge that always answers "the first dialogue" and one that reads the dialogues, then `esc-eval analysis
pairwise-ratings`: the position-bias audit flags the first judge on every dimension and the second on
none (Holm over its dimensions), and every verdict row is there once."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from esc_eval.analysis.pairwise.position_bias import holm
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
FIRST = "fake/fixed?reply=1"  # "Dialogue 1 is better", whatever is shown


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_a_judge_that_always_prefers_the_first_dialogue_is_flagged_and_one_that_reads_them_is_not(tmp_path):
    run = write_fake_run(tmp_path / "run", 12, models=["qwen1.5-7b-chat", "llama-3-8b-instruct", "chatglm3-6b"],
                         judge="seed")
    cfg = tmp_path / "local.yaml"
    cfg.write_text("execution: {executor: local}\n")
    for judge, method in ((FIRST, "generate"), ("fake/judge", "logprob")):
        done = cli("pairwise", "-i", str(run), "--judge", judge, "--method", method, "-c", str(cfg))
        assert done.returncode == 0, done.stderr[-2000:]
        assert "12 pairs x 7 dimensions x 2 orders = 168 judge calls" in done.stdout + done.stderr
    rows = RunFolder(run, create=False).read("pairwise").to_pylist()
    assert len(rows) == 2 * 168
    assert len({(r["pair_id"], r["dimension"], r["order"], r["judge"]) for r in rows}) == 2 * 168
    done = cli("analysis", "pairwise-ratings", str(run), "-o", str(tmp_path / "out"), "--n-boot", "200")
    assert done.returncode == 0, done.stderr[-2000:]
    audit = json.loads((tmp_path / "out" / "pairwise.json").read_text())["position_bias"]
    by_judge: dict[str, dict[str, dict]] = {}
    for r in audit:
        by_judge.setdefault(r["judge"], {})[r["dimension"]] = r
    first = by_judge[f"{FIRST}:pairwise:generate"]
    assert all(r["biased"] and r["first_share"] == 1.0 and r["flip_rate"] == 1.0 for r in first.values())
    reader = by_judge["fake/judge:pairwise:logprob"]
    assert not any(r["biased"] for r in reader.values())
    assert reader["pooled"]["first_lo"] < 0.5 < reader["pooled"]["first_hi"]


def test_holm_adjusts_as_written_by_hand():
    # p sorted 0.01, 0.02, 0.04 (NaN left out): x3, x2, x1 with the running maximum
    got = holm(np.array([0.04, np.nan, 0.01, 0.02]))
    assert got[2] == pytest.approx(0.03) and got[3] == pytest.approx(0.04) and got[0] == pytest.approx(0.04)
    assert np.isnan(got[1])
    assert holm(np.array([0.5, 0.4]))[0] == pytest.approx(0.8)
