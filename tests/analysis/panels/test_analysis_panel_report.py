"""`report --panel RULE` and `leaderboard --panel RULE`: the runs' judge panel as one more judge, so
Table 2, the human-anchored means (PPI) and the calibration take it as they take one judge."""
import json
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trust_testdata import human_sheet, judged_run  # noqa: E402

from esc_eval.cli.app import app  # noqa: E402

runner = CliRunner()


def test_the_panel_is_one_more_judge_in_table_2_ppi_and_calibration(make_run, tmp_path):
    run, truth = judged_run(make_run, n=60, judge="judge-p", seed=0)
    judged_run(make_run, n=60, judge="judge-q", seed=1)  # the same dialogues, a second judge
    ids = sorted({d for d, _ in truth})[:24]
    sheet = human_sheet(tmp_path / "humans.csv", truth, ids)
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", str(run), "--humans", str(sheet), "--panel", "mean", "--n-boot", "50",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "report.json").read_text())
    assert {c["judge"] for c in report["calibration"]} >= {"judge-p", "judge-q", "panel:mean"}
    assert {h["judge"] for h in report["human-anchored"]} >= {"judge-p", "judge-q", "panel:mean"}
    lb = pd.read_csv(out / "leaderboard.csv")
    assert set(lb["judge"]) == {"judge-p", "judge-q", "panel:mean"}
    # the panel's Average is the mean of the two judges' expected scores, per model, x 25
    rows = pd.concat([pd.read_parquet(p) for p in sorted((run / "scores").glob("*.parquet"))])
    expected = rows.groupby(["target_model", "judge"])["expected"].mean().unstack().mean(axis=1) * 25
    panel = lb[lb["judge"] == "panel:mean"].set_index("model")["Average"]
    assert (panel - expected.loc[panel.index]).abs().max() < 1e-6
    r = runner.invoke(app, ["leaderboard", str(run), "--panel", "median", "--n-boot", "20", "-o", str(tmp_path / "lb")])
    assert r.exit_code == 0, r.output
    assert "panel:median" in set(pd.read_csv(tmp_path / "lb" / "leaderboard.csv")["judge"])
    r = runner.invoke(app, ["leaderboard", str(run), "--panel", "vote", "-o", str(tmp_path / "bad")])
    assert r.exit_code != 0 and "a rule is one of" in r.output and not (tmp_path / "bad").exists()


def test_leaderboard_with_a_panel_and_rank_sets_gives_the_panels_row_its_rank_set(make_run, tmp_path):
    """issue 53: `leaderboard --panel RULE --rank-sets` left the panel's row without a rank-set (the sets were
    built from the judges' rows only)."""
    run, _ = judged_run(make_run, n=40, judge="judge-p", seed=0)
    judged_run(make_run, n=40, judge="judge-q", seed=1)
    out = tmp_path / "lb"
    r = runner.invoke(app, ["leaderboard", str(run), "--panel", "mean", "--rank-sets", "--n-boot", "0", "-o", str(out)])
    assert r.exit_code == 0, r.output
    ranked = pd.read_csv(out / "leaderboard_rank_sets.csv")
    assert set(ranked["judge"]) == {"judge-p", "judge-q", "panel:mean"}
    panel = ranked[ranked["judge"] == "panel:mean"]
    assert len(panel) == 2 and panel["rank_set"].notna().all() and (panel["rank_lo"] >= 1).all()
    assert {s["judge"] for s in json.loads(r.stdout)["rank_sets"]} == {"judge-p", "judge-q", "panel:mean"}
    assert "panel:mean" in (out / "leaderboard_rank_sets.md").read_text()
