import pytest

from esc_eval.serve.chat.interface import ChatMessage, ChatModel, ChatModelError, ChatResult
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, role_view, run_dialogue, target_view


class Recorder(ChatModel):
    """Records what each side was shown; answers with a label and a counter."""

    def __init__(self, label, fail_at=None):
        self.label, self.seen, self.fail_at = label, [], fail_at

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.seen.append((list(messages), session_id))
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise ChatModelError("boom", kind="transient")
        return ChatResult(text=f"{self.label}{len(self.seen)}", prompt_tokens=10, completion_tokens=3, latency_s=0.01)


def setup(rounds=5):
    return DialogueSetup(role_system_prompt="ROLE-SYSTEM", opener="OPENER", rounds=rounds, session_id="d1")


async def test_eleven_messages_with_the_release_role_mapping():
    role, target = Recorder("seeker"), Recorder("assistant")
    turns = await run_dialogue(setup(), Participant(role), Participant(target, system_prompt="You are a helpful assistant!"))
    assert len(turns) == 11
    assert [t.speaker for t in turns] == ["assistant"] + ["seeker", "assistant"] * 5
    assert turns[0].text == "OPENER" and turns[1].text == "seeker1" and turns[2].text == "assistant1"
    # the role model sees the assistant side as "user", starting with the opener
    last_role_msgs, sid = role.seen[-1]
    assert [m.role for m in last_role_msgs] == ["system", "user"] + ["assistant", "user"] * 4
    assert last_role_msgs[0].content == "ROLE-SYSTEM" and last_role_msgs[1].content == "OPENER"
    assert last_role_msgs[2].content == "seeker1" and last_role_msgs[3].content == "assistant1"
    assert sid == "d1:role"
    # the target sees the seeker as "user", its own replies as "assistant", and no opener
    last_target_msgs, tsid = target.seen[-1]
    assert [m.role for m in last_target_msgs] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert last_target_msgs[1].content == "seeker1" and "OPENER" not in [m.content for m in last_target_msgs]
    assert tsid == "d1:target"
    assert turns[3].prompt_tokens == 10 and turns[3].completion_tokens == 3


async def test_resume_continues_after_checkpointed_turns():
    role, target = Recorder("s"), Recorder("a")
    done = [Turn(0, "assistant", "OPENER"), Turn(1, "seeker", "old-s"), Turn(2, "assistant", "old-a"), Turn(3, "seeker", "old-s2")]
    seen = []
    turns = await run_dialogue(setup(), Participant(role), Participant(target), resume_from=done,
                               on_turn=lambda ts: seen.append(len(ts)))
    assert len(turns) == 11 and turns[3].text == "old-s2"
    assert len(role.seen) == 3 and len(target.seen) == 4  # only the missing turns were generated
    assert target.seen[0][0][-1].content == "old-s2"
    assert seen == list(range(5, 12))


async def test_model_error_propagates_to_the_caller():
    with pytest.raises(ChatModelError):
        await run_dialogue(setup(), Participant(Recorder("s")), Participant(Recorder("a", fail_at=2)))


def test_views_are_pure_functions_of_turns():
    turns = [Turn(0, "assistant", "hi"), Turn(1, "seeker", "sad")]
    assert role_view(turns, "S") == [ChatMessage(role="system", content="S"), ChatMessage(role="user", content="hi"),
                                     ChatMessage(role="assistant", content="sad")]
    assert target_view(turns, None) == [ChatMessage(role="user", content="sad")]


class CutAtCap(ChatModel):
    """Answers with a text cut at its token cap (finish reason 'length')."""

    def __init__(self, text):
        self.text, self.seen = text, []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.seen.append(list(messages))
        return ChatResult(text=self.text, completion_tokens=48, finish_reason="length")


@pytest.mark.parametrize("text, kept, finish", [
    ("I lost my job. I keep thinking about it and", "I lost my job.", "sentence"),
    ('She said "go." Then I', 'She said "go."', "sentence"),
    ("他走了。我每天都", "他走了。", "sentence"),
    ("I paid 3.5k and the man never came back and", "I paid 3.5k and the man never came back and", "length"),
])
async def test_end_at_sentence_cuts_a_capped_reply_back_to_its_last_sentence(text, kept, finish):
    role, target = CutAtCap(text), CutAtCap(text)
    s = DialogueSetup(role_system_prompt="R", opener="O", rounds=1, end_at_sentence=True)
    turns = await run_dialogue(s, Participant(role), Participant(target))
    assert [(t.text, t.finish_reason) for t in turns[1:]] == [(kept, finish)] * 2
    assert target.seen[0][-1].content == kept  # the next speaker is shown the cut text
    plain = await run_dialogue(DialogueSetup(role_system_prompt="R", opener="O", rounds=1),
                               Participant(CutAtCap(text)), Participant(CutAtCap(text)))
    assert [(t.text, t.finish_reason) for t in plain[1:]] == [(text, "length")] * 2  # off: the paper's protocol
