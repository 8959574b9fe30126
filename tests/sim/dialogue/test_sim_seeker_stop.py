"""The seeker ends the conversation itself (sim/dialogue/seeker_stop.py): the mark read from a reply,
the role prompt's stop signal in both languages, a dialogue ending at the round the seeker says, and
a resume after its last word asking nothing more."""
from __future__ import annotations

import pytest

from esc_eval.serve.backends.fake import make_fake_model
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from esc_eval.sim.dialogue.prompts import roleplay_system_prompt, strategies
from esc_eval.sim.dialogue.seeker_stop import end_finish_reason, find_end, seeker_end, stop_instruction, stop_marks


@pytest.mark.parametrize("reply, kept, reason", [
    ("Thanks, I feel better now. <END:resolved>", "Thanks, I feel better now.", "resolved"),
    ("This isn't helping. <END:gave_up>", "This isn't helping.", "gave_up"),
    ("I'm leaving < end : Gave Up >", "I'm leaving", "gave_up"),  # as small models write it
    ("谢谢你，我好多了。＜END：resolved＞", "谢谢你，我好多了。", "resolved"),  # full-width brackets and colon
    ("<END:resolved>", "", "resolved"),
    ("I still don't know what to do about my boss.", "I still don't know what to do about my boss.", None),
    ("The END: it never ends", "The END: it never ends", None),  # no brackets: not a mark
])
def test_the_mark_is_read_and_removed(reply, kept, reason):
    assert find_end(reply) == (kept, reason)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("strategy", strategies())
def test_every_strategy_gets_the_stop_signal_in_both_languages_only_when_asked(strategy, language):
    plain = roleplay_system_prompt("CARD", language, strategy)
    stop = roleplay_system_prompt("CARD", language, strategy, seeker_stop=True)
    assert "<END:" not in plain  # the paper's protocol: unchanged
    assert stop.startswith(plain.rstrip()) and stop.endswith(stop_instruction(language))
    assert all(mark in stop for mark in stop_marks().values())
    assert ("你可以自己结束这次对话" in stop) == (language == "zh")


def test_a_language_without_a_stop_signal_is_named():
    with pytest.raises(ValueError, match="no stop signal for language 'fr'"):
        stop_instruction("fr")


def _setup(rounds: int, seeker_stop: bool) -> DialogueSetup:
    return DialogueSetup(role_system_prompt=roleplay_system_prompt("CARD", "en", "official", seeker_stop=seeker_stop),
                         opener="OPENER", rounds=rounds, seeker_stop=seeker_stop)


async def test_the_dialogue_ends_after_the_seeker_turn_that_says_so():
    seeker = make_fake_model("seeker?ends=3&end=gave_up")
    target = make_fake_model("echo")
    turns = await run_dialogue(_setup(30, True), Participant(seeker), Participant(target))
    # the opener, two full rounds, and the seeker's third turn: its last word
    assert [t.speaker for t in turns] == ["assistant", "seeker", "assistant", "seeker", "assistant", "seeker"]
    assert turns[-1].finish_reason == end_finish_reason("gave_up") and "<END" not in turns[-1].text
    assert turns[-1].text and seeker_end(turns) == "gave_up" and target.calls == 2
    assert seeker_end([t.to_row() for t in turns]) == "gave_up"  # rows read back from a run folder too


async def test_off_the_seeker_cannot_end_it_and_the_round_cap_holds():
    seeker = make_fake_model("seeker?ends=3")  # told nothing of a stop signal: never writes the mark
    turns = await run_dialogue(_setup(30, False), Participant(seeker), Participant(make_fake_model("echo")))
    assert len(turns) == 61 and seeker_end(turns) is None  # 30 rounds after the opener
    # a mark in a reply of a run without seeker_stop is text, not an end
    marked = make_fake_model("fixed?reply=Bye+<END:resolved>")
    turns = await run_dialogue(DialogueSetup(role_system_prompt="S", opener="O", rounds=2), Participant(marked),
                               Participant(make_fake_model("echo")))
    assert len(turns) == 5 and turns[1].text == "Bye <END:resolved>"


async def test_a_resume_after_the_seekers_last_word_asks_nothing():
    done = [Turn(0, "assistant", "OPENER"), Turn(1, "seeker", "I feel better.", finish_reason=end_finish_reason("resolved"))]
    seeker, target = make_fake_model("seeker"), make_fake_model("echo")
    turns = await run_dialogue(_setup(30, True), Participant(seeker), Participant(target), resume_from=done)
    assert turns == done and seeker.calls == 0 and target.calls == 0


async def test_a_dialogue_that_outgrows_a_context_ends_there_and_says_so():
    from esc_eval.serve.chat.interface import ContextOverflowError
    from esc_eval.sim.dialogue.ending import CONTEXT_FULL, dialogue_ending, end_reason

    # each echo answer repeats the seeker's line: the target's history grows ~30 tokens a round
    target = make_fake_model("echo", context=120)
    turns = await run_dialogue(_setup(30, False), Participant(make_fake_model("seeker")), Participant(target))
    assert 3 <= len(turns) < 61 and turns[-1].speaker == "seeker"  # the target could not answer it
    assert dialogue_ending(turns, 30) == CONTEXT_FULL and end_reason(turns, 30) == CONTEXT_FULL
    # the same dialogue resumed from its turns ends again at once, with nothing added
    again = await run_dialogue(_setup(30, False), Participant(make_fake_model("seeker")), Participant(target),
                               resume_from=turns)
    assert again == turns
    # not even the first round fits: the models cannot hold the dialogue, an error for the caller
    with pytest.raises(ContextOverflowError):
        await run_dialogue(_setup(30, False), Participant(make_fake_model("seeker")),
                           Participant(make_fake_model("echo", context=5)))
