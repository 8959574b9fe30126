"""Dialogues the simulator spoiled (sim/dialogue/spoiled.py): each reason fires on a crafted
dialogue made for it, alone, and on no clean dialogue; the conservative edges of each rule; real
seekers (ESConv's people, the release's ESC-Role dialogues) are not flagged for what only a
simulator does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from esc_eval.sim.dialogue import Turn
from esc_eval.sim.dialogue.spoiled import REASONS, spoiled_columns, spoiled_reasons

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
OPENER = "Hello, I'm your personal assistant. You can confide in me about any worries or concerns you may have!"
CARD = ("He was laid off after fourteen years when the warehouse installed automated sorting, and in five months he "
        "has sent over forty applications and had two interviews. His wife now covers the mortgage alone.")
CLEAN = ["Hi. Things have been rough since I lost my job at the warehouse.",
         "Fourteen years there, and then a machine took my place.",
         "I've sent maybe forty applications and barely got any interviews.",
         "My wife pays the mortgage by herself now and I feel useless.",
         "Maybe someone could look at my resume. I'm still scared though."]
CARD_ZH = "工作了十年的公司突然裁员，他失去了工作，房贷还要继续还，妻子刚生完孩子，他不敢告诉家里人。"
CLEAN_ZH = ["最近我被公司裁员了，心里特别难受。", "房贷每个月都要还，我不知道怎么办。", "我还没敢告诉妻子，她刚生完孩子。",
            "我每天假装去上班，其实在外面找工作。", "也许我应该先和妻子说实话，但我还是很害怕。"]

# a simulated seeker's length (30-50 words a turn), none of it about its card
CAT = ["My cat ran off last Tuesday and I cannot find her anywhere in the neighbourhood, not in the garden, not "
       "behind the shed, not under the porch where she naps.",
       "She is orange and shy, she usually hides under parked cars or climbs the fence into the neighbours' yard "
       "when the dogs bark.",
       "I put posters on every lamp post on our street and the next two streets, with her photo and my phone number.",
       "Nobody has called about her yet, only a man who saw a ginger tomcat near the bakery, which is not her.",
       "I miss her every night when I come home and her bowl is still full by the kitchen door."]


def dialogue(seeker: list[str], assistant: list[str] | None = None, finish: dict[int, str] | None = None) -> list[dict]:
    """Opener, then seeker_i and assistant_i (the assistant's turns vary unless given)."""
    assistant = assistant or [f"That sounds hard. Can you tell me more about part {i}?" for i in range(len(seeker))]
    turns = [{"speaker": "assistant", "text": OPENER, "finish_reason": "stop"}]
    for i, (s, a) in enumerate(zip(seeker, assistant)):
        turns += [{"speaker": "seeker", "text": s, "finish_reason": (finish or {}).get(i, "stop")},
                  {"speaker": "assistant", "text": a, "finish_reason": "stop"}]
    return turns


def replaced(i: int, text: str) -> list[str]:
    return [text if k == i else s for k, s in enumerate(CLEAN)]


def test_clean_dialogues_are_not_spoiled():
    assert spoiled_reasons(dialogue(CLEAN), CARD, "en") == []
    assert spoiled_reasons(dialogue(CLEAN_ZH, ["我理解你的感受，能多说一点吗？"] * 5), CARD_ZH, "zh") == []
    assert spoiled_columns(dialogue(CLEAN), "ok", CARD, "en") == (False, [])


CASES = {
    "out_of_character": [
        dialogue(replaced(1, "As an AI language model, I don't have a job, but I can imagine how it feels.")),
        dialogue(replaced(2, "Sorry, my character card says I was laid off, so I'll keep going with that.")),
        dialogue(replaced(0, "I'm role-playing a man who lost his warehouse job.")),
        dialogue(CLEAN_ZH[:1] + ["作为一个AI助手，我没有工作。"] + CLEAN_ZH[2:], ["嗯，我在听。"] * 5),
    ],
    "talks_like_assistant": [
        dialogue(replaced(3, "I'm here to help. How can I help you with the mortgage today?")),
        dialogue(replaced(2, "Here are some tips for your job search: update your resume and network.")),
        dialogue(replaced(2, "Warehouse job search:\n1. Update the resume\n2. Call old colleagues\n3. Apply daily")),
        dialogue(replaced(4, "Remember, you're not alone in this, it's important to take care of yourself.")),
    ],
    "repeats_itself": [
        dialogue(replaced(3, CLEAN[1])),  # an earlier seeker turn, verbatim
        dialogue(replaced(3, "Fourteen years there, and then a machine took my job.")),  # one word changed
        dialogue(CLEAN[:2] + ["That sounds hard. Can you tell me more about part 1?"] + CLEAN[3:]),  # the assistant's
    ],
    "empty_or_truncated": [
        dialogue(replaced(2, "")),
        dialogue(replaced(2, "   ")),
        dialogue(CLEAN, finish={4: "length"}),
    ],
    "resolves_in_first_round": [
        dialogue(["Hi, thanks for asking, I'm fine. Bye!"] + CLEAN[1:]),
        dialogue(CLEAN[:1] + ["Thank you so much, I feel much better now."] + CLEAN[2:]),
        dialogue(CLEAN[:1] + ["谢谢你，我现在好多了。"] + CLEAN[2:]),
    ],
    "ignores_card": [dialogue(CAT)],
}


@pytest.mark.parametrize("reason,turns", [(r, t) for r, ts in CASES.items() for t in ts],
                         ids=[f"{r}-{i}" for r, ts in CASES.items() for i in range(len(ts))])
def test_each_reason_fires_alone_on_its_case(reason, turns):
    card, lang = (CARD_ZH, "zh") if reason == "out_of_character" and "作为" in str(turns) else (CARD, "en")
    assert spoiled_reasons(turns, card, lang) == [reason]
    assert spoiled_columns(turns, "ok", card, lang) == (True, [reason])


def test_reasons_come_in_a_fixed_order_and_failed_dialogues_are_not_judged():
    turns = dialogue(["", "As an AI, how can I help you?", "", "", ""])
    assert spoiled_reasons(turns, CARD, "en") == ["out_of_character", "talks_like_assistant", "empty_or_truncated"]
    assert list(REASONS).index("out_of_character") < list(REASONS).index("ignores_card")
    assert spoiled_columns(turns, "failed", CARD, "en") == (None, None)


def test_what_people_do_is_not_a_spoil():
    # short answers repeated, "out of character" in its everyday sense, thanks with "take care of",
    # relief late in the dialogue or with distress still in the turn, a 3-letter card word
    human = ["Hi.", "Yes.", "Yes.", "It's out of character for him, he never yells.", "ok"]
    assert spoiled_reasons(dialogue(human), None, "en") == []
    assert spoiled_reasons(dialogue(CLEAN[:1] + ["Thanks. I have to take care of my kids alone now."] + CLEAN[2:]),
                           CARD, "en") == []
    assert spoiled_reasons(dialogue(CLEAN[:1] + ["Thanks, I feel a bit better, but I'm still so worried about "
                                                 "money."] + CLEAN[2:]), CARD, "en") == []
    assert spoiled_reasons(dialogue(CLEAN[:4] + ["Thank you, I feel much better now. Bye!"]), CARD, "en") == []
    jobs = ["I need jobs, any of them, I will take what comes along in the next weeks.",
            "Honestly it is about paying for the house every single month.", "Nothing else comes to mind right now.",
            "I keep checking the listings from morning until night.", "It is a lot for one person to carry."]
    assert spoiled_reasons(dialogue(jobs), "Lost his job; savings gone; rent due.", "en") == []


def test_ignores_card_is_checked_only_when_it_can_be_told():
    cat = CASES["ignores_card"][0]
    assert spoiled_reasons(cat, None, "en") == []  # no card
    assert spoiled_reasons(cat, "Feeling sad and anxious lately.", "en") == []  # no problem words beyond feelings
    short = dialogue(["My cat.", "Gone.", "Yes.", "No.", "Ok."])
    assert spoiled_reasons(short, CARD, "en") == []  # too little said to tell
    assert spoiled_reasons(dialogue(CAT[:2] + ["Yes."] * 3), CARD, "en") == []  # 26 words of its own: people say as much
    # a shared 4-letter prefix counts: "applying" matches the card's "applications"
    applying = ["I keep applying everywhere and nothing comes back, week after week.", *CAT[1:]]
    assert spoiled_reasons(dialogue(applying), CARD, "en") == []
    zh_cat = ["我的猫上周二跑丢了，我找遍了整个小区、花园和车库都没有找到它的影子。",
              "它是橘色的，很胆小，平时总是躲在停着的车底下，或者跳到邻居家的院子里。",
              "我在每根电线杆上都贴了寻猫启事，附上了它的照片和我的电话号码。",
              "到现在还没有人打电话给我，只有一个人说在面包店附近见过一只黄猫，但不是它。",
              "每天晚上回家看到它的饭碗还是满的，我就特别想它。"]
    assert spoiled_reasons(dialogue(zh_cat, ["嗯，我在听。"] * 5), CARD_ZH, "zh") == ["ignores_card"]


def test_turn_objects_and_curly_apostrophes():
    turns = [Turn(0, "assistant", OPENER), *[Turn(i + 1, "seeker" if i % 2 == 0 else "assistant", t)
                                             for i, t in enumerate(["I’m here to help you, friend.", "ok", *CLEAN[1:]])]]
    assert spoiled_reasons(turns, CARD, "en") == ["talks_like_assistant"]


def _esconv_dialogues() -> list[tuple[list[dict], str]]:
    """FailedESConv's people as dialogue turns (consecutive messages joined) with their situation as the card."""
    out = []
    for d in json.loads((SHARED / "esconv" / "FailedESConv.json").read_text(encoding="utf-8")):
        turns = [{"speaker": "assistant", "text": OPENER}]
        for u in d["dialog"]:
            speaker = "seeker" if u["speaker"] in ("seeker", "speaker") else "assistant"
            if turns[-1]["speaker"] == speaker:
                turns[-1]["text"] += " " + u["content"].strip()
            else:
                turns.append({"speaker": speaker, "text": u["content"].strip()})
        out.append((turns, d["situation"]))
    return out


def _first_rounds(turns: list[dict], rounds: int = 5) -> list[dict]:
    seeker = [i for i, t in enumerate(turns) if t["speaker"] == "seeker"]
    return turns[:seeker[rounds]] if len(seeker) > rounds else turns


@pytest.mark.skipif(not (SHARED / "esconv" / "FailedESConv.json").exists(), reason="shared ESConv sample absent")
def test_people_in_esconv_are_not_flagged_for_what_only_a_simulator_does():
    """196 human seekers, whole and cut to five rounds as a run is: none says it is an AI, talks like
    the assistant, repeats itself, sends an empty turn or resolves in the first round, and at most 2%
    are flagged at all (people who never name their situation say too little to tell)."""
    people = _esconv_dialogues()
    assert len(people) == 196
    for cut in (lambda t: t, _first_rounds):
        found: dict[str, int] = {}
        flagged = 0
        for turns, card in people:
            reasons = spoiled_reasons(cut(turns), card, "en")
            flagged += bool(reasons)
            for r in reasons:
                found[r] = found.get(r, 0) + 1
        assert set(found) <= {"ignores_card"} and flagged <= 0.02 * len(people), found


def test_a_reply_cut_back_to_its_last_sentence_is_not_truncated():
    from esc_eval.sim.dialogue.spoiled import spoiled_reasons

    turns = [{"speaker": "assistant", "text": "Hi, what is on your mind?"},
             {"speaker": "seeker", "text": "My boss yells at me every day and I dread going in.", "finish_reason": "sentence"},
             {"speaker": "assistant", "text": "That sounds hard."}]
    assert "empty_or_truncated" not in spoiled_reasons(turns)
    turns[1]["finish_reason"] = "length"
    assert "empty_or_truncated" in spoiled_reasons(turns)
