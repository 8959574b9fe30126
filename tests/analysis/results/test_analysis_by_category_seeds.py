"""Table 2 by category, CIs clustered over seeds, the across-seed spread, and `leaderboard --by`."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis import build_leaderboard, build_leaderboard_by, load_dialogues, load_scores, seed_spread
from esc_eval.analysis.results.leaderboard import bootstrap_table_ci, cluster_bootstrap_table_ci
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.report.report import write_report

CATS = {"c1": ("Life", "Work", "Stress"), "c2": ("Life", "Family", "Divorce"), "c3": ("Emotion", "Mood", "Sad"),
        "c4": ("Emotion", "Mood", "Anxious"), "c5": ("Human", "Love", "Breakup"), "c6": ("Human", "Friends", "Lonely")}


def seeded_run(make_run, seeds=(0, 1, 2), shift=0):
    """Two models x 6 cards x seeds; model-b's scores move with the seed (so the seeds differ)."""
    dialogues, scores = [], []
    for seed in seeds:
        for i, (card, cats) in enumerate(CATS.items()):
            for model, base in (("model-a", 3), ("model-b", 1)):
                did = f"{model}-{card}-{seed}"
                row = dialogue_row(did, model, card_id=card, categories=cats)
                row["seed"] = seed
                dialogues.append(row)
                value = min(4, base + (i % 2) + (seed + shift if model == "model-b" else 0) % 3)
                scores += score_rows(did, model, [value] * 7)
    return make_run("run", dialogues=dialogues, scores=scores)


def test_by_category_gives_one_table_per_top_category_with_counts_and_cis(make_run):
    run = seeded_run(make_run)
    df = build_leaderboard_by(load_scores(run), load_dialogues(run), "category", n_boot=200)
    assert list(df.columns[:3]) == ["category", "language", "group"]
    assert sorted(df["category"].unique()) == ["Emotion", "Human", "Life"]
    assert (df["n_dialogues"] == 6).all() and len(df) == 6  # 2 cards x 3 seeds per model and category
    assert df["Average_lo"].notna().all() and (df["Average_lo"] <= df["Average"]).all()
    fine = build_leaderboard_by(load_scores(run), load_dialogues(run), "category_3", n_boot=0)
    assert len(fine["category_3"].unique()) == 6
    with pytest.raises(AnalysisInputError, match="--by 'colour'"):
        build_leaderboard_by(load_scores(run), load_dialogues(run), "colour")


def test_cis_resample_cards_not_seeds():
    rng = np.random.default_rng(1)
    one = rng.integers(0, 5, size=(12, 7)).astype(float)
    # the same dialogue scores three times (three seeds that agree): no more information than once
    three = np.repeat(one, 3, axis=0)
    cards = np.repeat(np.arange(12), 3)
    lo1, hi1 = bootstrap_table_ci(one, n_boot=500, seed=3)
    loc, hic = cluster_bootstrap_table_ci(three, cards, n_boot=500, seed=3)
    np.testing.assert_allclose(loc, lo1)
    np.testing.assert_allclose(hic, hi1)
    lon, hin = bootstrap_table_ci(three, n_boot=500, seed=3)  # treating seeds as independent is overconfident
    assert (hin - lon)[-1] < (hic - loc)[-1]


def test_leaderboard_notes_the_clustering(make_run):
    run = seeded_run(make_run)
    lb = build_leaderboard(load_scores(run), n_boot=100)
    assert lb["notes"].str.contains("CI resamples 6 cards").all()


def test_seed_spread_per_model(make_run):
    run = seeded_run(make_run)
    spread = seed_spread(load_scores(run), load_dialogues(run)).set_index("model")
    assert spread.loc["model-a", "n_seeds"] == 3 and spread.loc["model-a", "seed_sd"] == 0
    assert spread.loc["model-b", "seed_sd"] > 0 and spread.loc["model-b", "seed_min"] < spread.loc["model-b", "seed_max"]
    assert spread.loc["model-b", "per_seed"].startswith("0: ")


def test_report_has_by_category_and_seed_sections(make_run, tmp_path):
    run = seeded_run(make_run)
    paths = write_report([run], tmp_path / "report", n_boot=50)
    md = paths["markdown"].read_text()
    assert "Leaderboard by top category" in md and "Generation profile and seeds" in md
    assert "model-b" in md.split("Generation profile and seeds")[1]


def test_cli_leaderboard_by_category(make_run, tmp_path):
    run = seeded_run(make_run)
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "leaderboard", str(run), "--by", "category",
                           "--n-boot", "50", "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    table = pd.read_csv(out["csv"])
    assert set(table["category"]) == {"Emotion", "Human", "Life"}
    assert "### category: Life (12 dialogues)" in (tmp_path / "out" / "leaderboard_by_category.md").read_text()


def test_cli_leaderboard_by_language_gives_one_table_per_language(make_run, tmp_path):
    """`--by language` failed with "score frame lacks columns ['language']" (the split dropped the column
    every Table 2 row is keyed by)."""
    dialogues, scores = [], []
    for language, base in (("en", 3), ("zh", 1)):
        for card in ("c1", "c2", "c3"):
            did = f"m-{card}-{language}"
            dialogues.append(dialogue_row(did, "model-a", card_id=card, language=language))
            scores += score_rows(did, "model-a", [base] * 7, language=language)
    run = make_run("run", dialogues=dialogues, scores=scores)
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "leaderboard", str(run), "--by", "language",
                           "--n-boot", "20", "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(json.loads(proc.stdout)["csv"])
    assert sorted(table["language"]) == ["en", "zh"] and list(table["n_dialogues"]) == [3, 3]
    assert sorted(table["Average"]) == [25.0, 75.0]
    md = (tmp_path / "out" / "leaderboard_by_language.md").read_text()
    assert "### language: en (3 dialogues)" in md and "### language: zh (3 dialogues)" in md
