"""A panel of judges scores in one pass (sim/jobs/scoring.py with sim/judging/panel.py): each judge's
rows apart under its id, each (dialogue, judge, dimension) exactly once, also after the driver is
killed and the same command resumes; the manifest records the panel and the model families; bad
panels are refused in one line with nothing written."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
J3 = "fake/judge?score=3&latency=0.01"
J1 = "fake/judge?score=1&latency=0.01"


def score_rows(run: Path) -> list[dict]:
    return [r for p in sorted((run / "scores").glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]


def fake_run(path: Path, n: int) -> Path:
    # judge "seed": the fake run's own scores, which the panel below must neither count nor touch
    return write_fake_run(path, n, models=["qwen1.5-7b-chat", "llama-3-8b-instruct"], judge="seed", part_rows=8)


def test_a_panel_scores_every_dialogue_with_each_judge_in_one_pass(tmp_path):
    run = fake_run(tmp_path / "run", 6)
    cfg = ScoringConfig.model_validate({
        "panel": {"rule": "median", "judges": [
            {"judge": {"model": {"model": J3}, "name": "three"}, "weight": 2.0, "family": "qwen"},
            {"judge": {"model": {"model": J1}, "name": "one", "dimensions": ["empathy", "fluency"]}},
            {"judge": {"model": {"model": "fake/judge?score=4"}, "name": "three-again"}}]},
        "execution": {"executor": "local"}})
    result = run_scoring(cfg, run)
    assert result["judges"] == ["three", "one", "three-again"]
    assert result["items"] == 6 and result["failed"] == 0 and result["model_calls"] == 6 * (7 + 2 + 7)
    rows = score_rows(run)
    by_judge: dict[str, list] = {}
    for r in rows:
        by_judge.setdefault(r["judge"], []).append(r)
    assert len(by_judge["seed"]) == 6 * 7  # untouched
    assert len(by_judge["three"]) == 6 * 7 and {r["score"] for r in by_judge["three"]} == {3}
    assert len(by_judge["one"]) == 6 * 2 and {r["dimension"] for r in by_judge["one"]} == {"empathy", "fluency"}
    assert {r["score"] for r in by_judge["three-again"]} == {4}
    keys = [(r["dialogue_id"], r["judge"], r["dimension"]) for r in rows]
    assert len(keys) == len(set(keys))
    manifest = json.loads((run / "manifest.json").read_text())
    panel = manifest["scoring"]["panel"]
    assert panel["rule"] == "median"
    assert [(j["judge"], j["weight"], j["family"]) for j in panel["judges"]] == [
        ("three", 2.0, "qwen"), ("one", 1.0, None), ("three-again", 1.0, None)]
    assert manifest["families"]["targets"] == {"llama-3-8b-instruct": "llama", "qwen1.5-7b-chat": "qwen"}
    assert manifest["families"]["judges"]["three"] == "qwen"
    # a second pass owes nothing: every judge's rows are there
    again = run_scoring(cfg, run)
    assert again["skipped_done"] == 6 and len(score_rows(run)) == len(rows)


def test_a_judge_added_later_scores_only_its_own_rows(tmp_path):
    run = fake_run(tmp_path / "run", 4)
    one = ScoringConfig.model_validate({"judge": {"model": {"model": J3}, "name": "a"}, "execution": {"executor": "local"}})
    run_scoring(one, run)
    panel = ScoringConfig.model_validate({"panel": {"judges": [{"judge": {"model": {"model": J3}, "name": "a"}},
                                                               {"judge": {"model": {"model": J1}, "name": "b"}}]},
                                          "execution": {"executor": "local"}})
    result = run_scoring(panel, run)
    assert result["items"] == 4 and result["model_calls"] == 4 * 7  # judge b's calls only
    counts = {}
    for r in score_rows(run):
        counts[r["judge"]] = counts.get(r["judge"], 0) + 1
    assert counts == {"seed": 28, "a": 28, "b": 28}


def write_panel_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "panel.yaml"
    cfg.write_text(f"""
panel:
  rule: trimmed_mean
  judges:
    - judge: {{model: {{model: "fake/judge?latency=0.03"}}, name: first}}
    - judge: {{model: {{model: "fake/judge?score=2&latency=0.03"}}, name: second}}
      weight: 0.5
    - judge: {{model: {{model: "fake/judge?score=4&latency=0.03"}}, name: third}}
execution: {{executor: local, workers: 1, concurrency: 4, chunk_size: 2, flush_rows: 8, flush_seconds: 0.3}}
""")
    return cfg


def test_a_panel_killed_mid_run_resumes_with_every_judges_rows_exactly_once(tmp_path):
    run, cfg = fake_run(tmp_path / "run", 60), write_panel_config(tmp_path)
    before = len(score_rows(run))
    cmd = [sys.executable, "-m", "esc_eval.cli", "score", "--input", str(run), "--config", str(cfg)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(score_rows(run)) < before + 3 * 7 * 4:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = [r for r in score_rows(run) if r["judge"] != "seed"]
    assert 0 < len(partial) < 60 * 7 * 3, "the kill should land mid-run"
    done = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [r for r in score_rows(run) if r["judge"] != "seed"]
    keys = {(r["dialogue_id"], r["judge"], r["dimension"]) for r in rows}
    dialogues = {r["dialogue_id"] for r in rows}
    assert len(dialogues) == 60
    assert keys == {(d, j, dim) for d in dialogues for j in ("first", "second", "third") for dim in DIMENSION_NAMES}
    # a (dialogue, judge, dimension) written twice (before the kill and after) is read once: the latest wins
    from esc_eval.sim.runs.runfolder import RunFolder

    read = RunFolder(run, create=False).read("scores").to_pylist()
    assert len([r for r in read if r["judge"] != "seed"]) == 60 * 7 * 3
    assert {r["score"] for r in read if r["judge"] == "third"} == {4}
    assert json.loads((run / "manifest.json").read_text())["scoring"]["panel"]["rule"] == "trimmed_mean"


@pytest.mark.parametrize("args, says", [
    (["--judge", "fake/judge", "--judge", "fake/judge"], "the panel names judge 'fake/judge:logprob:official' twice"),
    (["--judge", "fake/judge", "--judge", "fake/judge?score=1", "--official-out", "OFF"], "--official-out writes one judge"),
])
def test_bad_panels_are_refused_in_one_line_with_nothing_written(tmp_path, args, says):
    run = fake_run(tmp_path / "run", 2)
    before = sorted(p.name for p in (run / "scores").iterdir())
    manifest = (run / "manifest.json").read_text()
    args = [str(tmp_path / "off") if a == "OFF" else a for a in args]
    done = subprocess.run([sys.executable, "-m", "esc_eval.cli", "score", "--input", str(run), *args], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in (run / "scores").iterdir()) == before
    assert (run / "manifest.json").read_text() == manifest


def test_a_weight_that_is_not_positive_and_a_judge_beside_a_panel_are_refused(tmp_path):
    from esc_eval.sim.launch.options import scoring_config

    bad = tmp_path / "bad.yaml"
    bad.write_text("panel:\n  judges:\n    - judge: {model: {model: fake/judge}}\n      weight: 0\n"
                   "    - judge: {model: {model: 'fake/judge?score=1'}}\n")
    with pytest.raises(ValueError, match="weight"):
        scoring_config(bad)
    both = tmp_path / "both.yaml"
    both.write_text("judge: {model: {model: fake/judge}}\npanel:\n  judges:\n    - judge: {model: {model: fake/judge}}\n"
                    "    - judge: {model: {model: 'fake/judge?score=1'}}\n")
    with pytest.raises(ValueError, match="give the judges inside `panel`"):
        scoring_config(both)
    ok = scoring_config(None, ["fake/judge", "fake/judge?score=1"], method="generate")
    assert [j.method for j in ok.judges] == ["generate", "generate"] and ok.panel.rule == "mean"


def test_a_models_family_comes_from_the_registry_by_name_or_by_its_spec():
    from esc_eval.sim.jobs.scoring_judges import registry_family

    assert registry_family("esc-rank") == "internlm" and registry_family("mindchat") == "qwen"
    assert registry_family("vllm/embedded") == "smollm"  # a spec of a registry entry is that entry
    assert registry_family("openai/gpt-4") == "gpt"
    assert registry_family("fake/judge?score=1") is None and registry_family("vllm//models/mine") is None
    assert registry_family("my-named-target") is None and registry_family("") is None
