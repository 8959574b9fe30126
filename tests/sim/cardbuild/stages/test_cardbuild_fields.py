"""Parsing extraction replies: fields in English and Chinese, normalised vocabularies, rejects."""
from __future__ import annotations

import pytest

from esc_eval.sim.cardbuild import CardFieldsError, age_band, normalize_age, normalize_gender, parse_card_fields


@pytest.mark.parametrize(
    "value, en, zh",
    [
        ("16", "teenage", "少年"), ("17 years old", "teenage", "少年"), ("18", "young", "青年"), ("35", "young", "青年"),
        ("36", "middle-aged", "中年"), ("59", "middle-aged", "中年"), ("60", "old", "老年"), ("in her 40s", "middle-aged", "中年"),
        ("20多岁", "young", "青年"), ("45岁", "middle-aged", "中年"), ("Teenager", "teenage", "少年"),
        ("young adult", "young", "青年"), ("Middle-aged", "middle-aged", "中年"), ("elderly", "old", "老年"),
        ("青年", "young", "青年"), ("老年", "old", "老年"), ("Not mentioned.", "not mentioned", "未提及"),
        ("未提及", "not mentioned", "未提及"), ("N/A", "not mentioned", "未提及"),
    ],
)
def test_age_normalisation(value, en, zh):
    assert normalize_age(value, "en") == (en, None)
    assert normalize_age(value, "zh")[0] == zh


def test_unrecognised_age_becomes_not_mentioned_with_a_note():
    value, note = normalize_age("adult", "en")
    assert value == "not mentioned" and "not recognised" in note
    assert age_band("") is None


@pytest.mark.parametrize(
    "value, en, zh",
    [("Male", "male", "男"), ("female", "female", "女"), ("woman", "female", "女"), ("男性", "male", "男"),
     ("女", "female", "女"), ("Not Mentioned", "not mentioned", "未提及"), ("未提及", "not mentioned", "未提及")],
)
def test_gender_normalisation(value, en, zh):
    assert normalize_gender(value, "en") == (en, None)
    assert normalize_gender(value, "zh")[0] == zh


def test_ambiguous_gender_is_not_mentioned_with_a_note():
    value, note = normalize_gender("male or female", "en")
    assert value == "not mentioned" and note


def test_figure6_output_parses():
    f = parse_card_fields("Age: young Gender: not mentioned. Occupation: student\nProblem: Difficulty adjusting to "
                          "school after a long break, lack of support from teachers and stepmom, leading to skipping classes.", "en")
    assert (f.age, f.gender, f.occupation) == ("young", "not mentioned", "student")
    assert f.problem.startswith("Difficulty adjusting") and f.problem.endswith("skipping classes.")


def test_chinese_reply_and_cross_language_values():
    f = parse_card_fields("年龄：青年 性别：未提及 职业：学生\n问题：长时间中断学业后 难以重新适应校园，缺乏支持，导致逃课。", "zh")
    assert (f.age, f.gender, f.occupation) == ("青年", "未提及", "学生")
    assert f.problem == "长时间中断学业后难以重新适应校园，缺乏支持，导致逃课。"
    g = parse_card_fields("Age: 52\nGender: male\nOccupation: warehouse worker\nProblem: 被裁员后找不到工作，不敢告诉妻子。", "zh")
    assert (g.age, g.gender) == ("中年", "男")


def test_markdown_and_literal_newlines_are_tolerated():
    f = parse_card_fields("**Age:** 45\\n\\n **Gender:** Female\\n\\n **Occupation:** N/A\\n\\n "
                          "**Problem:** Laid off after twenty years and scared to tell her family.", "en")
    assert (f.age, f.gender, f.occupation) == ("middle-aged", "female", "not mentioned")
    assert f.problem == "Laid off after twenty years and scared to tell her family."


@pytest.mark.parametrize(
    "reply, message",
    [
        ("", "empty reply"),
        ("Age: young\nProblem: I lost my job and my landlord wants me out", "lacks field(s) gender, occupation"),
        ("Sure! Here is a role card for the user.", "lacks field(s) age, gender, occupation, problem"),
        ("Age: young Gender: male Occupation: student Problem: not mentioned", "problem text too short"),
        ("Age: young Gender: male Occupation: clerk Problem: My boss yells at me, I'm not sure how to handle it, "
         "I'm not sure how to handle it, I'm not sure how to handle it,", "degenerate"),
    ],
)
def test_unusable_replies_are_rejected_with_the_reason(reply, message):
    with pytest.raises(CardFieldsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_card_fields(reply, "en")


def test_prompt_echo_after_the_problem_is_cut():
    f = parse_card_fields("Age: not mentioned Gender: female Occupation: clerk\nProblem: Struggling after a breakup by text. "
                          "Supporter: I'm so sorry. seeker: Five years. Please only output the user's role card", "en")
    assert f.problem == "Struggling after a breakup by text."
    g = parse_card_fields("年龄：青年 性别：女 职业：学生\n问题：妈妈手术后需要照顾，导师不准假。求助者：是的，我爸累病了", "zh")
    assert g.problem == "妈妈手术后需要照顾，导师不准假。"
