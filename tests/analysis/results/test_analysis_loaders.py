import json
import math

import pandas as pd
import pytest

from esc_eval.analysis.results.loaders import (AnalysisInputError, load_dialogues, load_official_dialogues,
                                       load_official_scores, load_scores, parse_official_name)
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, OFFICIAL_TO_PAPER

from analysis_testdata import ESC_DATA, dialogue_row, needs_shared_data, score_rows


def test_load_scores_keeps_latest_row_per_key_and_null_scores(make_run):
    old = score_rows("d1", "m", [1, 1, 1, 1, 1, 1, 1], minutes=0)
    new = score_rows("d1", "m", [3, None, 3, 3, 3, 3, 3], minutes=5)
    other_judge = score_rows("d1", "m", [0] * 7, judge="judge-b", minutes=1)
    run = make_run("r", dialogues=[dialogue_row("d1", "m", card_id="card-9")], scores=new)
    # Written after the newer rows: the part order must not beat scored_at.
    from esc_eval.sim.runs.runfolder import RunFolder
    RunFolder(run).write_part("scores", old + other_judge)
    df = load_scores(run)
    a = df[df.judge == "judge-a"].set_index("dimension")["score"]
    assert len(df) == 14
    assert a["fluency"] == 3 and math.isnan(a["expression"])
    assert (df[df.judge == "judge-b"]["score"] == 0).all()
    assert set(df["card_id"]) == {"card-9"}


def test_load_scores_accepts_official_dimension_keys_and_rejects_unknown(make_run):
    rows = score_rows("d1", "m", {"diversity": 2, "empathic": 3})
    df = load_scores(make_run("r", scores=rows))
    assert sorted(df["dimension"]) == ["empathy", "expression"]
    bad = make_run("bad", scores=score_rows("d1", "m", {"kindness": 2}))
    with pytest.raises(AnalysisInputError, match="kindness"):
        load_scores(bad)


def test_load_scores_empty_and_missing_folder(make_run, tmp_path):
    df = load_scores(make_run("empty", dialogues=[dialogue_row("d1", "m")]))
    assert df.empty and {"score", "dimension", "judge", "card_id"} <= set(df.columns)
    with pytest.raises(AnalysisInputError, match="does not exist"):
        load_scores(tmp_path / "nope")
    with pytest.raises(AnalysisInputError, match="no run folder"):
        load_scores([])


def test_load_scores_multiple_runs(make_run):
    r1 = make_run("r1", scores=score_rows("d1", "m1", [4] * 7, run_id="r1"))
    r2 = make_run("r2", scores=score_rows("d2", "m2", [2] * 7, run_id="r2"))
    df = load_scores([r1, r2])
    assert df.groupby("target_model")["score"].mean().to_dict() == {"m1": 4.0, "m2": 2.0}


def test_load_dialogues_prefers_ok_then_latest(make_run):
    run = make_run("r", dialogues=[
        dialogue_row("d1", "m", status="ok", minutes=0),
        dialogue_row("d1", "m", status="failed", minutes=10),  # a later failed retry must not win
        dialogue_row("d2", "m", status="failed", minutes=0),
        dialogue_row("d2", "m", status="failed", minutes=3, seeker=["x"]),
    ])
    df = load_dialogues(run).set_index("dialogue_id")
    assert df.loc["d1", "status"] == "ok" and len(df.loc["d1", "turns"]) == 7
    assert df.loc["d2", "started_at"] == pd.Timestamp("2026-01-01 00:03", tz="UTC")
    assert len(df) == 2


def test_parse_official_name():
    assert parse_official_name("x/Qwen_7B_en.json") == ("Qwen_7B", "en")
    assert parse_official_name("llama3_zh.json") == ("llama3", "zh")
    with pytest.raises(AnalysisInputError, match="<model>_<language>"):
        parse_official_name("scores.json")


def test_load_official_scores_minus_one_is_null(tmp_path):
    f = tmp_path / "M_en.json"
    f.write_text(json.dumps({"0": {"fluency": -1, "tech": 4}, "1": {"fluency": 2, "tech": 0}}))
    df = load_official_scores(f)
    assert set(df["target_model"]) == {"M"} and set(df["language"]) == {"en"}
    flu = df[df.dimension == "fluency"].set_index("card_id")["score"]
    assert math.isnan(flu["0"]) and flu["1"] == 2
    assert df.loc[df.score.isna(), "parse_status"].tolist() == ["parse_failure"]
    assert set(df["dimension"]) == {"fluency", "skillful"}


@pytest.mark.parametrize("payload, match", [
    ({"0": {"fluency": 5}}, "expected an integer 0-4"),
    ({"0": {"fluency": "3"}}, "expected an integer 0-4"),
    ({"0": {"warmth": 3}}, "unknown dimension 'warmth'"),
    ({"0": [3, 3]}, "not an object"),
])
def test_load_official_scores_rejects_bad_entries(tmp_path, payload, match):
    f = tmp_path / "M_en.json"
    f.write_text(json.dumps(payload))
    with pytest.raises(AnalysisInputError, match=match):
        load_official_scores(f)


@needs_shared_data("scores")
def test_load_official_scores_shared_sample():
    df = load_official_scores(ESC_DATA / "scores")
    assert sorted(df.groupby(["target_model", "language"]).size().index.tolist()) == [
        ("Qwen_7B", "en"), ("Qwen_7B", "zh"), ("llama3", "en"), ("llama3", "zh")]
    raw = json.loads((ESC_DATA / "scores" / "llama3_en.json").read_text())
    got = df[(df.target_model == "llama3") & (df.language == "en")]
    for key, dims in raw.items():
        for k, v in dims.items():
            row = got[(got.card_id == key) & (got.dimension == OFFICIAL_TO_PAPER[k])]
            assert row["score"].item() == v
    assert set(df["dimension"]) == set(DIMENSION_NAMES)


@needs_shared_data("dialogues")
def test_load_official_dialogues_shared_sample():
    df = load_official_dialogues(ESC_DATA / "dialogues" / "Qwen_7B_en.json")
    assert len(df) == 3
    turns = df.iloc[0]["turns"]
    assert turns[0]["speaker"] == "assistant" and turns[1]["speaker"] == "seeker"
    assert not turns[1]["text"].startswith("ESC-Role")


def test_load_scores_reads_official_json_paths_beside_run_folders(make_run, tmp_path):
    off = tmp_path / "official"
    off.mkdir()
    (off / "M_zh.json").write_text(json.dumps({"0": {"fluency": 4}, "1": {"fluency": -1}}))
    run = make_run("r", scores=score_rows("d1", "A", [2] * 7))
    df = load_scores([run, off])
    assert sorted(df["target_model"].unique()) == ["A", "M"]
    m = df[df.target_model == "M"]
    assert m["score"].isna().sum() == 1 and m["language"].tolist() == ["zh", "zh"]
    only = load_scores(off / "M_zh.json")
    assert len(only) == 2


@needs_shared_data()
def test_official_dialogue_and_score_folders_load_side_by_side():
    dialogues = load_dialogues([ESC_DATA / "dialogues", ESC_DATA / "scores"])
    scores = load_scores([ESC_DATA / "dialogues", ESC_DATA / "scores"])
    assert len(dialogues) == 12 and set(dialogues["status"]) == {"ok"}
    assert len(scores) == 12 * 7
    assert set(scores["dialogue_id"]) == set(dialogues["dialogue_id"])  # same ids: scores join their dialogues
