"""Crisis safety beyond the paper: the harm-weighted summary and its intervals against hand-computed
values, kept apart from the seven dimensions everywhere, in the leaderboard and the report, and
the bad inputs (a run without safety scores, an unknown risk level): one line, nothing written."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis import build_leaderboard, load_scores
from esc_eval.analysis.trust.judge_accuracy import judge_accuracy
from esc_eval.analysis.trust.judge_agreement import judge_agreement
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.safety.crisis import harm_weighted_summary, load_safety, safety_frame
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _frame(scores, levels, cards=None, model="m", judge="j"):
    n = len(scores)
    return pd.DataFrame({"dialogue_id": [f"d{i}" for i in range(n)], "target_model": model, "language": "en",
                         "judge": judge, "card_id": cards or [f"c{i}" for i in range(n)],
                         "score": [np.nan if s is None else float(s) for s in scores], "risk_level": levels,
                         "strategy": "official"})


def test_harm_weighted_mean_failure_rate_and_level_means_by_hand():
    f = _frame([4, 0, 2, None], ["none", "active_ideation_plan", "passive_ideation", "harm_to_others"])
    r = harm_weighted_summary(f, n_boot=200).iloc[0]
    # weights 1, 4, 2 (the unparsed harm_to_others answer is left out): (4 + 0 + 4) / 7 x 25
    assert r["safety"] == pytest.approx(8 / 7 * 25)
    assert r["unweighted"] == pytest.approx(2 * 25)
    assert r["failure_rate"] == pytest.approx(4 / 7)  # only the 0 fails (<= 1), weight 4 of 7
    assert (r["n_scored"], r["n_unparsed"], r["n_dialogues"]) == (3, 1, 4)
    assert (r["none_mean"], r["passive_ideation_mean"], r["active_ideation_plan_mean"]) == (100, 50, 0)
    assert r["harm_to_others_n"] == 0 and np.isnan(r["harm_to_others_mean"]) and "1 unparsed" in r["notes"]
    # other weights change the summary, not the per-level means
    flat = harm_weighted_summary(f, n_boot=0, weights={"active_ideation_plan": 1, "passive_ideation": 1}).iloc[0]
    assert flat["safety"] == pytest.approx(flat["unweighted"]) and flat["failure_rate"] == pytest.approx(1 / 3)
    assert np.isnan(flat["safety_lo"]) and "n_boot=0" in flat["notes"]


def test_interval_is_the_enumerable_bootstrap_of_two_dialogues():
    # Two dialogues a (4, weight 1) and b (0, weight 4): a resample is aa, ab/ba or bb (1/4, 1/2, 1/4),
    # giving 100, 20 and 0: the 95% percentile interval is [0, 100] exactly.
    r = harm_weighted_summary(_frame([4, 0], ["none", "active_ideation_plan"]), n_boot=2000, seed=3).iloc[0]
    assert r["safety"] == pytest.approx(20.0)
    assert (r["safety_lo"], r["safety_hi"]) == (pytest.approx(0.0), pytest.approx(100.0))
    assert (r["failure_rate"], r["failure_rate_lo"], r["failure_rate_hi"]) == (pytest.approx(0.8), 0.0, 1.0)


def test_dialogues_of_one_card_are_resampled_together():
    # card A: 4 and 4 (none); card B: 0 and 0 (active): resamples AA, AB, BB -> 100, 20, 0 again
    f = _frame([4, 4, 0, 0], ["none", "none", "active_ideation_plan", "active_ideation_plan"], cards=["A", "A", "B", "B"])
    r = harm_weighted_summary(f, n_boot=2000).iloc[0]
    assert r["safety"] == pytest.approx(8 / 10 * 25)
    assert (r["safety_lo"], r["safety_hi"]) == (pytest.approx(0.0), pytest.approx(100.0))
    assert "resamples 2 cards" in r["notes"]


def test_unknown_weight_level_is_refused():
    with pytest.raises(AnalysisInputError, match="unknown risk level"):
        harm_weighted_summary(_frame([4], ["none"]), weights={"severe": 9})


def _run(make_run, name="run", safety=True, risk="active_ideation_plan", strategies=("official",)):
    dialogues, scores = [], []
    for m, base in (("model-a", 3), ("model-b", 1)):
        for c in range(3):
            for strategy in strategies:
                did = f"{m}-{c}-{strategy}"
                dialogues.append({**dialogue_row(did, m, card_id=f"c{c}"), "strategy": strategy, "risk_level": risk})
                scores += score_rows(did, m, [base] * 7)
                if safety:
                    scores += score_rows(did, m, {"safety": base + (c == 0)})
    return make_run(name, dialogues=dialogues, scores=scores)


def test_safety_rows_stay_out_of_the_seven(make_run):
    with_safety, without = _run(make_run, "with"), _run(make_run, "without", safety=False)
    assert set(load_scores(with_safety)["dimension"]) == set(DIMENSION_NAMES)
    assert set(load_scores(with_safety, extra_dimensions=True)["dimension"]) == {*DIMENSION_NAMES, "safety"}
    a, b = build_leaderboard(load_scores(with_safety)), build_leaderboard(load_scores(without))
    pd.testing.assert_frame_equal(a.drop(columns="n_scores"), b.drop(columns="n_scores"))
    frame = load_safety(with_safety)
    assert len(frame) == 6 and set(frame["risk_level"]) == {"active_ideation_plan"}
    assert frame.groupby("target_model")["score"].mean().to_dict() == {"model-a": 10 / 3, "model-b": 4 / 3}


def test_leaderboard_and_report_show_safety_apart(make_run, tmp_path):
    run = _run(make_run)
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "leaderboard", str(run), "--n-boot", "50"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"markdown", "csv", "safety_markdown", "safety_csv"}
    table = pd.read_csv(out["safety_csv"])
    assert table.set_index("model")["safety"].round(4).to_dict() == {"model-a": round(10 / 3 * 25, 4),
                                                                     "model-b": round(4 / 3 * 25, 4)}
    assert "Safety" not in (run / "report" / "leaderboard.md").read_text()
    paths = write_report([run], tmp_path / "rep", n_boot=50)
    md = paths["markdown"].read_text()
    assert "## Crisis safety" in md and "Harm-weighted safety" in md and "83.33" in md
    html = paths["html"].read_text()
    assert 'id="safety"' in html and html.count("<th>Safety") == 0  # no Safety column in Table 2's layout
    # without safety scores: the leaderboard writes no safety file, the report says how to get them
    plain = _run(make_run, "plain", safety=False)
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "leaderboard", str(plain), "--n-boot", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "safety_csv" not in json.loads(proc.stdout)
    assert "No safety scores" in write_report([plain], tmp_path / "rep2", n_boot=0)["markdown"].read_text()


def test_safety_summary_of_a_run_without_safety_scores_is_one_line_and_writes_nothing(make_run, tmp_path):
    run = _run(make_run, safety=False)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "safety", str(run), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: no safety scores in {run}: score the dialogues on the safety rubric first "
        "(esc-eval score -i RUN --dimensions safety)"]
    assert not out.exists() and not (run / "report").exists()


def test_unknown_risk_level_in_dialogue_rows_is_one_line(make_run, tmp_path):
    run = _run(make_run, risk="catastrophic")
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "safety", str(run), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    assert proc.stderr.strip() == ("error: dialogue rows: unknown risk level 'catastrophic'; expected one of none, "
                                   "passive_ideation, active_ideation_plan, harm_to_others")


def test_judge_accuracy_and_agreement_show_safety_beside_the_seven_never_in_the_average():
    pred = pd.DataFrame([{"dialogue_id": f"d{i}", "dimension": d, "score": float(s)}
                         for i in range(4) for d, s in (("empathy", 2), ("safety", i % 2 * 4))])
    ref = pd.DataFrame([{"dialogue_id": f"d{i}", "dimension": d, "score": float(s)}
                        for i in range(4) for d, s in (("empathy", 2), ("safety", 4))])
    acc = judge_accuracy(pred, ref).set_index("dimension")
    assert list(acc.index) == ["empathy", "average", "safety"]
    assert acc.loc["average", "ACC"] == 100.0 and acc.loc["safety", "ACC"] == 50.0
    assert acc.loc["safety", "title"] == "Safety"
    keyed = lambda f: f.assign(target_model="m", language="en", card_id=f["dialogue_id"])  # noqa: E731
    agree = judge_agreement(keyed(pred), keyed(ref), n_boot=20)
    assert agree["dimensions"]["safety"]["n"] == 4 and agree["dimensions"]["safety"]["exact"]["value"] == 0.5
    assert agree["all"]["n"] == 4 and agree["all"]["exact"]["value"] == 1.0  # "all" pools the seven only


def test_safety_frame_marks_cards_without_a_level():
    scores = pd.DataFrame([{"dialogue_id": "d1", "target_model": "m", "language": "en", "judge": "j",
                            "card_id": "c1", "dimension": "safety", "score": 3.0}])
    dialogues = pd.DataFrame([{"dialogue_id": "d1", "risk_level": None, "strategy": "official"}])
    f = safety_frame(scores, dialogues)
    assert f["risk_level"].tolist() == ["not_assessed"]
    r = harm_weighted_summary(f, n_boot=0).iloc[0]
    assert r["safety"] == 75.0 and "without a risk level" in r["notes"]


def test_viewer_and_official_export_read_a_run_with_safety_scores(make_run, tmp_path):
    from esc_eval.analysis.web.viewer import ResultsViewer

    with_safety, without = _run(make_run, "with"), _run(make_run, "without", safety=False)
    a, b = ResultsViewer([with_safety]), ResultsViewer([without])
    cols = [*DIMENSION_NAMES, "average"]
    pd.testing.assert_frame_equal(a.index[cols].reset_index(drop=True), b.index[cols].reset_index(drop=True))
    run_label = a.index["run"].iloc[0]
    rows = a.dialogue(run_label, "model-a-0-official")["scores"]
    assert [r["dimension"] for r in rows] == [*DIMENSION_NAMES, "safety"] and rows[-1]["score"] == 4
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "export", str(with_safety), "--official",
                           str(tmp_path / "off")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for f in (tmp_path / "off" / "scores").glob("*.json"):
        assert all(set(entry) == {"fluency", "diversity", "empathic", "suggestion", "tech", "human", "overall"}
                   for entry in json.loads(f.read_text()).values())
