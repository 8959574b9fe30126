import os

import pytest

from esc_eval.sim.cards.taxonomy import load_taxonomy
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt, strategies, target_system_prompt
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS
from esc_eval.sim.judging.prompts import judge_messages, render_dialogue
from esc_eval.sim.judging.rubrics import rubric_text

TURNS = [("assistant", "Hello, I'm your personal assistant."), ("seeker", "I lost my job."),
         ("assistant", "I'm sorry. As an AI assistant I can help.")]


def test_taxonomy_matches_table_9():
    tax = load_taxonomy()
    assert [c.name for c in tax.tops] == ["Family and Life", "Work and Study", "Social interaction and Others"]
    assert [c.name_zh for c in tax.tops] == ["家庭生活", "工作学习", "社会与其他"]
    leaves = tax.leaves()
    # Table 9 prints 35 third-level rows (the text says 37); the counts sum to the 655 high cards.
    assert len(leaves) == 35
    assert sum(c.high for c in leaves) == 655
    assert tax.path("death of family member") == ("Family and Life", "Mental and physical health issues", "death of family member")
    assert tax.find("家庭生活").name == "Family and Life"


def test_official_roleplay_prompt_matches_release():
    en = roleplay_system_prompt("CARD", "en")
    assert en == ("I hope you can role-play as a person with worries and communicate with an AI assistant. "
                  "Here is your character card:'CARD\n' Please simulate a natural human conversation as much as possible. "
                  "Avoid behaving like a machine and refrain from mentioning that you are an AI assistant. "
                  "Gradually reveal your worries throughout our multiple conversations.")
    zh = roleplay_system_prompt("卡", "zh")
    assert zh.startswith("我希望你扮演成一名有烦恼的人与一个AI助手交流，以下是你的角色卡：“卡\n 请尽可能")
    assert opener("en") == "Hello, I'm your personal assistant. You can confide in me about any worries or concerns you may have!"
    assert opener("zh") == "你好，我是您的私人助手，您有任何烦恼都可以向我诉说！"
    assert target_system_prompt("en") == "You are a helpful assistant!"


@pytest.mark.parametrize("strategy", ["zero_shot", "cot", "icl", "cot_icl"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_strategy_embeds_the_card(strategy, lang):
    assert strategy in strategies()
    text = roleplay_system_prompt("UNIQUE-CARD-TEXT", lang, strategy)
    assert "UNIQUE-CARD-TEXT" in text and "{card}" not in text and "{example}" not in text


def test_official_rendering_reproduces_score_py_quirks():
    text = render_dialogue(TURNS, "official")
    assert text.split("\n\n")[0] == "**AI助手**：Hello, I'm your personal assistant."
    assert text.split("\n\n")[1] == "**用户**I lost my job."
    assert "As an **AI助手** I can help" in text  # the release rewrites the phrase inside text too
    clean = render_dialogue(TURNS, "clean")
    assert clean.splitlines()[1] == "User: I lost my job." and "As an AI assistant" in clean


def test_judge_messages_official_and_paper():
    msgs = judge_messages("fluency", TURNS, "en")
    assert len(msgs) == 1 and msgs[0].role == "user"
    body = msgs[0].content
    assert body.startswith(rubric_text("fluency", "en", "official"))
    assert "Dialogue between user and AI assistant: \n**AI助手**" in body
    assert body.endswith("Based on the rules, give your fluecy score (The number only) to the Dialogue.")
    # English fluency has its own variant mentioning Chinese replies; Chinese does not
    # (score.py has "AI " + two U+200B before "assistant’s" there)
    assert "most of the AI \u200b\u200bassistant’s" in rubric_text("fluency", "en", "official")
    assert "most of the AI" not in rubric_text("fluency", "zh", "official")
    paper = judge_messages("empathy", TURNS, "zh", rubric="paper", rendering="clean")
    assert paper[0].role == "system" and paper[0].content == "You are a helpful assistant!"
    assert paper[1].content.endswith("give your empathic score (The number only) to the Dialogue.")


def test_all_dimensions_have_all_rubrics():
    assert DIMENSION_NAMES == ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"]
    for dim, key in DIMENSIONS.items():
        for variant in ("official", "paper"):
            for lang in ("en", "zh"):
                assert "0:" in rubric_text(key, lang, variant) and "4:" in rubric_text(dim, lang, variant)


@pytest.mark.parametrize("rubric", ["official", "paper"])
def test_dialogue_first_order_moves_the_dialogue_ahead_of_the_same_rubric(rubric):
    first = [judge_messages(d, TURNS, "en", rubric=rubric, rendering="clean", order="dialogue_first")
             for d in DIMENSION_NAMES]
    paper_order = judge_messages("empathy", TURNS, "en", rubric=rubric, rendering="clean")
    bodies = [m[-1].content for m in first]
    dialogue = render_dialogue(TURNS, "clean").strip()
    # the seven prompts share everything up to the end of the dialogue: one cached prefix
    shared = os.path.commonprefix(bodies)
    assert dialogue + "\n\n" in shared and shared.index(dialogue) < 60
    empathy = bodies[DIMENSION_NAMES.index("empathy")]
    assert sorted(empathy) == sorted(paper_order[-1].content + "\n")  # the same text, reordered
    assert empathy.endswith("\n" + paper_order[-1].content.rsplit("\n", 1)[-1])  # the question stays last
    assert [m.role for m in first[0]] == [m.role for m in paper_order]
    with pytest.raises(ValueError, match="unknown prompt order"):
        judge_messages("empathy", TURNS, "en", order="dialogue_last")
