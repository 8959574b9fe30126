"""Prompts and parsers of extraction, filtering, classification; near-duplicate removal."""
from __future__ import annotations

import pytest

from esc_eval.sim.cardbuild import (SourceItem, Turn, classification_messages, classify_reply, extraction_messages,
                                    filter_choices, filter_messages, find_near_duplicates, jaccard, keyword_category,
                                    leaves_for, parse_category_reply, parse_filter_reply, shingles)
from esc_eval.sim.cardbuild.stages.extraction import card_prompts


def _qa(text="My boss fired me after I reported a safety problem.", lang="en"):
    return SourceItem(id="x1", dataset="epitome", language=lang, kind="qa", text=text, native_id="s1", source_file="f")


def _md():
    turns = [Turn(speaker="seeker", text="I have a lot of debt"), Turn(speaker="supporter", text="How did that happen?"),
             Turn(speaker="seeker", text="Because of covid")]
    return SourceItem(id="x2", dataset="esconv", language="en", kind="md", turns=turns, situation="Money trouble",
                      native_id="n", source_file="f")


def test_qa_extraction_prompt_is_figure6_with_one_shot_example():
    p = card_prompts()["extract_qa"]["en"]
    msgs = extraction_messages(_qa())
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[0].content == "You are a helpful assistant!"
    assert msgs[2].content == p["example_output"]
    assert msgs[3].content.startswith(p["instruction"])
    assert 'The following is the user\'s post: "My boss fired me after I reported a safety problem."' in msgs[3].content
    assert [m.role for m in extraction_messages(_qa(), one_shot=False)] == ["system", "user"]


def test_md_extraction_prompt_renders_the_dialogue_as_figure7():
    body = extraction_messages(_md())[-1].content
    assert "The following is the seeker's situation summarization:\nMoney trouble" in body
    assert "seeker: I have a lot of debt\nsupporter: How did that happen?\nseeker: Because of covid" in body
    assert "Please only directly output the user's role card" in body


def test_zh_prompts_and_truncation():
    item = _qa("我" * 100, "zh")
    body = extraction_messages(item, max_input_chars=200)[-1].content
    assert body.startswith(card_prompts()["extract_qa"]["zh"]["instruction"]) and "以下是用户的帖子" in body
    long = _qa("word " * 1000)
    assert len(extraction_messages(long, max_input_chars=300)[-1].content) < 2000


@pytest.mark.parametrize(
    "reply, verdict, top",
    [
        ("work, study, career issues", "keep", "work_and_study"),
        ("Family issues.", "keep", "family_and_life"),
        ("social issues and others", "keep", "social_interaction_and_others"),
        ("The character card is not detailed enough. Discard", "discard", None),
        ("工作、学习、职业问题", "keep", "work_and_study"),
        ("角色卡不够详细，舍弃", "discard", None),
        ("I think it is about family or work", "unparsed", None),
        ("", "unparsed", None),
    ],
)
def test_filter_reply_parsing(reply, verdict, top):
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in reply) else "en"
    v = parse_filter_reply(reply, lang)
    assert (v.verdict, v.category_1) == (verdict, top)


def test_filter_prompt_and_choices():
    msgs = filter_messages("Age: young\n\nGender: male\n\nOccupation: x\n\nProblem: y", "en")
    assert msgs[-1].content.endswith("Role card input: Age: young\n\nGender: male\n\nOccupation: x\n\nProblem: y")
    assert filter_choices("en")[-1] == "The character card is not detailed enough. Discard"
    assert len(filter_choices("zh")) == 4


def test_category_parsing_is_strict():
    leaves = leaves_for("Work and Study")
    assert len(leaves) == 10 and len(leaves_for(None)) == 35
    assert parse_category_reply("Start a new job or study", leaves) == "start_new_job_or_study"
    assert parse_category_reply('"start a new job or study."', leaves) == "start_new_job_or_study"
    assert parse_category_reply("3", leaves) == "start_new_job_or_study"
    assert parse_category_reply("3. Start a new job or study", leaves) == "start_new_job_or_study"
    assert parse_category_reply("升学失败", leaves) == "failed_higher_education_entry"
    assert parse_category_reply("3. Failed to enter higher education", leaves) is None  # number and name disagree
    assert parse_category_reply("I think it's about a new job", leaves) is None
    assert parse_category_reply("99", leaves) is None
    assert parse_category_reply("death of family member", leaves) is None  # not in the offered list


def test_keyword_fallback_is_marked():
    leaves = leaves_for(None)
    c = classify_reply("no idea", "I was laid off and every interview goes badly", leaves)
    assert (c.category_3, c.method) == ("unemployed_job_hunting_difficulty", "keyword-fallback")
    assert classify_reply("Death of family member", "x", leaves).method == "llm"
    assert classify_reply("??", "zzz", leaves).method == "unclassified"
    assert keyword_category("我和室友关系很僵") == "colleagues_or_classmates_relations"


def test_classification_prompt_lists_the_leaves():
    leaves = leaves_for("Family and Life")
    text = classification_messages("Age: young", "zh", leaves)[-1].content
    assert "1. 恋爱关系的建立或破裂" in text and f"{len(leaves)}. " in text


def test_shingles_and_jaccard():
    assert shingles("Abc d!", 3) == {"abc", "bc ", "c d"}
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_near_duplicates_across_sources_keep_the_first():
    texts = [
        ("a", "The seeker lost her job at the factory and cannot pay the rent this month."),
        ("b", "Unrelated: a student is anxious about a thesis presentation next week."),
        ("c", "The seeker lost her job at the factory and can't pay the rent this month!"),
        ("d", "求助者考研失败，不敢告诉父母，每天躲在房间里。"),
        ("e", "求助者考研失败，不敢告诉父母，每天都躲在房间里。"),
    ]
    dups = find_near_duplicates(texts, ngram=3, threshold=0.7)
    assert [(d.id, d.duplicate_of) for d in dups] == [("c", "a"), ("e", "d")]
    assert all(d.similarity >= 0.7 for d in dups)
    assert find_near_duplicates(texts, ngram=3, threshold=0.99) == []
    with pytest.raises(ValueError, match="threshold"):
        find_near_duplicates(texts, threshold=0)
