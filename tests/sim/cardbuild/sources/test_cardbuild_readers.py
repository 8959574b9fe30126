"""Source readers: every Table 5 format to SourceItems; bad files and records become rejections."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from esc_eval.sim.cardbuild import detect_dataset, read_source
from esc_eval.sim.cardbuild.sources.items import canonical_dataset

SAMPLES = Path(__file__).resolve().parents[4] / "sim" / "cardbuild" / "samples"
SHARED = Path(__file__).resolve().parents[4].parent / "shared"
FAILED_ESCONV = SHARED / "data" / "esconv" / "FailedESConv.json"


@pytest.mark.parametrize(
    "path, dataset, n_items, kind, language",
    [
        ("epitome", "epitome", 3, "qa", "en"),
        ("mhp_reddit.jsonl", "mhp_reddit", 2, "qa", "en"),
        ("psych8k.json", "psych8k", 2, "qa", "en"),
        ("psyqa.json", "psyqa", 3, "qa", "zh"),
        ("extes.json", "extes", 2, "md", "en"),
        ("smile", "smile", 2, "md", "zh"),
    ],
)
def test_each_sample_format_is_detected_and_read(path, dataset, n_items, kind, language):
    res = read_source(SAMPLES / path)  # no dataset given: detected from the fields
    assert len(res.items) == n_items
    assert {it.dataset for it in res.items} == {dataset}
    assert {it.kind for it in res.items} == {kind}
    assert {it.language for it in res.items} == {language}
    for it in res.items:
        if kind == "qa":
            assert it.text and it.turns is None
        else:
            assert it.turns and any(t.speaker == "seeker" for t in it.turns)
    assert len({it.id for it in res.items}) == n_items


def test_epitome_post_repeated_across_files_is_read_once():
    res = read_source(SAMPLES / "epitome", "EPITOME")
    assert [it.native_id for it in res.items] == ["s1", "s2", "s3"]
    assert res.items[0].text.startswith("My manager moved me to the night shift")


def test_bad_records_are_rejected_with_reasons_and_the_rest_read():
    res = read_source(SAMPLES / "mhp_reddit.jsonl", "MHP")
    assert [it.native_id for it in res.items] == ["t3_a1", "t3_a3"]
    reasons = {r.locator: r.reason for r in res.rejected}
    assert "malformed JSON" in reasons["line 4"]
    assert "removed/deleted" in reasons["record 1"]
    res = read_source(SAMPLES / "psych8k.json")
    assert len(res.items) == 2 and res.rejected[0].reason == "empty input (the client's text)"


def test_unknown_format_non_utf8_and_unknown_layout_are_rejected_files():
    res = read_source(SAMPLES / "bad")
    assert res.items == []
    by_file = {Path(r.source_file).name: r.reason for r in res.rejected}
    assert "unknown file format '.txt'" in by_file["notes.txt"]
    assert by_file["latin1.json"].startswith("not UTF-8 text")
    assert "unknown source format" in by_file["unknown_layout.json"]
    assert "utterances" in by_file["unknown_layout.json"]  # names the fields it saw


def test_missing_file_and_unknown_dataset_name_are_rejections(tmp_path):
    assert read_source(tmp_path / "nope.json").rejected[0].reason == "file not found"
    res = read_source(SAMPLES / "psyqa.json", "NotADataset")
    assert res.items == [] and "unknown dataset 'NotADataset'" in res.rejected[0].reason


@pytest.mark.parametrize("seeker, supporter", [("seeker", "supporter"), ("speaker", "listener")])
def test_esconv_both_speaker_conventions(tmp_path, seeker, supporter):
    record = {"experience_type": "Current Experience", "emotion_type": "anxiety", "problem_type": "job crisis",
              "situation": "I may lose my job next month.", "survey_score": {},
              "dialog": [{"speaker": seeker, "annotation": {}, "content": "Hi, I'm worried about work.\n"},
                         {"speaker": supporter, "annotation": {"strategy": "Question"}, "content": "What happened?"},
                         {"speaker": seeker, "annotation": {"feedback": "4"}, "content": "They announced layoffs."}]}
    p = tmp_path / "esconv.json"
    p.write_text(json.dumps([record]), encoding="utf-8")
    res = read_source(p)
    (item,) = res.items
    assert item.dataset == "esconv" and item.kind == "md" and item.situation == "I may lose my job next month."
    assert [t.speaker for t in item.turns] == ["seeker", "supporter", "seeker"]
    assert item.turns[0].text == "Hi, I'm worried about work."
    assert item.metadata["problem_type"] == "job crisis"


def test_esconv_hf_split_layout_and_unknown_speaker(tmp_path):
    p = tmp_path / "train.jsonl"
    rows = [{"situation": "s", "dialog": [{"text": "I failed again", "speaker": "usr"}, {"text": "I'm sorry", "speaker": "sys"}]},
            {"situation": "s", "dialog": [{"text": "hello", "speaker": "robot"}]}]
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    res = read_source(p, "ESConv")
    assert [t.speaker for t in res.items[0].turns] == ["seeker", "supporter"]
    assert "unknown speaker 'robot'" in res.rejected[0].reason


def test_smile_both_layouts_and_detection():
    res = read_source(SAMPLES / "smile")
    a, b = res.items
    assert a.native_id == "101" and a.turns[1].speaker == "supporter" and a.situation is None
    assert b.turns[0].text.startswith("我妈妈上个月做了手术") and b.turns[1].speaker == "supporter"
    assert detect_dataset(["求助者：你好"]) == "smile"
    assert detect_dataset({"seeker_post": "x"}) == "epitome"
    assert detect_dataset({"foo": 1}) is None


def test_limit_and_dataset_aliases():
    assert len(read_source(SAMPLES / "psyqa.json", "psyqa", limit=1).items) == 1
    assert canonical_dataset("ESconv") == "esconv" and canonical_dataset("MHP") == "mhp_reddit"
    assert canonical_dataset("Psych") == "psych8k" and canonical_dataset("smile") == "smile"


@pytest.mark.skipif(not FAILED_ESCONV.exists(), reason=f"shared ESConv sample not present at {FAILED_ESCONV}")
def test_failed_esconv_shared_sample():
    res = read_source(FAILED_ESCONV)
    assert len(res.items) == 196 and res.rejected == []
    assert all(it.dataset == "esconv" and it.kind == "md" and it.language == "en" for it in res.items)
    first = res.items[0]
    assert first.situation.startswith("General depression made worse")
    # the file's "speaker" is the seeker, "listener" the supporter
    assert first.turns[0].speaker == "seeker" and first.turns[2].speaker == "supporter"
    assert first.turns[0].text == "Hey there"
    assert len({it.id for it in res.items}) == 196
