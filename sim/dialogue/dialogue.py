"""One ESC-Eval dialogue as a pure async function of its inputs.

Role mapping of the paper's release (evaluate.py): the role model (ESC-Role) gets the role-play
system prompt and sees the assistant side as "user", starting with the opener; the model under
test sees the seeker as "user". The opener, spoken by the assistant side, is turn 0; then each
round is one seeker turn and one assistant turn: 1 + 2 x rounds messages in all, or fewer when
the seeker ends the conversation itself (setup.seeker_stop; sim/dialogue/seeker_stop.py): the
dialogue then ends after that seeker turn; or when it outgrows a model's context: a call whose
prompt leaves no room for an answer (ContextOverflowError) ends the dialogue after its last turn,
once at least one round is done (before that the models cannot hold the dialogue at all, and the
error propagates). ending.py's `dialogue_ending` says which of the three ended it. The role model's
system prompt may change at set rounds (setup.role_prompt_from: what the seeker discloses when,
sim/emerging/schedule.py), an input like the rest: the function stays pure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from esc_eval.serve.chat.interface import ChatMessage, ChatModel, ContextOverflowError, GenerationParams
from esc_eval.sim.dialogue.seeker_stop import end_finish_reason, find_end, seeker_end


@dataclass
class Turn:
    index: int
    speaker: str  # "assistant" (model under test, and the opener) | "seeker" (ESC-Role)
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"

    def to_row(self) -> dict:
        # dataclasses.asdict deep-copies; this runs per turn at thousands of dialogues per second
        return {"index": self.index, "speaker": self.speaker, "text": self.text, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "latency_s": self.latency_s,
                "finish_reason": self.finish_reason}


@dataclass
class Participant:
    """A model plus how it is called in this dialogue."""

    model: ChatModel
    params: GenerationParams = field(default_factory=GenerationParams)
    system_prompt: str | None = None
    adapter: str | None = None


@dataclass
class DialogueSetup:
    """Everything that defines one dialogue (with the participants, all of it)."""

    role_system_prompt: str
    opener: str
    rounds: int = 5
    session_id: str | None = None  # sticky routing key: every turn of a dialogue hits one replica
    end_at_sentence: bool = False  # a reply cut at its token cap is cut back to its last full sentence
    seeker_stop: bool = False  # the seeker may end the dialogue with its stop mark (sim/dialogue/seeker_stop.py)
    # round -> the role model's system prompt from that round's seeker turn on (a schedule of what the seeker
    # discloses when: sim/emerging/schedule.py); rounds before the first key keep role_system_prompt
    role_prompt_from: dict[int, str] = field(default_factory=dict)

    def role_prompt_at(self, round_: int) -> str:
        """The role model's system prompt for its turn in round `round_` (from 1)."""
        keys = [r for r in self.role_prompt_from if r <= round_]
        return self.role_prompt_from[max(keys)] if keys else self.role_system_prompt


# A sentence's end: a Latin mark and any closing quotes or brackets before a space (not "3.5" or "e.g.x"),
# or a CJK mark and its closing quotes (no space follows in Chinese).
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?=\s)|[\u3002\uff01\uff1f][\u201d\u300d\u300f\uff09]*")
SENTENCE = "sentence"  # the finish reason of a reply cut back to its last full sentence


def cut_to_sentence(text: str) -> str | None:
    """`text` up to the end of its last full sentence; None when it has none (or nothing follows
    the last one: the reply was not cut inside a sentence)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if not ends or not text[ends[-1]:].strip():
        return None
    return text[:ends[-1]].rstrip()


def role_view(turns: list[Turn], system_prompt: str) -> list[ChatMessage]:
    """The role model's conversation: the assistant side is 'user', the seeker is 'assistant'."""
    msgs = [ChatMessage(role="system", content=system_prompt)]
    for t in turns:
        msgs.append(ChatMessage(role="user" if t.speaker == "assistant" else "assistant", content=t.text))
    return msgs


def target_view(turns: list[Turn], system_prompt: str | None) -> list[ChatMessage]:
    """The target's conversation: the seeker is 'user'; the opener is not shown (as in the release)."""
    msgs = [ChatMessage(role="system", content=system_prompt)] if system_prompt else []
    for t in turns[1:]:
        msgs.append(ChatMessage(role="user" if t.speaker == "seeker" else "assistant", content=t.text))
    return msgs


async def run_dialogue(
    setup: DialogueSetup,
    role: Participant,
    target: Participant,
    *,
    resume_from: list[Turn] | None = None,
    on_turn: Callable[[list[Turn]], Awaitable[None] | None] | None = None,
) -> list[Turn]:
    """Run the opener and `setup.rounds` rounds (fewer when the seeker ends it); return all turns.

    resume_from: turns already done (a turn-level checkpoint); the dialogue continues after them.
    on_turn: called with the turns so far after each new turn (the batch layer checkpoints here).
    Model errors propagate (ChatModelError); retries belong to the caller.
    """
    turns = list(resume_from or [])
    if not turns:
        turns.append(Turn(index=0, speaker="assistant", text=setup.opener))
    total = 1 + 2 * setup.rounds
    if setup.seeker_stop and seeker_end(turns):
        return turns  # resumed after the seeker's last word: nothing more to say
    # Both views are built once and then grown by one message per turn (not rebuilt per call).
    role_msgs = role_view(turns, setup.role_system_prompt)
    target_msgs = target_view(turns, target.system_prompt)
    role_sid = f"{setup.session_id}:role" if setup.session_id else None
    target_sid = f"{setup.session_id}:target" if setup.session_id else None
    while len(turns) < total:
        seeker_next = turns[-1].speaker == "assistant"
        part, messages, sid = (role, role_msgs, role_sid) if seeker_next else (target, target_msgs, target_sid)
        if seeker_next and setup.role_prompt_from:  # the seeker's turn of round k: its prompt as scheduled
            messages[0] = ChatMessage(role="system", content=setup.role_prompt_at(1 + len(turns) // 2))
        try:
            result = await part.model.chat(list(messages), part.params, adapter=part.adapter, session_id=sid)
        except ContextOverflowError:
            if len(turns) < 3:
                raise  # not one round fits: not a dialogue that outgrew the context
            break  # the dialogue outgrew a model's context: it ends here (dialogue_ending: context_full)
        text, finish = result.text.strip(), result.finish_reason
        if setup.end_at_sentence and finish == "length":
            cut = cut_to_sentence(text)
            if cut:  # what the next turn sees too: a sentence, not half of one
                text, finish = cut, SENTENCE
        ended = None
        if setup.seeker_stop and seeker_next:
            text, ended = find_end(text)
            if ended:
                finish = end_finish_reason(ended)
        turns.append(Turn(
            index=len(turns), speaker="seeker" if seeker_next else "assistant", text=text,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            latency_s=result.latency_s, finish_reason=finish,
        ))
        role_msgs.append(ChatMessage(role="assistant" if seeker_next else "user", content=text))
        target_msgs.append(ChatMessage(role="user" if seeker_next else "assistant", content=text))
        if on_turn is not None:
            maybe = on_turn(turns)
            if maybe is not None:
                await maybe
        if ended:
            break
    return turns
