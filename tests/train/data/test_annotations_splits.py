"""Annotation tables, their validation, the judge examples and the seeded 7:1:2 splits.

No public copy of the paper's human annotations exists: these tests build their own
annotation tables (synthetic dialogues and scores)."""
from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.train.data.annotations import aggregate_annotations, load_annotations, load_official_scores, validate_rows
from esc_eval.train.data.dialogue_sources import SourceDialogue
from esc_eval.train.errors import TrainInputError
from esc_eval.train.data.judge_data import adapter_name, join_annotations, tokenize_judge
from esc_eval.train.data.splits import split_annotations


def table(n_dialogues=70, models=("m1", "m2")):
    rows = []
    for i in range(n_dialogues):
        for j, dim in enumerate(DIMENSION_NAMES):
            rows.append({"dialogue_id": f"d{i}", "dimension": dim, "score": (i + j) % 5, "annotator": "a1"})
    return rows


def dialogues(n=70, models=("m1", "m2"), bilingual=False):
    return [SourceDialogue(f"d{i}", "zh" if bilingual and i % 2 else "en", [("assistant", "Hello."), ("seeker", f"Problem {i}.")],
                           target_model=models[i % len(models)]) for i in range(n)]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json", "jsonl"])
def test_table_formats_roundtrip(tmp_path, fmt):
    rows = table(3)
    path = tmp_path / f"ann.{fmt}"
    df = pd.DataFrame(rows)
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path)
    elif fmt == "json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("\n".join(json.dumps(r) for r in rows))
    got = load_annotations(path)
    assert len(got) == 21 and {a.dimension for a in got} == set(DIMENSION_NAMES)
    assert got[0].dialogue_id == "d0" and got[0].score == 0 and got[0].annotator == "a1"


def test_official_keys_are_normalised():
    [a] = validate_rows([{"dialogue_id": 5, "dimension": "empathic", "score": 3.0}])
    assert a.dimension == "empathy" and a.dialogue_id == "5" and a.score == 3 and a.annotator == "annotator"


@pytest.mark.parametrize("row,match", [
    ({"dialogue_id": "d", "dimension": "kindness", "score": 2}, r"row 0: field 'dimension'.*kindness"),
    ({"dialogue_id": "d", "dimension": "fluency", "score": 5}, r"row 0: field 'score' is 5"),
    ({"dialogue_id": "d", "dimension": "fluency", "score": -1}, r"field 'score'"),
    ({"dialogue_id": "d", "dimension": "fluency", "score": 2.5}, r"field 'score' is 2.5"),
    ({"dialogue_id": "d", "dimension": "fluency", "score": "high"}, r"field 'score' is 'high'"),
    ({"dimension": "fluency", "score": 1}, r"missing field 'dialogue_id'"),
])
def test_bad_rows_are_named(row, match):
    with pytest.raises(TrainInputError, match=match):
        validate_rows([row])


def test_bad_row_in_a_csv_names_the_file_and_row(tmp_path):
    path = tmp_path / "ann.csv"
    pd.DataFrame([{"dialogue_id": "d1", "dimension": "fluency", "score": 2},
                  {"dialogue_id": "d2", "dimension": "fluency", "score": 7}]).to_csv(path, index=False)
    with pytest.raises(TrainInputError, match=r"ann.csv row 1: field 'score' is 7"):
        load_annotations(path)


def test_unknown_dialogue_id_is_an_error_listing_ids():
    anns = validate_rows([{"dialogue_id": "d1", "dimension": "fluency", "score": 2},
                          {"dialogue_id": "ghost", "dimension": "fluency", "score": 2}])
    with pytest.raises(TrainInputError, match=r"1 annotated dialogue id\(s\) have no dialogue.*'ghost'"):
        join_annotations(anns, dialogues(3))


def test_median_aggregation_and_each():
    rows = [{"dialogue_id": "d1", "dimension": "fluency", "score": s, "annotator": a}
            for s, a in [(1, "a"), (4, "b"), (3, "c"), (2, "d")]]
    anns = validate_rows(rows)
    [m] = aggregate_annotations(anns, "median")
    assert m.score == 2 and m.annotator == "median"  # low median of 1,2,3,4
    assert len(aggregate_annotations(anns, "each")) == 4


def test_official_scores_as_annotations(esc_samples):
    anns = load_official_scores(esc_samples / "esc-eval" / "scores" / "llama3_en.json")
    assert len(anns) == 21 and anns[0].dialogue_id == "llama3_en:0"
    from esc_eval.train.data.dialogue_sources import load_dialogues

    ex = join_annotations(anns, load_dialogues(esc_samples / "esc-eval" / "dialogues" / "llama3_en.json"))
    assert {e.target_model for e in ex} == {"llama3"} and {e.language for e in ex} == {"en"}


def test_split_is_7_1_2_per_dimension_and_seeded():
    ex = join_annotations(validate_rows(table(70)), dialogues(70))
    splits = split_annotations(ex, seed=1)
    for dim in DIMENSION_NAMES:
        counts = {s: sum(1 for e in splits[s] if e.dimension == dim) for s in splits}
        assert counts == {"train": 49, "validation": 7, "test": 14}
    again = split_annotations(ex, seed=1)
    assert [(e.dialogue_id, e.dimension) for e in again["test"]] == [(e.dialogue_id, e.dimension) for e in splits["test"]]
    other = split_annotations(ex, seed=2)
    assert {(e.dialogue_id, e.dimension) for e in other["test"]} != {(e.dialogue_id, e.dimension) for e in splits["test"]}


def test_split_is_stratified_by_dimension_and_language():
    ex = join_annotations(validate_rows(table(80)), dialogues(80, bilingual=True))
    splits = split_annotations(ex, seed=0)
    for dim in DIMENSION_NAMES:
        for lang in ("en", "zh"):
            counts = {s: sum(1 for e in splits[s] if e.dimension == dim and e.language == lang) for s in splits}
            assert counts == {"train": 28, "validation": 4, "test": 8}


def test_annotators_of_one_label_stay_together():
    rows = [dict(r, annotator=a) for r in table(20) for a in ("a", "b")]
    ex = join_annotations(aggregate_annotations(validate_rows(rows), "each"), dialogues(20))
    splits = split_annotations(ex, seed=0)
    where = {}
    for s, items in splits.items():
        for e in items:
            assert where.setdefault((e.dialogue_id, e.dimension), s) == s


def test_dialogue_grouping_has_no_leak():
    ex = join_annotations(validate_rows(table(50)), dialogues(50))
    splits = split_annotations(ex, seed=0, group="dialogue")
    ids = {s: {e.dialogue_id for e in items} for s, items in splits.items()}
    assert not (ids["train"] & ids["test"]) and not (ids["train"] & ids["validation"])
    assert Counter(len(v) for v in ids.values()) and len(ids["test"]) == 10


def test_leave_one_model_out():
    ex = join_annotations(validate_rows(table(40)), dialogues(40, models=("m1", "m2", "m3", "m4")))
    splits = split_annotations(ex, seed=0, holdout_model="m3")
    assert {e.target_model for e in splits["test"]} == {"m3"}
    assert "m3" not in {e.target_model for e in splits["train"] + splits["validation"]}
    assert len(splits["test"]) == 70
    per_dim_val = Counter(e.dimension for e in splits["validation"])
    assert set(per_dim_val.values()) == {round(30 / 8)}  # 30 units per dimension, train:val = 7:1
    with pytest.raises(TrainInputError, match="holdout_model 'nope'"):
        split_annotations(ex, holdout_model="nope")


def test_adapter_names_follow_the_official_layout():
    assert adapter_name("empathy", "zh") == "empathic"
    assert adapter_name("humanoid", "en") == "human_en"
    assert adapter_name("expression", "en") == "diversity_en"
    assert adapter_name("skillful", "zh") == "tech"


def test_judge_example_loss_on_the_digit_only(tokenizer):
    [ex] = join_annotations(validate_rows([{"dialogue_id": "d1", "dimension": "empathy", "score": 3}]), dialogues(2))
    tok = tokenize_judge(tokenizer, ex, max_length=100000)
    labelled = [i for i, lab in zip(tok.input_ids, tok.labels) if lab != -100]
    assert tokenizer.decode(labelled) == "3<|im_end|>\n"
    prompt = tokenizer.decode(tok.input_ids[: tok.labels.index(labelled[0])])
    assert "Problem 1." in prompt and prompt.endswith("<|im_start|>assistant\n")


def test_judge_overflow_shortens_turns_or_drops(tokenizer):
    long = SourceDialogue("d0", "en", [("assistant", "Hello. " * 400), ("seeker", "I am stressed. " * 400)])
    [ex] = join_annotations(validate_rows([{"dialogue_id": "d0", "dimension": "fluency", "score": 4}]), [long])
    full = tokenize_judge(tokenizer, ex, max_length=100000)
    limit = len(full.input_ids) // 2
    short = tokenize_judge(tokenizer, ex, max_length=limit)
    assert short.truncated and len(short.input_ids) <= limit
    assert tokenizer.decode([i for i, lab in zip(short.input_ids, short.labels) if lab != -100]) == "4<|im_end|>\n"
    assert tokenize_judge(tokenizer, ex, max_length=limit, overflow="drop") is None
    with pytest.raises(TrainInputError, match="does not fit"):
        tokenize_judge(tokenizer, ex, max_length=limit, overflow="error")
