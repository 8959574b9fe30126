"""A panel as a user runs it, each command in its own process: `esc-eval score` with a panel in its
config (one judge of the qwen family, its family given; the targets' families from the registry),
then `esc-eval analysis panel`: each judge's rows once, the panel's rows per (dialogue, dimension),
the qwen target marked for the qwen judge and the llama one not."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=300)


def test_score_with_a_panel_then_read_it_with_self_preference_marked(tmp_path):
    run = write_fake_run(tmp_path / "run", 10, models=["qwen1.5-7b-chat", "llama-3-8b-instruct"], judge="seed")
    cfg = tmp_path / "panel.yaml"
    cfg.write_text("""
panel:
  rule: median
  judges:
    - {judge: {model: {model: "fake/judge"}, name: j-qwen}, family: qwen, weight: 2}
    - {judge: {model: {model: "fake/judge?score=3"}, name: j-three}}
    - {judge: {model: {model: "fake/judge?score=1"}, name: j-one}}
execution: {executor: local}
""")
    done = cli("score", "-i", str(run), "-c", str(cfg))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["judges"] == ["j-qwen", "j-three", "j-one"]
    keys = [(r["dialogue_id"], r["judge"], r["dimension"]) for r in RunFolder(run, create=False).iter_rows("scores")]
    assert len(keys) == len(set(keys)) == 4 * 10 * 7  # the seed's rows and each judge's, once
    done = cli("analysis", "panel", str(run), "-o", str(tmp_path / "out"), "--n-boot", "100")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "panel.json").read_text())
    assert result["judge"] == "panel:median" and [j["judge"] for j in result["judges"]] == ["j-qwen", "j-three", "j-one"]
    marks = {(m["model"], m["judge"]) for m in result["self_preference"]}
    assert marks == {("qwen1.5-7b-chat", "j-qwen")}
    panel = pd.read_parquet(tmp_path / "out" / "panel_scores.parquet")
    assert len(panel) == 10 * 7 and set(panel["judge"]) == {"panel:median"}
    # the weighted low median of (j-qwen x2, 3, 1): the first label whose weight reaches half (2 of 4),
    # so j-qwen's own label unless it is above 3 (then 3)
    seen = pd.DataFrame(RunFolder(run, create=False).read("scores").to_pylist())
    qwen = seen[seen["judge"] == "j-qwen"].set_index(["dialogue_id", "dimension"])["score"]
    expect = qwen.clip(upper=3).rename("expect")
    assert (qwen == 0).any() or (qwen == 4).any()  # the cases the rule decides
    got = panel.set_index(["dialogue_id", "dimension"])["score"]
    assert (got.loc[expect.index] == expect).all()
