import json
import math

import numpy as np
import pandas as pd
import pytest

from esc_eval.analysis.results.leaderboard import (VALUE_COLUMNS, build_leaderboard, format_cell, leaderboard_markdown,
                                           write_leaderboard)
from esc_eval.analysis.results.loaders import AnalysisInputError, load_official_scores, load_scores
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS

from analysis_testdata import ESC_DATA, needs_shared_data, score_rows


def frame(*row_lists) -> pd.DataFrame:
    df = pd.DataFrame([r for rows in row_lists for r in rows])
    df["score"] = df["score"].astype("float64")
    return df


def test_values_are_mean_times_25_and_average_of_seven():
    df = frame(score_rows("d1", "A", [4, 3, 2, 1, 0, 4, 3]), score_rows("d2", "A", [2, 3, 4, 1, 0, 0, 1]))
    lb = build_leaderboard(df, n_boot=200)
    row = lb.iloc[0]
    expected = [75.0, 75.0, 75.0, 25.0, 0.0, 50.0, 50.0]
    assert [row[c] for c in VALUE_COLUMNS[:7]] == expected
    assert row["Average"] == pytest.approx(np.mean(expected))
    assert row["n_dialogues"] == 2 and row["parse_failure_rate"] == 0.0


def test_null_scores_count_as_parse_failures_not_zeros():
    df = frame(score_rows("d1", "A", [4, None, 4, 4, 4, 4, 4]), score_rows("d2", "A", [2] * 7))
    row = build_leaderboard(df, n_boot=100).iloc[0]
    assert row["Expression"] == 50.0  # only d2's 2 counts, not (0 + 2) / 2
    assert row["parse_failure_rate"] == pytest.approx(1 / 14)


def test_missing_dimension_gives_no_average_and_a_note():
    rows = [r for r in score_rows("d1", "A", [3] * 7) + score_rows("d2", "A", [2] * 7) if r["dimension"] != "overall"]
    row = build_leaderboard(frame(rows), n_boot=50).iloc[0]
    assert math.isnan(row["Overall"]) and math.isnan(row["Average"])
    assert "Overall" in row["notes"]


def test_single_dialogue_has_no_ci_and_says_so():
    row = build_leaderboard(frame(score_rows("d1", "A", [3] * 7)), n_boot=100).iloc[0]
    assert row["Fluency"] == 75.0 and math.isnan(row["Fluency_lo"]) and math.isnan(row["Average_hi"])
    assert "no confidence interval" in row["notes"]
    assert format_cell(row["Fluency"], row["Fluency_lo"], row["Fluency_hi"]) == "75.00"


def test_ci_brackets_the_mean_matches_normal_theory_and_is_seeded():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(400):
        rows += score_rows(f"d{i}", "A", rng.integers(0, 5, size=7).tolist())
    df = frame(rows)
    lb = build_leaderboard(df, n_boot=2000, seed=3)
    row = lb.iloc[0]
    for c in VALUE_COLUMNS:
        assert row[f"{c}_lo"] < row[c] < row[f"{c}_hi"]
    flu = df[df.dimension == "fluency"]["score"] * 25
    half = 1.96 * flu.std(ddof=1) / math.sqrt(len(flu))
    assert (row["Fluency_hi"] - row["Fluency_lo"]) / 2 == pytest.approx(half, rel=0.15)
    again = build_leaderboard(df, n_boot=2000, seed=3).iloc[0]
    assert again["Average_lo"] == row["Average_lo"]


def test_constant_scores_give_a_zero_width_interval():
    df = frame(*[score_rows(f"d{i}", "A", [2] * 7) for i in range(5)])
    row = build_leaderboard(df, n_boot=100).iloc[0]
    assert row["Fluency_lo"] == row["Fluency_hi"] == 50.0


def test_mixed_judges_are_separate_rows_with_a_note():
    df = frame(score_rows("d1", "A", [4] * 7, judge="j1"), score_rows("d1", "A", [0] * 7, judge="j2"),
               score_rows("d2", "A", [4] * 7, judge="j1"), score_rows("d2", "A", [0] * 7, judge="j2"))
    lb = build_leaderboard(df, n_boot=50)
    assert sorted(lb["judge"]) == ["j1", "j2"]
    assert set(lb["Average"]) == {100.0, 0.0}  # never 50: judges are not averaged together
    assert all("several judges" in n for n in lb["notes"])


def test_rows_ordered_by_language_then_paper_group_order():
    df = frame(score_rows("a", "Dom", [4] * 7), score_rows("b", "Close", [1] * 7), score_rows("c", "Open", [2] * 7),
               score_rows("d", "Close", [1] * 7, language="zh"), score_rows("e", "Stray", [4] * 7))
    lb = build_leaderboard(df, groups={"Dom": "domain", "Close": "close", "Open": "open"}, n_boot=0)
    assert lb[["language", "model"]].values.tolist() == [
        ["en", "Close"], ["en", "Open"], ["en", "Dom"], ["en", "Stray"], ["zh", "Close"]]
    assert lb.set_index("model").loc["Stray", "group"] == "unassigned"


def test_empty_and_bad_frames():
    empty = build_leaderboard(frame(score_rows("d", "A", [1])).iloc[0:0], n_boot=10)
    assert empty.empty and "Fluency_lo" in empty.columns
    assert "empty" in leaderboard_markdown(empty)
    with pytest.raises(AnalysisInputError, match="lacks columns"):
        build_leaderboard(pd.DataFrame({"score": [1.0]}))


def test_markdown_and_files(tmp_path):
    df = frame(score_rows("d1", "A", [4, 3, 2, 1, 0, 4, 3]), score_rows("d2", "A", [2, 3, 4, 1, 0, 0, 1]),
               score_rows("d1", "B", [1] * 7), score_rows("d2", "B", [1] * 7))
    lb = build_leaderboard(df, n_boot=100)
    md = leaderboard_markdown(lb)
    row_a = next(line for line in md.splitlines() if "| A |" in line)
    lo, hi = lb.iloc[0]["Fluency_lo"], lb.iloc[0]["Fluency_hi"]
    assert f"**75.00 [{lo:.1f}, {hi:.1f}]**" in row_a
    assert format_cell(63.781, 58.14, 69.22) == "63.78 [58.1, 69.2]"
    paths = write_leaderboard(lb, tmp_path / "out")
    assert paths["markdown"].read_text().count("| A |") == 1
    back = pd.read_csv(paths["csv"])
    assert back["Fluency"].tolist() == lb["Fluency"].tolist()


def test_from_run_folder(make_run):
    run = make_run("r", scores=score_rows("d1", "A", [3] * 7) + score_rows("d2", "A", [1] * 7))
    row = build_leaderboard(load_scores(run), n_boot=100).iloc[0]
    assert row["Average"] == 50.0


@needs_shared_data("scores")
def test_official_samples_give_hand_computed_x25_values():
    lb = build_leaderboard(load_official_scores(ESC_DATA / "scores"), n_boot=200)
    assert len(lb) == 4
    for f in sorted((ESC_DATA / "scores").glob("*.json")):
        raw = json.loads(f.read_text())
        model, lang = f.stem.rsplit("_", 1)
        row = lb[(lb.model == model) & (lb.language == lang)].iloc[0]
        per_dim = []
        for paper, official in DIMENSIONS.items():
            vals = [entry[official] for entry in raw.values()]
            expected = sum(vals) / len(vals) * 25
            per_dim.append(expected)
            assert row[VALUE_COLUMNS[DIMENSION_NAMES.index(paper)]] == pytest.approx(expected)
        assert row["Average"] == pytest.approx(sum(per_dim) / 7)
        assert row["n_dialogues"] == len(raw)


def test_small_samples_get_a_rough_ci_note():
    small = build_leaderboard(frame(*[score_rows(f"d{i}", "A", [i % 5] * 7) for i in range(3)]), n_boot=50).iloc[0]
    big = build_leaderboard(frame(*[score_rows(f"d{i}", "A", [i % 5] * 7) for i in range(12)]), n_boot=50).iloc[0]
    assert "rough" in small["notes"] and not math.isnan(small["Fluency_lo"])
    assert big["notes"] == ""
