"""Seekers who are hard to help, by level: each setting against its baseline strategy (presets
resolved), paired by card, and the ranking's change with Kendall's tau, against hand-computed
values; in the report and in `esc-eval analysis seekers`."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.seekers.seeker_levels import has_settings, level_rankings, level_shift, setting_values


def _frames(table):
    """(model, card, strategy, value) -> scores and dialogues frames as the loaders give them."""
    dialogues = pd.DataFrame([{"dialogue_id": f"{m}|{c}|{s}", "strategy": s, "card_id": c, "role_model": "r"}
                              for m, c, s, _ in table])
    scores = pd.DataFrame([{"judge": "j", "dialogue_id": f"{m}|{c}|{s}", "language": "en", "target_model": m,
                            "dimension": d, "score": float(v)}
                           for m, c, s, v in table for d in ("fluency", "emotion", "empathy", "information",
                                                            "humanoid", "skill", "overall")])
    return scores, dialogues


def test_settings_resolve_to_their_baseline():
    scores, dialogues = _frames([("a", "1", "official", 3), ("a", "1", "resistant", 1),
                                 ("a", "1", "zero_shot+resistance=none", 2), ("a", "1", "official+volatility=high", 2),
                                 ("a", "1", "hostile", 4)])
    v = setting_values(scores, dialogues).set_index("strategy")
    assert "hostile" not in v.index  # a strategy this version does not know: left out
    assert v.loc["resistant", ["baseline", "setting", "controls"]].tolist() == ["zero_shot", "zero_shot+resistance=strong",
                                                                                "resistance=strong"]
    assert v.loc["zero_shot+resistance=none", ["baseline", "controls"]].tolist() == ["zero_shot", ""]
    assert v.loc["official+volatility=high", ["baseline", "controls"]].tolist() == ["official", "volatility=high"]
    assert has_settings(setting_values(scores, dialogues))


def test_each_level_against_the_baseline_by_hand():
    # model a, strategy official: cards 1, 2 at 4 and 2; resistance=mild 3 and 1; resistance=strong 1 and 1, and
    # card 3 at strong only (not paired)
    table = [("a", "1", "official", 4), ("a", "2", "official", 2),
             ("a", "1", "official+resistance=mild", 3), ("a", "2", "official+resistance=mild", 1),
             ("a", "1", "official+resistance=strong", 1), ("a", "2", "official+resistance=strong", 1),
             ("a", "3", "official+resistance=strong", 0)]
    shift = level_shift(setting_values(*_frames(table)), n_boot=2000).set_index("controls")
    assert list(shift.index) == ["resistance=mild", "resistance=strong"]
    mild, strong = shift.loc["resistance=mild"], shift.loc["resistance=strong"]
    assert mild["baseline_score"] == pytest.approx(75.0) and mild["setting_score"] == pytest.approx(50.0)
    assert mild["change"] == pytest.approx(-25.0) and mild["change_lo"] == mild["change_hi"] == pytest.approx(-25.0)
    # strong: paired on cards 1, 2 (card 3 has no baseline): differences -3 and -1 -> mean -2 (x25 = -50);
    # resamples give -3, -2, -1 (x25): the interval is [-75, -25]
    assert strong["paired"] and strong["n_paired"] == 2 and strong["n_setting_cards"] == 3
    assert strong["change"] == pytest.approx(-50.0)
    assert (strong["change_lo"], strong["change_hi"]) == (pytest.approx(-75.0), pytest.approx(-25.0))
    assert "paired on the 2 cards with both seekers" in strong["note"]


def test_the_ranking_change_per_setting_with_kendall_tau():
    table = []
    for c in ("1", "2", "3"):
        table += [("a", c, "zero_shot", 4), ("a", c, "low_engagement", 1), ("b", c, "zero_shot", 3),
                  ("b", c, "low_engagement", 3), ("c", c, "zero_shot", 1), ("c", c, "low_engagement", 0),
                  ("a", c, "zero_shot+engagement=medium", 4), ("b", c, "zero_shot+engagement=medium", 3),
                  ("c", c, "zero_shot+engagement=medium", 2)]
    ranks = level_rankings(setting_values(*_frames(table)), n_boot=300)
    low = ranks[ranks["setting"] == "zero_shot+engagement=low"].set_index("model")
    assert low["rank_baseline"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert low["rank_setting"].to_dict() == {"a": 2, "b": 1, "c": 3}
    assert low["rank_change"].to_dict() == {"a": 1, "b": -1, "c": 0}
    # (1, 2, 3) vs (2, 1, 3): one discordant pair of three -> tau 1/3; constant per card: zero-width intervals
    assert low["kendall_tau"].iloc[0] == pytest.approx(1 / 3) and low["kendall_tau_lo"].iloc[0] == pytest.approx(1 / 3)
    medium = ranks[ranks["setting"] == "zero_shot+engagement=medium"]
    assert medium["kendall_tau"].iloc[0] == pytest.approx(1.0) and (medium["rank_change"] == 0).all()


def _run(make_run):
    dialogues, scores = [], []
    values = {"model-a": {"official": 4, "official+resistance=mild": 3, "official+resistance=strong": 1},
              "model-b": {"official": 3, "official+resistance=mild": 3, "official+resistance=strong": 3}}
    for m, by in values.items():
        for c in range(4):
            for s, v in by.items():
                did = f"{m}-{c}-{s}"
                dialogues.append({**dialogue_row(did, m, card_id=f"c{c}"), "strategy": s})
                scores += score_rows(did, m, [v] * 7)
    return make_run("levels", dialogues=dialogues, scores=scores)


def test_report_section_and_cli(make_run, tmp_path):
    run = _run(make_run)
    md = write_report([run], tmp_path / "rep", n_boot=100)["markdown"].read_text()
    section = md.split("## Seekers who are hard to help, by level")[1].split("\n## ")[0]
    assert "| model-a | official | resistance=strong | 4 | 100.00 [100.0, 100.0] | 25.00 [25.0, 25.0] | -75.00" in section
    assert "| official | resistance=strong | model-a | 4 | 1 [1, 1] | 2 [2, 2] | +1.0 [+1.0, +1.0] | -1.00" in section
    out = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(run), "-o", str(out),
                           "--n-boot", "50"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    levels = pd.read_csv(out / "seeker_levels.csv").set_index(["model", "controls"])
    assert levels.loc[("model-a", "resistance=mild"), "change"] == -25 and levels.loc[("model-b", "resistance=strong"), "change"] == 0
    ranking = pd.read_csv(out / "seeker_levels_ranking.csv")
    assert ranking[ranking["setting"] == "official+resistance=strong"]["rank_change"].tolist() == [1, -1]
    assert "# Seekers who are hard to help, by level" in proc.stderr


def test_a_run_without_settings_says_how_to_get_them(make_run, tmp_path):
    dialogues = [{**dialogue_row(f"d{c}", "m", card_id=f"c{c}"), "strategy": "official"} for c in range(2)]
    scores = [r for c in range(2) for r in score_rows(f"d{c}", "m", [2] * 7)]
    md = write_report([make_run("plain", dialogues=dialogues, scores=scores)], tmp_path / "rep", n_boot=0)["markdown"].read_text()
    assert "No model met a seeker setting and its baseline: simulate with seeker controls" in md


def test_seeker_fidelity_has_a_row_per_setting(tmp_path):
    from esc_eval.analysis.seekers.esconv import sample_file
    from esc_eval.analysis.seekers.fidelity_report import fidelity_of_runs
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.pool.config import ExecutionConfig

    cfg = SimulationConfig(cards="sample", languages=["en"], limit=3, role=ModelRef(model="fake/seeker"),
                           targets=[ModelRef(model="fake/echo")], controls={"disclosure": ["open", "guarded"]},
                           execution=ExecutionConfig(executor="local"))
    run_simulation(cfg, tmp_path / "run")
    _, paths = fidelity_of_runs([str(tmp_path / "run")], str(sample_file()), n_boot=0, out=str(tmp_path / "fid"))
    import json

    summary = pd.DataFrame(json.loads(open(paths["json"]).read())["summary"])
    assert sorted(summary["strategy"]) == ["all", "official", "official+disclosure=guarded"]
    assert summary.set_index("strategy").loc["official+disclosure=guarded", "n_sim"] == 3
