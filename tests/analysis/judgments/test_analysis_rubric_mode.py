"""Which rubric mode scored a judge: Table 2 and the report's runs section say it beside a judge asked once
per dialogue (rubric_mode one_call), and say nothing for the paper's protocol (rows from before the
column included)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from esc_eval.analysis.report.sections import summary_section
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.judgments.rubric_mode import RUBRIC_MODE_NOTES, rubric_mode_of
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _scores(judge: str, mode: str | None, n: int = 3) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": "r", "dialogue_id": f"d{i}", "target_model": "m", "language": "en", "dimension": d,
                          "score": float((i + k) % 5), "parse_status": "ok", "judge": judge, "rubric_mode": mode,
                          "run_dir": "runs/a"} for i in range(n) for k, d in enumerate(DIMENSION_NAMES)])


def test_the_leaderboard_says_which_judge_was_asked_once_per_dialogue():
    scores = pd.concat([_scores("j", None), _scores("j:one_call", "one_call")], ignore_index=True)
    lb = build_leaderboard(scores, n_boot=0).set_index("judge")
    assert RUBRIC_MODE_NOTES["one_call"] in lb.loc["j:one_call", "notes"]
    assert "rubric mode" not in lb.loc["j", "notes"]  # the paper's protocol: nothing to say
    mixed = pd.concat([_scores("k", "per_dimension"), _scores("k", "one_call")], ignore_index=True)
    assert rubric_mode_of(mixed) == "mixed" and rubric_mode_of(_scores("k", None).drop(columns="rubric_mode")) == "per_dimension"


def test_the_report_says_it_beside_the_runs():
    scores = pd.concat([_scores("j", "per_dimension"), _scores("j:one_call", "one_call")], ignore_index=True)
    dialogues = pd.DataFrame([{"run_dir": "runs/a", "status": "ok"}])
    s = summary_section([Path("runs/a")], {}, dialogues, scores)
    said = [n["text"] for n in s["notices"]]
    assert len(said) == 1 and said[0].startswith("Judge j:one_call: rubric mode one_call")
