"""sim/courses/course.py run_course on recording models: the sessions in order, the seeker's update
(the card's, else the role model's), the target's memory (none, its own notes, the earlier
transcripts cut to fit its context), and a course resumed in the session it was in."""
import json

import pytest

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult, ContextOverflowError
from esc_eval.sim.courses.course import CourseSetup, Session, run_course
from esc_eval.sim.courses.texts import check_languages, session_opener
from esc_eval.sim.dialogue.dialogue import Participant
from esc_eval.sim.dialogue.prompts import opener

CARD = "Age: young\nGender: female\nOccupation: nurse\nProblem: Night shifts keep me from sleeping."


class Recorder(ChatModel):
    """Answers '<label><n>', records every call; fails with `fail` at call `fail_at`; `context`: a call
    whose messages exceed that many characters overflows."""

    def __init__(self, label, fail_at=None, fail=None, context=None):
        self.label, self.calls, self.fail_at, self.fail, self.context = label, [], fail_at, fail, context

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.calls.append((list(messages), session_id))
        if self.context is not None and sum(len(m.content) for m in messages) > self.context:
            raise ContextOverflowError("prompt too long")
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise self.fail or ChatModelError("boom", kind="fatal")
        return ChatResult(text=f"{self.label}{len(self.calls)}", prompt_tokens=7, completion_tokens=2, latency_s=0.01)


def course(sessions=3, memory="none", **kw):
    return CourseSetup(card_text=CARD, language="en", sessions=sessions, memory=memory, rounds=2,
                       session_ids=[f"s{k}" for k in range(1, sessions + 1)], **kw)


def systems(model, prefix):
    """The system prompts of the calls whose routing key starts with `prefix`."""
    return [m[0].content for m, sid in model.calls if sid and sid.startswith(prefix) and m[0].role == "system"]


async def test_three_sessions_with_the_role_models_updates_and_no_memory():
    role, target = Recorder("seeker"), Recorder("assistant")
    done = await run_course(course(), Participant(role), Participant(target, system_prompt="SYS"))
    assert [s.index for s in done] == [1, 2, 3] and all(s.ended and len(s.turns) == 5 for s in done)
    assert done[0].turns[0].text == opener("en") and done[1].turns[0].text == session_opener("en")
    assert done[0].update is None and done[1].update_source == done[2].update_source == "role_model"
    # 2 seeker turns a session + one update before sessions 2 and 3; the target answers only its turns
    assert len(role.calls) == 8 and len(target.calls) == 6
    update_2 = role.calls[2][0]  # after session 1's two seeker turns
    assert "Night shifts" in update_2[1].content and "Me: seeker1" in update_2[1].content
    assert "AI assistant: assistant1" in update_2[1].content and "conversation number 2" in update_2[1].content
    assert done[1].update == "seeker3" and [c.stage for c in done[1].calls] == ["role"]
    # session 3's seeker plays the card with both updates; its target sees nothing of sessions 1 and 2
    role_3 = systems(role, "s3:role")[-1]
    assert "conversation number 3" in role_3 and "Before conversation 2: seeker3" in role_3
    assert f"Before conversation 3: {done[2].update}" in role_3
    assert set(systems(target, "s")) == {"SYS"} and all(s.memory_text is None for s in done)


async def test_the_cards_own_updates_come_first_and_the_role_model_writes_the_rest():
    role, target = Recorder("seeker"), Recorder("assistant")
    done = await run_course(course(card_updates=("I switched to day shifts.",)), Participant(role), Participant(target))
    assert (done[1].update, done[1].update_source, done[1].calls) == ("I switched to day shifts.", "card", [])
    (update_3,) = [m for m, _ in role.calls if "About a week has passed" in m[-1].content]
    assert done[2].update_source == "role_model" and "- I switched to day shifts." in update_3[1].content


async def test_summary_memory_is_the_targets_own_notes_after_each_session():
    role, target = Recorder("seeker"), Recorder("assistant")
    done = await run_course(course(memory="summary"), Participant(role), Participant(target, system_prompt="SYS"))
    notes_1 = target.calls[2][0]  # the target's notes after its two answers of session 1
    assert "Person: seeker1" in notes_1[1].content and "You: assistant1" in notes_1[1].content
    assert "(none yet)" in notes_1[1].content and target.calls[2][1] == "s2:target"
    assert done[1].notes == "assistant3" and done[1].memory_sessions == 1
    assert systems(target, "s2:target")[-1] == "SYS\n\n" + done[1].memory_text and "assistant3" in done[1].memory_text
    notes_2 = target.calls[5][0]  # session 3's notes read session 2's
    assert "assistant3" in notes_2[1].content and done[2].memory_sessions == 2
    assert [c.stage for c in done[2].calls] == ["role", "target"]


async def test_transcripts_keep_the_latest_sessions_that_fit_the_targets_context():
    role = Recorder("seeker")
    # room for the system prompt and one earlier session, not two
    target = Recorder("assistant", context=200)
    done = await run_course(course(memory="transcripts"), Participant(role), Participant(target, system_prompt="SYS"))
    assert done[1].memory_sessions == 1 and "Conversation 1:" in done[1].memory_text
    assert done[2].memory_sessions == 1 and "Conversation 2:" in done[2].memory_text
    assert "Conversation 1:" not in done[2].memory_text and all(len(s.turns) == 5 for s in done)
    # the overflow came at session 3's first answer; its seeker turn was kept, not asked again
    assert len(role.calls) == 8


async def test_a_course_resumes_in_the_session_it_was_in_and_asks_only_what_is_missing():
    records, turns = {}, {}

    def on_session(s):  # what a checkpoint keeps: JSON
        records[s.index] = json.loads(json.dumps(s.record()))

    def on_turn(s):
        turns[s.index] = [t.to_row() for t in s.turns]

    role, target = Recorder("seeker"), Recorder("assistant", fail_at=4)  # session 2's first answer
    with pytest.raises(ChatModelError):
        await run_course(course(memory="summary"), Participant(role), Participant(target), on_session=on_session,
                         on_turn=on_turn)
    assert records[1]["ended"] and not records[2]["ended"] and len(turns[2]) == 2
    resume = [Session.from_record(records[k], turns.get(k, [])) for k in sorted(records)]
    role2, target2 = Recorder("again"), Recorder("answer")
    done = await run_course(course(memory="summary"), Participant(role2), Participant(target2), resume=resume)
    assert done[0].turns[1].text == "seeker1" and done[1].turns[1].text == turns[2][1]["text"]
    assert done[1].notes == records[2]["notes"] and all(len(s.turns) == 5 for s in done)
    # session 2's last three turns (target, seeker, target), then session 3's update, notes and four turns
    assert len(role2.calls) == 1 + 1 + 2 and len(target2.calls) == 2 + 1 + 2


def test_bad_settings_are_one_line():
    with pytest.raises(ValueError, match="unknown memory 'all'"):
        course(memory="all")
    with pytest.raises(ValueError, match="no 'fr' text"):
        check_languages(["en", "fr"])
