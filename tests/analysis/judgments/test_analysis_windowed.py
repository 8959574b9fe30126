"""Windowed judgments counted and filtered in one place (analysis/judgments/windowed.py, applied by
load_scores): through simulate and score on the fakes, a judge whose context holds one target's
dialogues whole and not the other's; no windowed judgment is said as none (no false mark), the
planted ones are counted per leaderboard row with the share of rounds not read, and `--windowed
exclude | only` leave them out or keep them alone in the leaderboard and the report."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.judgments.windowed import WindowedModeError, apply_windowed, windowed_counts, windowed_line
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import judge_call_messages, run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

LONG, SHORT = "fake/echo", "fake/fixed?reply=I+hear+you."


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """8-round dialogues of two targets on 3 cards; a judge whose context fits SHORT's whole, not LONG's."""
    path = tmp_path_factory.mktemp("windowed") / "run"
    local = ExecutionConfig(executor="local")
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=3, rounds=8, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model=LONG), ModelRef(model=SHORT)], execution=local), path)
    judge = JudgeConfig(model=ModelRef(model="fake/judge"), dimensions=["overall"])
    size = {}  # the fake counts len // 4 + 1 tokens a message
    for d in RunFolder(path, create=False).iter_rows("dialogues"):
        msgs = judge_call_messages("overall", [(t["speaker"], t["text"]) for t in d["turns"]], "en", judge)
        size.setdefault(d["target_model"], []).append(sum(len(m.content) // 4 + 1 for m in msgs))
    assert max(size[SHORT]) < min(size[LONG])
    context = (max(size[SHORT]) + min(size[LONG])) // 2
    run_scoring(ScoringConfig(judge=judge.model_copy(update={"model": ModelRef(model=f"fake/judge?context={context}")}),
                              execution=local), path)
    return path


def test_the_windowed_judgments_are_counted_and_filtered_where_score_rows_are_read(run):
    every = load_scores([run])
    counts = every.attrs["windowed"]
    assert counts["judgments"] == 6 and counts["windowed"] == 3 and counts["known"] == 6
    windowed = every[every["rounds_left_out"] > 0]
    assert set(windowed["target_model"]) == {LONG} and set(every["n_rounds"]) == {8}
    left = windowed.groupby("dialogue_id")["rounds_left_out"].max().sum()
    assert counts["unread_share_windowed"] == pytest.approx(left / 24) and counts["unread_share_all"] == pytest.approx(left / 48)
    line = windowed_line(every)
    assert line.startswith("Windowed judgments: 3 of 6") and f"{100 * left / 24:.0f}% of their rounds" in line
    out = load_scores([run], windowed="exclude")
    assert set(out["target_model"]) == {SHORT} and out.attrs["windowed"]["left_out_of_table"] == 3
    assert windowed_line(out).startswith("Windowed judgments: 3 of 6 left out")
    only = load_scores([run], windowed="only")
    assert set(only["target_model"]) == {LONG} and len(only) == len(every) - len(out)
    # no windowed judgment: said as none, nothing marked
    short = apply_windowed(every[every["target_model"] == SHORT], "include")
    assert windowed_line(short) == "Windowed judgments: none of 3 (the judge read every round of every dialogue)."
    old = every.drop(columns=["rounds_left_out"])  # scored before the rule: unknown, not none
    assert "not recorded" in windowed_line(windowed_counts(old))
    with pytest.raises(WindowedModeError, match="--windowed some"):
        load_scores([run], windowed="some")


def test_the_leaderboard_and_the_report_say_it_and_leave_them_out(run, tmp_path):
    from esc_eval.cli.app import app

    r = CliRunner().invoke(app, ["leaderboard", str(run), "-o", str(tmp_path / "lb"), "--n-boot", "0"])
    assert r.exit_code == 0, r.output
    table = pd.read_csv(tmp_path / "lb" / "leaderboard.csv").set_index("model")
    assert table.loc[LONG, "n_windowed"] == 3 and table.loc[SHORT, "n_windowed"] == 0
    assert table.loc[LONG, "unread_share"] > 0 and table.loc[SHORT, "unread_share"] == 0
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "Windowed judgments: 3 of 6" in md and "3 judgments windowed" in md
    r = CliRunner().invoke(app, ["leaderboard", str(run), "-o", str(tmp_path / "ex"), "--n-boot", "0", "--windowed", "exclude"])
    assert r.exit_code == 0, r.output
    assert list(pd.read_csv(tmp_path / "ex" / "leaderboard.csv")["model"]) == [SHORT]
    assert "3 of 6 left out" in (tmp_path / "ex" / "leaderboard.md").read_text()
    r = CliRunner().invoke(app, ["report", str(run), "-o", str(tmp_path / "rep"), "--n-boot", "0", "--windowed", "only"])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["windowed"]["mode"] == "only" and {r["model"] for r in report["leaderboard"]} == {LONG}
    assert "Windowed judgments only" in (tmp_path / "rep" / "report.md").read_text()
    r = CliRunner().invoke(app, ["leaderboard", str(run), "-o", str(tmp_path / "bad"), "--windowed", "half"])
    assert isinstance(r.exception, ValueError) and "--windowed half" in str(r.exception)  # one line (cli/app.py)
    assert not (tmp_path / "bad").exists()
