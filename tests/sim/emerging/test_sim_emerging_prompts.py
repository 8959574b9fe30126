"""The disclosure schedule and the per-reply judge's prompts: the role model's prompt gains each
disclosure at its round (the pure dialogue function takes the schedule as an input, a resume included),
a run that never reaches a disclosure is refused in one line, and the per-reply prompts show the context
up to the reply, the reply, the rubric and the numbered patterns, in en and zh."""
from __future__ import annotations

import pytest

from esc_eval.serve.chat.interface import ChatModel, ChatResult
from esc_eval.sim.cards.card import RoleCard, emerging_risk_cards
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, run_dialogue
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
from esc_eval.sim.emerging import (card_prompts, check_disclosure_rounds, disclosure_prompts, parse_pattern,
                                   pattern_messages, pattern_names, read_pattern, reply_safety_messages)
from esc_eval.sim.prompt_files import load_prompt_file


class Recorder(ChatModel):
    """Answers 'line <n>' and keeps the system prompt of every call."""

    name = "recorder"

    def __init__(self):
        self.systems: list[str] = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None) -> ChatResult:
        self.systems.append(messages[0].content if messages[0].role == "system" else "")
        return ChatResult(text=f"line {len(self.systems)}", prompt_tokens=1, completion_tokens=1, finish_reason="stop")


CARD = RoleCard(id="s", language="en", problem="Work is hard.", risk_emergence={
    "kind": "ideation", "follows": ["c-ssrs"], "disclosures": [
        {"round": 2, "level": "passive", "c_ssrs": 1, "says": "WISH-TO-SLEEP."},
        {"round": 3, "level": "active", "c_ssrs": 4, "says": "MEANS-IT."}]})


async def test_the_seeker_is_told_each_disclosure_at_its_round_and_it_stays_said():
    base = roleplay_system_prompt(CARD.text, "en")
    frames = load_prompt_file("emergence")["disclosure"]
    setup = DialogueSetup(base, opener("en"), rounds=4, role_prompt_from=card_prompts(CARD, base))
    seeker, target = Recorder(), Recorder()
    turns = await run_dialogue(setup, Participant(seeker), Participant(target))
    assert len(turns) == 9 and len(seeker.systems) == 4
    r1, r2, r3, r4 = seeker.systems
    assert r1 == base  # before the onset: the card's prompt as it always was
    assert r2 == base + "\n" + frames["now"]["en"].replace("{says}", "WISH-TO-SLEEP.")
    assert r3.startswith(base) and frames["before"]["en"].replace("{says}", "WISH-TO-SLEEP.") in r3
    assert frames["now"]["en"].replace("{says}", "MEANS-IT.") in r3 and r3.count("MEANS-IT.") == 1
    assert "WISH-TO-SLEEP." in r4 and "MEANS-IT." in r4 and frames["now"]["en"].split("{says}")[0] not in r4
    assert set(target.systems) == {""}  # the target never sees the schedule
    # a resume after round 2 is the same pure function of its inputs: round 3's prompt as scheduled
    again = Recorder()
    await run_dialogue(setup, Participant(again), Participant(Recorder()), resume_from=turns[:5])
    assert again.systems == [r3, r4]
    # no schedule: the prompt never changes
    plain = Recorder()
    await run_dialogue(DialogueSetup(base, opener("en"), rounds=2), Participant(plain), Participant(Recorder()))
    assert plain.systems == [base, base]


def test_sessions_and_languages_in_the_schedule():
    card = RoleCard(id="c", language="zh", problem="p", risk_emergence={
        "kind": "ideation", "follows": ["c-ssrs"], "disclosures": [
            {"round": 2, "session": 1, "level": "passive", "says": "甲"},
            {"round": 1, "session": 2, "level": "active", "says": "乙"}]})
    zh = load_prompt_file("emergence")["disclosure"]
    one = disclosure_prompts("B", card.risk_emergence, "zh")
    assert sorted(one) == [2, 3] and one[2] == "B\n" + zh["now"]["zh"].replace("{says}", "甲")
    two = disclosure_prompts("B", card.risk_emergence, "zh", session=2)  # session 1's disclosure already said
    earlier, now = zh["earlier_session"]["zh"].replace("{says}", "甲"), zh["now"]["zh"].replace("{says}", "乙")
    assert two[1] == "\n".join(["B", earlier, now])  # as told in an earlier conversation
    assert disclosure_prompts("B", None, "en") == {}


def test_a_run_that_never_reaches_a_disclosure_is_refused_in_one_line():
    cards = emerging_risk_cards()
    check_disclosure_rounds(cards, rounds=5)
    with pytest.raises(ValueError) as e:
        check_disclosure_rounds(cards, rounds=3)
    assert "discloses at round 4, but the run has 3 round(s)" in str(e.value) and "--rounds 4" in str(e.value)
    late = RoleCard(id="late", language="en", problem="p", risk_emergence=CARD.risk_emergence.model_copy(update={
        "disclosures": [CARD.risk_emergence.disclosures[0].model_copy(update={"session": 2})]}))
    with pytest.raises(ValueError, match="card 'late' discloses in session 2, but the run has 1 session"):
        check_disclosure_rounds([late], rounds=5)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_per_reply_prompts_show_the_context_then_the_reply(language):
    context = [("assistant", "OPENER"), ("seeker", "FIRST"), ("assistant", "REPLY-1"), ("seeker", "DISCLOSED")]
    safety = reply_safety_messages(context, "REPLY-2", language, rendering="clean")
    data = load_prompt_file("emergence")["reply_safety"]
    body = safety[1].content
    assert safety[0].role == "system" and body.startswith(data["rubric"][language].rstrip())
    assert body.index("DISCLOSED") < body.index(data["reply_header"][language]) < body.index("REPLY-2")
    assert body.endswith(data["question"][language]) and "REPLY-2" not in body.split(data["reply_header"][language])[0]
    pattern = pattern_messages(context, "REPLY-2", language)[1].content
    for i, p in enumerate(load_prompt_file("emergence")["patterns"]):
        assert f"{i}: {p[language]}" in pattern
    assert "**AI助手**" in pattern  # the judge's rendering (official by default), as whole dialogues are rendered


def test_a_pattern_answer_is_read_from_its_logprobs_or_parsed():
    names = pattern_names()
    assert names[0] == "none" and len(names) == len(set(names)) == 8
    assert parse_pattern("3") == names[3] and parse_pattern(" Option 5.") == names[5] and parse_pattern("选项2") == names[2]
    assert parse_pattern("9") is None and parse_pattern("the third") is None
    top = [{"1": -2.0, "3": -0.1, "x": 0.0}]
    read = read_pattern(ChatResult(text="3", top_logprobs=top), reads_logprobs=True)
    assert read["label"] == names[3] and read["parse_status"] == "ok" and read["probs_status"] == "partial"
    assert read_pattern(ChatResult(text="oops"), reads_logprobs=False) == {"label": None, "parse_status": "parse_failure"}
