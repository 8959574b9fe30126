"""Dialogue sources: official JSON, ESConv (both speaker conventions), run folders, shared samples."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from esc_eval.train.data.dialogue_sources import (load_dialogues, load_esconv_dialogues, load_official_dialogues,
                                             load_run_dialogues)
from esc_eval.train.errors import TrainInputError
from train_testdata import write_official_dialogues


def test_official_json_fullwidth_and_ascii_colon(tmp_path):
    path = write_official_dialogues(tmp_path / "mymodel_en.json", {
        "0": ["AI assistant：Hello, tell me.", "ESC-Role：I failed my exam.", "AI assistant: That is hard.",
              "ESC-Role：Yes: very hard."],
    })
    [d] = load_official_dialogues(path)
    assert d.dialogue_id == "mymodel_en:0"
    assert d.target_model == "mymodel" and d.language == "en"
    assert d.turns == [("assistant", "Hello, tell me."), ("seeker", "I failed my exam."),
                       ("assistant", "That is hard."), ("seeker", "Yes: very hard.")]
    assert d.card_text is None


def test_official_bad_line_names_dialogue_and_line(tmp_path):
    path = write_official_dialogues(tmp_path / "m_en.json", {"7": ["AI assistant：hi", "Someone：what"]})
    with pytest.raises(TrainInputError, match=r"dialogue '7' line 1"):
        load_official_dialogues(path)


@pytest.mark.parametrize("seeker,supporter", [("seeker", "supporter"), ("speaker", "listener")])
def test_esconv_speaker_conventions_merge_and_card(tmp_path, seeker, supporter):
    data = [{"problem_type": "job crisis", "emotion_type": "anxiety", "situation": "I lost my job.",
             "dialog": [{"speaker": seeker, "content": "Hey\n"}, {"speaker": seeker, "content": "I am sad\n"},
                        {"speaker": supporter, "content": "Why?", "annotation": {"strategy": "Question"}},
                        {"speaker": seeker, "content": "Job."}]}]
    path = tmp_path / "esconv.json"
    path.write_text(json.dumps(data))
    [d] = load_esconv_dialogues(path)
    assert d.turns == [("seeker", "Hey\nI am sad"), ("assistant", "Why?"), ("seeker", "Job.")]
    assert "Problem: I lost my job. (job crisis, anxiety)" in d.card_text
    assert d.card_text.startswith("Age: not mentioned\nGender:")
    assert d.dialogue_id == "esconv:0" and d.target_model == "human"


def test_esconv_unknown_speaker(tmp_path):
    path = tmp_path / "e.json"
    path.write_text(json.dumps([{"dialog": [{"speaker": "bot", "content": "x"}]}]))
    with pytest.raises(TrainInputError, match="turn 0: field 'speaker'"):
        load_esconv_dialogues(path)


def test_run_folder_ok_rows_only(tmp_path):
    from esc_eval.sim.runs.runfolder import RunFolder

    now = dt.datetime.now(dt.timezone.utc)
    base = {"run_id": "r", "card_id": "c1", "language": "en", "target_model": "fake/echo", "role_model": "fake/role",
            "strategy": "official", "seed": 0, "n_turns": 2, "termination_reason": "completed", "attempts": 1,
            "started_at": now, "finished_at": now}
    turns = [{"index": 1, "speaker": "seeker", "text": "I am worried."},
             {"index": 0, "speaker": "assistant", "text": "Hello there."}]
    folder = RunFolder(tmp_path / "run")
    folder.write_part("dialogues", [{**base, "dialogue_id": "d1", "status": "ok", "turns": turns},
                                    {**base, "dialogue_id": "d2", "status": "failed", "turns": []}])
    dialogues = load_dialogues(tmp_path / "run")
    assert [d.dialogue_id for d in dialogues] == ["d1"]
    assert dialogues[0].turns == [("assistant", "Hello there."), ("seeker", "I am worried.")]
    assert dialogues[0].target_model == "fake/echo"


def test_missing_run_folder(tmp_path):
    with pytest.raises(TrainInputError):
        load_run_dialogues(tmp_path / "nope")


def test_shared_samples(esc_samples):
    esconv = load_dialogues(esc_samples / "esconv" / "FailedESConv.json")
    assert len(esconv) == 196
    assert all(d.card_text and d.turns for d in esconv)
    official = load_dialogues(esc_samples / "esc-eval" / "dialogues" / "llama3_en.json",
                              cards=esc_samples / "esc-eval" / "cards" / "test_en.json")
    assert [d.dialogue_id for d in official] == ["llama3_en:0", "llama3_en:1", "llama3_en:2"]
    assert official[0].card_text.startswith("Age:") and official[0].turns[0][0] == "assistant"
    zh = load_dialogues(esc_samples / "esc-eval" / "dialogues" / "Qwen_7B_zh.json")
    assert zh[0].language == "zh" and zh[0].target_model == "Qwen_7B"
