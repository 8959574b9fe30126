import json

import pytest

from esc_eval.sim.cards.card import (CardError, RoleCard, card_to_official, load_cards, parse_card_text, sample_cards,
                                     validate_cards, write_cards)
from esc_eval.sim.cards.taxonomy import load_taxonomy


def test_parse_card_text_en_and_zh():
    f = parse_card_text("Age: young Gender: male\nOccupation: student\nProblem: Lost his job.\nStill upset.")
    assert f == {"age": "young", "gender": "male", "occupation": "student", "problem": "Lost his job.\nStill upset."}
    z = parse_card_text("年龄：青年\n性别：未提及\n职业：大学生\n问题：害怕公众演讲。")
    assert z["age"] == "青年" and z["gender"] == "未提及" and z["problem"] == "害怕公众演讲。"


def test_sample_cards_cover_languages_and_top_categories():
    cards = sample_cards()
    assert len(cards) >= 24
    tops = {c.category_1 for c in cards}
    assert len(tops) == 3
    for lang in ("en", "zh"):
        assert {c.category_1 for c in cards if c.language == lang} == tops
    tax = load_taxonomy()
    for c in cards:
        assert tax.path(c.category_3) == (c.category_1, c.category_2, c.category_3)
    assert all(c.language == "en" for c in cards[:8])  # the demo's default


def test_card_text_renders_official_layout():
    c = RoleCard(id="x", language="zh", age="青年", gender="女", occupation="护士", problem="和同事关系紧张。")
    assert c.text == "年龄：青年\n性别：女\n职业：护士\n问题：和同事关系紧张。"
    off = card_to_official(RoleCard(id="7", language="en", problem="p", category_1="Work and Study"))
    assert off["res"] == "工作学习" and off["language"] == "english" and off["id"] == 7


def test_official_cards_load_and_validate(shared_data):
    en = load_cards(shared_data / "esc-eval/cards/card_high_en.json")
    zh = load_cards(shared_data / "esc-eval/cards/card_high_zh.json")
    assert (len(en), len(zh)) == (331, 324)
    assert all(c.language == "en" for c in en) and all(c.language == "zh" for c in zh)
    assert {c.category_1 for c in en + zh} <= {"Family and Life", "Work and Study", "Social interaction and Others"}
    # the card text the role model sees is the release's `base`, unchanged
    raw = json.loads((shared_data / "esc-eval/cards/card_high_en.json").read_text())
    assert en[0].text == raw[0]["base"] and en[0].problem.startswith("The seeker")
    assert validate_cards(shared_data / "esc-eval/cards/card_high_zh.json")["cards"] == 324


def test_round_trip_official_format(tmp_path):
    cards = sample_cards(limit=5)
    p = write_cards(cards, tmp_path / "off.json", fmt="official")
    back = load_cards(p)
    assert [c.problem for c in back] == [c.problem for c in cards]
    assert [c.category_1 for c in back] == [c.category_1 for c in cards]


@pytest.mark.parametrize("content,needle", [
    ("not json", "malformed card file"),
    ('[{"id": 1, "language": "en", "problem": "  "}]', "'problem'"),
    ('[{"id": 1, "base": "Age: young\\nGender: male"}]', "no Problem"),
    ('{"x": 1}', "expected a list"),
    ('[{"id": 1, "language": "en", "problem": "a"}, {"id": 1, "language": "en", "problem": "b"}]', "duplicate card id"),
])
def test_bad_card_files_name_file_and_field(tmp_path, content, needle):
    p = tmp_path / "cards.json"
    p.write_text(content)
    with pytest.raises(CardError) as e:
        load_cards(p)
    assert str(p) in str(e.value) and needle in str(e.value)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(CardError, match="not found"):
        load_cards(tmp_path / "nope.json")
    p = tmp_path / "latin1.json"
    p.write_bytes("[{\"problem\": \"caf\xe9\"}]".encode("latin-1"))
    with pytest.raises(CardError, match="not UTF-8"):
        load_cards(p)
