"""Leaderboards anchored on human scores (PPI) in `leaderboard`, `report` and `compare`, and expected
scores: a judge that overrates by one point is corrected back to the human scale, the table says
how many human scores each cell rests on, and bad human input is refused before anything is written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis_testdata import dialogue_row
from esc_eval.analysis.judgments.expected_scores import expected_scores
from esc_eval.analysis.trust.human_leaderboard import human_anchored
from esc_eval.analysis.trust.human_scores import load_human_scores
from esc_eval.analysis.results.leaderboard import VALUE_COLUMNS, build_leaderboard
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores
from esc_eval.analysis.trust.ppi import ppi_mean
from esc_eval.cli.app import app
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from trust_testdata import T0

runner = CliRunner()
LEVEL = {"m1": 1.5, "m2": 2.5}


def _biased_run(make_run, tmp_path: Path, name: str = "run", models=("m1", "m2"), n: int = 100, human_every: int = 3,
                seed: int = 0) -> tuple[Path, Path, pd.DataFrame]:
    """n dialogues per model; people score every `human_every`-th one (two annotators); the judge
    says the human truth plus one (capped at 4), a peaked P(0..4) on that label."""
    rng = np.random.default_rng(seed)
    dialogues, scores, humans = [], [], []
    for model in models:
        for i in range(n):
            did = f"{name}-{model}-{i:03d}"
            dialogues.append(dialogue_row(did, model, card_id=f"c{i}", run_id=name))
            for dim in DIMENSION_NAMES:
                truth = int(np.clip(round(LEVEL[model] + rng.normal(0, 0.9)), 0, 3))
                label = truth + 1
                probs = np.full(5, 0.05)
                probs[label] = 0.8
                scores.append({"run_id": name, "dialogue_id": did, "target_model": model, "language": "en",
                               "dimension": dim, "score": label, "probs": probs.tolist(),
                               "expected": float(probs @ np.arange(5)), "raw": str(label), "parse_status": "ok",
                               "judge": "judge-p", "method": "logprob", "parser": "strict", "error": None,
                               "prompt_tokens": 10, "latency_s": 0.1, "scored_at": T0, "probs_status": "full"})
                if i % human_every == 0:
                    humans += [{"dialogue_id": did, "annotator": a, "dimension": dim, "score": truth} for a in ("ana", "ben")]
    run = make_run(name, dialogues=dialogues, scores=scores)
    sheet = tmp_path / f"{name}-humans.csv"
    frame = pd.DataFrame(humans)
    frame.to_csv(sheet, index=False)
    return run, sheet, frame


def test_ppi_corrects_a_judge_that_overrates_by_one_point(make_run, tmp_path):
    run, sheet, frame = _biased_run(make_run, tmp_path)
    scores = load_scores([run])
    humans = load_human_scores(sheet)
    lb = build_leaderboard(scores, n_boot=200)
    table = human_anchored(scores, humans, lb)
    assert len(table) == 2 * 8 and set(table["column"]) == set(VALUE_COLUMNS)
    avg = table[table["column"] == "Average"].set_index("model")
    for model in ("m1", "m2"):
        r = avg.loc[model]
        assert r["n_human"] == 34 and r["n_judge_only"] == 66
        # the judge says the people's label plus one (25 points) on every dialogue, so the people's
        # mean over all the model's dialogues is the judge's minus 25: PPI's interval holds it
        assert r["ppi_lo"] < r["judge_mean"] - 25 < r["ppi_hi"] and r["judge_ci_covers_ppi"] == False and r["judge_off_scale"] == True  # noqa: E712
        assert r["ppi_hi"] - r["ppi_lo"] < r["human_hi"] - r["human_lo"]
    # one cell by hand: the Empathy of m2
    g = scores[(scores["target_model"] == "m2") & (scores["dimension"] == "empathy")].set_index("dialogue_id")["score"] * 25
    h = frame[frame["dimension"] == "empathy"].groupby("dialogue_id")["score"].mean() * 25
    lab = g.index.isin(h.index)
    ref = ppi_mean(h.reindex(g.index[lab]).to_numpy(), g[lab].to_numpy(), g[~lab].to_numpy())
    cell = table[(table["model"] == "m2") & (table["column"] == "Empathy")].iloc[0]
    assert (cell["ppi"], cell["ppi_lo"], cell["ppi_hi"], cell["n_human"]) == pytest.approx(
        (ref.estimate, ref.lo, ref.hi, ref.n))


def test_leaderboard_and_report_with_humans(make_run, tmp_path):
    run, sheet, _ = _biased_run(make_run, tmp_path)
    r = runner.invoke(app, ["leaderboard", str(run), "--humans", str(sheet), "--n-boot", "100", "-o", str(tmp_path / "lb")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "lb" / "leaderboard_humans.md").read_text()
    assert "(n=34)" in md and "What each interval claims" in md and "judge-only intervals exclude" in md
    csv = pd.read_csv(tmp_path / "lb" / "leaderboard_humans.csv")
    assert set(csv["model"]) == {"m1", "m2"} and (csv["n_human"] == 34).all()
    assert "Average on the human scale" in r.output
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", str(run), "--humans", str(sheet), "--n-boot", "100", "--scores", "expected",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = (out / "report.html").read_text()
    assert 'id="human-anchored"' in html and 'id="calibration"' in html and "Reliability of judge-p" in html
    report = json.loads((out / "report.json").read_text())
    assert report["scores"] == "expected" and len(report["human-anchored"]) == 16
    assert {r["dimension"] for r in report["calibration"]} == set(DIMENSION_NAMES)
    assert "expected scores" in (out / "leaderboard.md").read_text() and (out / "leaderboard_humans.csv").exists()
    # the report still opens the same way without --humans: no such sections
    r = runner.invoke(app, ["report", str(run), "--n-boot", "50", "-o", str(tmp_path / "plain")])
    assert r.exit_code == 0 and 'id="human-anchored"' not in (tmp_path / "plain" / "report.html").read_text()


def test_compare_with_humans_on_the_human_scale(make_run, tmp_path):
    run_a, sheet_a, fa = _biased_run(make_run, tmp_path, "a", models=("m1",), seed=1)
    run_b, sheet_b, fb = _biased_run(make_run, tmp_path, "b", models=("m2",), seed=2)
    both = tmp_path / "both.csv"
    pd.concat([fa, fb]).to_csv(both, index=False)
    r = runner.invoke(app, ["compare", str(run_a), str(run_b), "--humans", str(both), "--n-resamples", "200",
                            "-o", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    avg = next(d for d in result["humans"]["dimensions"] if d["dimension"] == "average")
    assert avg["n_human_a"] == avg["n_human_b"] == 34 and avg["diff_lo"] < avg["diff"] < avg["diff_hi"]
    assert avg["ppi_a_lo"] < avg["judge_a"] - 25 < avg["ppi_a_hi"]
    assert "On the human scale" in (tmp_path / "cmp" / "compare.md").read_text()
    # human scores of a dialogue neither run holds: refused, nothing written
    stray = tmp_path / "stray.csv"
    pd.concat([fa, pd.DataFrame([{"dialogue_id": "zzz", "annotator": "ana", "dimension": "empathy", "score": 1}])]
              ).to_csv(stray, index=False)
    r = runner.invoke(app, ["compare", str(run_a), str(run_b), "--humans", str(stray), "-o", str(tmp_path / "cmp2")])
    assert isinstance(r.exception, AnalysisInputError) and "not among the scored dialogues of either run" in str(r.exception)
    assert not (tmp_path / "cmp2").exists()


def test_bad_human_input_for_leaderboard_and_report_writes_nothing(make_run, tmp_path):
    run, sheet, frame = _biased_run(make_run, tmp_path, n=30)
    stray = tmp_path / "stray.csv"
    pd.concat([frame, pd.DataFrame([{"dialogue_id": "zzz", "annotator": "ana", "dimension": "empathy", "score": 1}])]
              ).to_csv(stray, index=False)
    one = tmp_path / "one.csv"
    frame[frame["annotator"] == "ana"].to_csv(one, index=False)
    for cmd in ("leaderboard", "report"):
        for source, fragment in ((stray, "human-scored dialogues are not among"), (one, "from one annotator (ana)"),
                                 (tmp_path / "nope.csv", "no such file")):
            r = runner.invoke(app, [cmd, str(run), "--humans", str(source)])
            assert isinstance(r.exception, AnalysisInputError) and fragment in str(r.exception), (cmd, r.output)
            assert "\n" not in str(r.exception) and not (run / "report").exists()
    r = runner.invoke(app, ["report", str(run), "--scores", "median"])
    assert r.exit_code != 0 and not (run / "report").exists()


def test_expected_scores_move_where_the_label_does_not(make_run):
    """The embedded judge's case: the most likely label is 1 everywhere, but the P(0..4) differ."""
    dialogues, scores = [], []
    for model, tilt in (("helpful", 0.25), ("terse", 0.05)):
        for i in range(6):
            did = f"{model}-{i}"
            dialogues.append(dialogue_row(did, model, card_id=f"c{i}"))
            for dim in DIMENSION_NAMES:
                probs = [0.1, 0.45, tilt, 0.4 - tilt, 0.05]
                scores.append({"run_id": "r", "dialogue_id": did, "target_model": model, "language": "en",
                               "dimension": dim, "score": 1, "probs": probs, "expected": float(np.dot(probs, range(5))),
                               "raw": "1", "parse_status": "ok", "judge": "j", "method": "logprob", "parser": "strict",
                               "error": None, "prompt_tokens": 1, "latency_s": 0.1, "scored_at": T0})
    run = make_run("flat", dialogues=dialogues, scores=scores)
    s = load_scores([run])
    labels = build_leaderboard(s, n_boot=0).set_index("model")["Average"]
    assert labels["helpful"] == labels["terse"] == 25.0
    exp = build_leaderboard(expected_scores(s), n_boot=0).set_index("model")["Average"]
    assert exp["helpful"] == pytest.approx(25 * (0.45 + 0.5 + 3 * 0.15 + 0.2))
    assert exp["helpful"] < exp["terse"]  # terse puts more mass on 3 here: the numbers follow the vectors


def test_compare_two_judges_of_the_same_dialogues_shows_each_ones_bias(make_run, tmp_path):
    run, sheet, frame = _biased_run(make_run, tmp_path, "a", models=("m1",))
    truth = frame.groupby(["dialogue_id", "dimension"])["score"].first()
    rows = load_scores([run])
    fair = rows.assign(judge="judge-fair")
    # the fair judge says the people's label where they scored, the biased judge's label minus one elsewhere
    fair["score"] = [truth.get((d, dim), s - 1) for d, dim, s in zip(fair["dialogue_id"], fair["dimension"], fair["score"])]
    fair = fair.drop(columns=["run_dir", "card_id"]).astype(object)
    run_b = make_run("b", dialogues=[dialogue_row(d, "m1", card_id="c", run_id="b") for d in fair["dialogue_id"].unique()],
                     scores=fair.where(fair.notna(), None).to_dict("records"))
    r = runner.invoke(app, ["compare", str(run), str(run_b), "--humans", str(sheet), "--n-resamples", "100",
                            "-o", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert result["pair_by"] == "dialogue"
    avg = next(d for d in result["humans"]["dimensions"] if d["dimension"] == "average")
    assert "diff" not in avg  # one human mean, two estimates of it
    assert avg["judge_a"] - avg["ppi_a"] == pytest.approx(25.0, abs=1.0) and abs(avg["judge_b"] - avg["ppi_b"]) < 1.0
    assert "| bias A | bias B |" in (tmp_path / "cmp" / "compare.md").read_text()


def test_bench_trust_prints_its_contract(tmp_path):
    """`esc-eval bench trust` on a small folder: every timing is there, the store's two annotators
    and the human-scored dialogues are what it was asked for (the figures themselves live in README)."""
    r = runner.invoke(app, ["bench", "trust", "--dialogues", "300", "--models", "3", "--human", "40", "--no-report",
                            "--folder", str(tmp_path / "run"), "-o", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    out = json.loads((tmp_path / "b.json").read_text())
    assert out["n_dialogues"] == 300 and out["n_human_dialogues"] == 40 and out["annotators"] == 2
    assert set(out["seconds"]) >= {"load_scores", "load_humans", "calibration", "ppi", "calibration_and_ppi",
                                   "write_calibrated_rows"} and out["machine"]["cores"] >= 1
    assert out["ppi_cells"] == 8 * 3 * 2  # 3 models x 2 languages, seven dimensions and the Average
