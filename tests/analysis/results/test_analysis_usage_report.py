"""Usage from the manifest in the report and as leaderboard CSV columns."""
from __future__ import annotations

import pandas as pd

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.loaders import load_manifests, load_scores
from esc_eval.analysis.results.usage import add_usage_columns

USAGE = {"by_stage": [
    {"stage": "target", "model": "m1", "spec": "openai/m1", "calls": 50, "prompt_tokens": 10_000,
     "completion_tokens": 2_000, "call_seconds": 12.5, "dollars": 0.42},
    {"stage": "role", "model": "fake/role", "spec": "fake/role", "calls": 50, "prompt_tokens": 9_000,
     "completion_tokens": 1_500, "call_seconds": 3.0, "dollars": None}],
    "engines": [{"model": "fake/role", "spec": "fake/role", "engine_seconds": 30.0, "gpu_seconds": 0.0}],
    "total_dollars": 0.42}


def test_usage_in_leaderboard_csv_and_report(make_run, tmp_path):
    run = make_run("r", dialogues=[dialogue_row("d1", "m1"), dialogue_row("d2", "m2", card_id="c2")],
                   scores=score_rows("d1", "m1", [3] * 7) + score_rows("d2", "m2", [2] * 7),
                   manifest={"run_id": "r", "usage": USAGE})
    lb = build_leaderboard(load_scores([run]), n_boot=0)
    with_usage = add_usage_columns(lb, load_manifests([run])).set_index("model")
    assert with_usage.loc["m1", "usage_calls"] == 50 and with_usage.loc["m1", "usage_dollars"] == 0.42
    assert pd.isna(with_usage.loc["m2", "usage_calls"])
    from esc_eval.analysis.report.report import write_report

    paths = write_report([run], tmp_path / "rep", n_boot=0)
    csv = pd.read_csv(paths["leaderboard_csv"])
    assert "usage_prompt_tokens" in csv.columns and csv.set_index("model").loc["m1", "usage_prompt_tokens"] == 10_000
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "Usage and cost per model and stage" in md and "$0.4200" in md
