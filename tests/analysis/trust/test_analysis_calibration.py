"""Calibration of a judge's P(0..4) against human labels: ECE and Brier by hand, recalibration on
synthetic miscalibrated judges (never a worse held-out ECE), `esc-eval analysis calibration` end to
end (a new judge's rows in the run), and bad input refused with one line and nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.trust.calibration import (TemperatureScaling, bootstrap_measures, brier, cross_fit, ece,
                                           make_recalibration, reliability)
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores
from esc_eval.cli.app import app
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from trust_testdata import human_sheet, judged_run, synthetic_judge

runner = CliRunner()

# Four items: two at confidence 0.6 (one right), one at 0.9 (right), one at 0.3 (wrong).
P = np.array([[0.1, 0.6, 0.1, 0.1, 0.1],
              [0.6, 0.1, 0.1, 0.1, 0.1],
              [0.025, 0.025, 0.9, 0.025, 0.025],
              [0.3, 0.2, 0.2, 0.2, 0.1]])
LABELS = np.array([1, 2, 2, 4])


def test_ece_brier_and_bins_by_hand():
    # bins: 0.6 -> accuracy 1/2 vs 0.6 (gap -0.1 x 2), 0.9 -> +0.1, 0.3 -> -0.3; ECE = (0.2 + 0.1 + 0.3) / 4
    assert ece(P, LABELS) == pytest.approx(0.15)
    b1 = 4 * 0.1 ** 2 + 0.4 ** 2  # label 1 at 0.6: (0.6 - 1)^2 + the four others squared
    b2 = 0.6 ** 2 + 0.1 ** 2 + 0.9 ** 2 + 2 * 0.1 ** 2  # label 2 at 0.1
    b3 = 2 * 0.025 ** 2 + 0.1 ** 2 + 2 * 0.025 ** 2
    b4 = 0.3 ** 2 + 3 * 0.2 ** 2 + 0.9 ** 2  # label 4 at 0.1
    assert brier(P, LABELS) == pytest.approx((b1 + b2 + b3 + b4) / 4)
    bins = reliability(P, LABELS)
    assert [(b["bin_lo"], b["n"], b["accuracy"]) for b in bins] == [(pytest.approx(0.3), 1, 0.0),
                                                                  (pytest.approx(0.6), 2, 0.5),
                                                                  (pytest.approx(0.9), 1, 1.0)]
    perfect = np.eye(5)[[0, 1, 2]]
    assert ece(perfect, np.array([0, 1, 2])) == 0.0 and brier(perfect, np.array([0, 1, 2])) == 0.0


def test_bootstrap_cis_hold_the_estimate_and_pair_the_difference():
    p, y = synthetic_judge(400, 2.5, seed=1)
    q = make_recalibration("temperature").fit(p, y).apply(p)
    ci = bootstrap_measures({"judge": p, "recalibrated": q}, y, n_boot=500, seed=0)
    assert ci["judge"]["ece"][0] < ece(p, y) < ci["judge"]["ece"][1]
    assert ci["judge"]["brier"][0] < brier(p, y) < ci["judge"]["brier"][1]
    lo, hi = ci["judge - recalibrated"]["ece"]
    assert 0 < lo < ece(p, y) - ece(q, y) < hi + 0.02


def test_temperature_recovers_a_known_overconfidence():
    p, y = synthetic_judge(5000, 2.0, seed=3)  # the judge sharpened the truth by 2: T = 2 undoes it
    assert TemperatureScaling().fit(p, y).temperature == pytest.approx(2.0, rel=0.1)
    p, y = synthetic_judge(5000, 0.5, seed=3)
    assert TemperatureScaling().fit(p, y).temperature == pytest.approx(0.5, rel=0.1)


def test_cross_fitting_never_scores_a_fit_on_its_own_items():
    p, y = synthetic_judge(300, 3.0, seed=2)
    folds = np.arange(300) % 5
    others, _ = synthetic_judge(50, 3.0, seed=9)
    held, rest, params, full = cross_fit("temperature", p, y, folds, others, 5)
    for k in range(5):
        fit = make_recalibration("temperature").fit(p[folds != k], y[folds != k])
        assert np.allclose(held[folds == k], fit.apply(p[folds == k]))
        assert params[k]["temperature"] == pytest.approx(fit.temperature)
    mean_of_fits = np.mean([make_recalibration("temperature").fit(p[folds != k], y[folds != k]).apply(others)
                            for k in range(5)], axis=0)
    assert np.allclose(rest, mean_of_fits) and np.allclose(rest.sum(axis=1), 1)
    assert full["temperature"] == pytest.approx(TemperatureScaling().fit(p, y).temperature)


@pytest.mark.parametrize("method", ["temperature", "isotonic"])
def test_recalibration_never_increases_held_out_ece_on_miscalibrated_judges(method):
    """Seeded sweep: over- and underconfident judges at several strengths; the held-out
    (5-fold cross-fitted) ECE and Brier of the recalibrated judge are never worse."""
    for scale in (0.3, 0.5, 1.8, 2.5, 4.0):
        for seed in range(4):
            p, y = synthetic_judge(600, scale, seed=seed)
            folds = np.random.default_rng(seed).permutation(600) % 5
            held, _, _, _ = cross_fit(method, p, y, folds, np.empty((0, 5)), 5)
            assert np.allclose(held.sum(axis=1), 1)
            assert ece(held, y) <= ece(p, y), (scale, seed, ece(held, y), ece(p, y))
            assert brier(held, y) <= brier(p, y), (scale, seed)


def test_isotonic_maps_are_monotone_and_rows_sum_to_one():
    p, y = synthetic_judge(800, 3.0, seed=4)
    iso = make_recalibration("isotonic").fit(p, y)
    grid = np.linspace(0, 1, 101)
    for x, fitted in iso.maps:
        assert np.all(np.diff(np.interp(grid, x, fitted)) >= -1e-12)
    assert np.allclose(iso.apply(p).sum(axis=1), 1)
    with pytest.raises(ValueError):
        make_recalibration("platt")


# --- the command ---------------------------------------------------------------------------
def _files(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_size for p in path.rglob("*") if p.is_file()}


@pytest.fixture
def calibrated(make_run, tmp_path):
    run, truth = judged_run(make_run, n=120)
    ids = sorted({d for d, _ in truth})[:60]
    return run, truth, human_sheet(tmp_path / "humans.csv", truth, ids)


def test_calibration_command_writes_a_recalibrated_judge(calibrated, tmp_path):
    run, truth, sheet = calibrated
    out = tmp_path / "cal"
    r = runner.invoke(app, ["analysis", "calibration", str(run), "--humans", str(sheet), "--n-boot", "200", "-o", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads((out / "calibration.json").read_text())
    table = pd.DataFrame(data["rows"])
    assert set(table["dimension"]) == set(DIMENSION_NAMES) and (table["n_human"] == 60).all()
    assert (table["n_other"] == 60).all() and (table["ece_recal"] < table["ece"]).all()
    assert (table["ece_lo"] <= table["ece"]).all() and (table["fit"].map(lambda f: f["temperature"]) > 1.5).all()
    assert (out / "calibration_judge_p.png").stat().st_size > 10_000 and "| judge-p | Fluency | 60 |" in (out / "calibration.md").read_text()
    scores = load_scores([run])
    new = scores[scores["judge"] == "judge-p+cal:temperature"]
    old = scores[scores["judge"] == "judge-p"]
    assert len(new) == len(old) == 120 * 7
    probs = np.stack(new["probs"].to_numpy())
    assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    assert np.allclose(new["expected"], probs @ np.arange(5), atol=1e-4)
    assert (new["score"].to_numpy() == probs.argmax(axis=1)).all()
    # temperature keeps the most likely label and softens the overconfident vectors
    merged = new.merge(old, on=["dialogue_id", "dimension"], suffixes=("", "_old"))
    assert (merged["score"] == merged["score_old"]).all()
    assert (np.stack(merged["probs"]).max(axis=1) < np.stack(merged["probs_old"]).max(axis=1) + 1e-6).all()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["calibration"]["judge-p+cal:temperature"]["from_judge"] == "judge-p"
    # the leaderboard reads the new judge's expected scores beside the old
    r = runner.invoke(app, ["leaderboard", str(run), "--scores", "expected", "--n-boot", "50", "-o", str(tmp_path / "lb")])
    assert r.exit_code == 0, r.output
    lb = pd.read_csv(tmp_path / "lb" / "leaderboard.csv")
    assert set(lb["judge"]) == {"judge-p", "judge-p+cal:temperature"}
    assert "expected scores" in (tmp_path / "lb" / "leaderboard.md").read_text()


def test_isotonic_and_no_write(calibrated, tmp_path):
    run, _, sheet = calibrated
    before = _files(run)
    r = runner.invoke(app, ["analysis", "calibration", str(run), "--humans", str(sheet), "--method", "isotonic",
                            "--no-write", "--dimension", "empathy", "--n-boot", "100", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "o" / "calibration.json").read_text())["rows"]
    assert [x["dimension"] for x in rows] == ["empathy"] and rows[0]["calibrated_judge"] == "judge-p+cal:isotonic"
    assert _files(run) == before  # --no-write: the run is as it was


def _refused(args: list[str], run: Path, fragment: str) -> None:
    before = _files(run)
    r = runner.invoke(app, args)
    assert r.exit_code != 0 and isinstance(r.exception, AnalysisInputError), r.output
    msg = str(r.exception)
    assert fragment in msg and "\n" not in msg, msg
    assert _files(run) == before, "nothing may be written on bad input"


def test_bad_input_one_line_and_nothing_written(make_run, calibrated, tmp_path):
    run, truth, sheet = calibrated
    base = ["analysis", "calibration", str(run), "-o", str(run / "report")]
    # human scores for dialogues the run does not hold
    stray = tmp_path / "stray.csv"
    pd.concat([pd.read_csv(sheet), pd.DataFrame([{"dialogue_id": "elsewhere", "annotator": "ana", "dimension": "empathy",
                                                  "score": 2}])]).to_csv(stray, index=False)
    _refused([*base, "--humans", str(stray)], run, "1 of 61 human-scored dialogues are not among")
    # one annotator, in a sheet and in an annotate store
    one = tmp_path / "one.csv"
    human_sheet(one, truth, sorted({d for d, _ in truth})[:60], annotators=("ana",))
    _refused([*base, "--humans", str(one)], run, "every score is from one annotator (ana)")
    store = AnnotationStore(tmp_path / "store.sqlite")
    ids = sorted({d for d, _ in truth})[:30]
    store.create_study("s1", {}, {"ana": [(d, "en") for d in ids]}, "v1")
    for d in ids:
        for dim in DIMENSION_NAMES:
            store.save_answer("s1", "ana", d, dim, truth[(d, dim)])
    store.close()
    _refused([*base, "--humans", str(tmp_path / "store.sqlite")], run, "every score is from one annotator")
    _refused([*base, "--humans", str(tmp_path / "store.sqlite"), "--study", "nope", "--allow-one-annotator"], run,
             "no study 'nope'")
    # ... which --allow-one-annotator accepts (and the store is read as it is)
    r = runner.invoke(app, [*base, "--humans", str(tmp_path / "store.sqlite"), "--allow-one-annotator", "--no-write",
                            "--n-boot", "0", "-o", str(tmp_path / "from-store")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "from-store" / "calibration.json").read_text())["rows"][0]["n_human"] == 30
    # a judge without probabilities (generate) and a dimension without them
    gen, gtruth = judged_run(make_run, n=40, name="gen", judge="judge-g", probs=False)
    gsheet = human_sheet(tmp_path / "g.csv", gtruth, sorted({d for d, _ in gtruth}))
    _refused(["analysis", "calibration", str(gen), "--humans", str(gsheet)], gen, "no judge in the runs gives P(0..4)")
    _refused(["analysis", "calibration", str(gen), "--humans", str(gsheet), "--judge", "judge-g"], gen,
             "judge judge-g, Fluency: no P(0..4) in its score rows")
    part = next((run / "scores").glob("part-*.parquet"))
    t = pq.read_table(part).to_pandas()
    t.loc[t["dimension"] == "humanoid", "probs"] = None
    t.loc[t["dimension"] == "humanoid", "probs_status"] = None
    mixed = make_run("mixed", scores=t.astype(object).where(t.notna(), None).to_dict("records"))
    _refused(["analysis", "calibration", str(mixed), "--humans", str(sheet)], mixed, "Humanoid: no P(0..4)")
    # too few human scores to fit and check on held-out folds
    few = human_sheet(tmp_path / "few.csv", truth, sorted({d for d, _ in truth})[:6])
    _refused([*base, "--humans", str(few)], run, "6 human-scored dialogues carry")
    _refused([*base, "--humans", str(tmp_path / "missing.csv")], run, "no such file or folder")


def test_a_recalibration_that_does_not_help_is_named():
    from esc_eval.analysis.trust.calibration_runs import CalibrationResult, worse_notes

    table = pd.DataFrame([{"judge": "j", "dimension": "empathy", "ece": 0.10, "ece_recal": 0.12, "n_human": 16},
                          {"judge": "j", "dimension": "fluency", "ece": 0.30, "ece_recal": 0.05, "n_human": 16}])
    notes = worse_notes(CalibrationResult("temperature", 5, "x", table, pd.DataFrame(), pd.DataFrame()))
    assert notes == ["j: the held-out ECE rose on Empathy (16 human-scored dialogues): the recalibration does not help there"]
