"""A course of sessions as a pure async function of its inputs: the same seeker and target meet
`sessions` times; each session is one dialogue (sim/dialogue/dialogue.py run_dialogue), and between
two sessions the seeker's situation moves on and the target keeps what its deployment would.

Before session k > 1:
- the seeker's update: what happened since the last session, the card's own (`card_updates[k - 2]`)
  or, where the card gives none, written by the role model from the card, the earlier updates and
  the last session (texts.py update_messages). The role model plays session k from the card with
  every update so far (texts.py seeker_card), greeted by the later sessions' opener.
- the target's memory (`memory`): "none", a bare model behind an API: nothing; "summary", a product's
  memory feature: the target model itself writes notes after each session, from its earlier notes and
  the session that ended, and its system prompt carries them; "transcripts", one long thread: its
  system prompt carries the earlier sessions in full, the oldest left out while the first call of the
  session does not fit its context (ContextOverflowError), so it holds what fits.

Resumable: `resume` gives the sessions already begun (their records and turns, from the caller's
checkpoints); a course continues in the session it was in, from its last turn, and nothing done is
asked again. `on_session` is called when a session's between-session step is done (and again when the
memory shrank to fit, and when it ended), `on_turn` after each turn: where the caller checkpoints.
Model errors propagate (ChatModelError), as in run_dialogue: the session they stopped is the last one
`on_session` reported.

Risk that emerges at a set session (sim/cards/emergence.py): `role_prompts` gives each session's
schedule of the role model's system prompt (round -> the prompt from that round on), from the session's
own prompt and its index: the caller passes the card's (sim/emerging/schedule.py card_prompts, which sits
above this room), so a disclosure of session k is said at its round of session k and carried as said
in the sessions after it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Sequence

from esc_eval.serve.chat.interface import ContextOverflowError
from esc_eval.sim.courses.texts import (memory_from_notes, memory_from_transcripts, seeker_card, session_opener,
                                        summary_messages, update_messages, with_memory)
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt

Memory = Literal["none", "summary", "transcripts"]
MEMORY_MODES: tuple[str, ...] = ("none", "summary", "transcripts")
CARD, ROLE_MODEL = "card", "role_model"  # who wrote a between-session update


@dataclass
class Call:
    """A model call between two sessions: the role's update ("role") or the target's notes ("target")."""

    stage: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def to_row(self) -> dict[str, Any]:
        return {"stage": self.stage, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "latency_s": self.latency_s}


@dataclass
class Session:
    """One session of a course: what came before it, and its turns."""

    index: int  # from 1
    update: str | None = None  # the seeker's situation since the previous session (None: session 1)
    update_source: str | None = None  # CARD | ROLE_MODEL
    notes: str | None = None  # memory "summary": the target's notes it was given
    memory_text: str | None = None  # what the target's system prompt carried after its configured one
    memory_sessions: int = 0  # earlier sessions that text covers
    calls: list[Call] = field(default_factory=list)  # the calls made before it
    turns: list[Turn] = field(default_factory=list)
    ended: bool = False

    def record(self) -> dict[str, Any]:
        """The session without its turns, as JSON (what a checkpoint keeps beside them)."""
        return {"index": self.index, "update": self.update, "update_source": self.update_source, "notes": self.notes,
                "memory_text": self.memory_text, "memory_sessions": self.memory_sessions,
                "calls": [c.to_row() for c in self.calls], "ended": self.ended}

    @classmethod
    def from_record(cls, record: dict[str, Any], turns: Sequence[Turn | dict[str, Any]]) -> "Session":
        fields = {k: record[k] for k in ("index", "update", "update_source", "notes", "memory_text", "memory_sessions",
                                         "ended") if k in record}
        return cls(**fields, calls=[Call(**c) for c in record.get("calls") or []],
                   turns=[t if isinstance(t, Turn) else Turn(**t) for t in turns])


@dataclass
class CourseSetup:
    """Everything that defines a course but its participants."""

    card_text: str
    language: str
    sessions: int
    strategy: str = "official"
    memory: Memory = "none"
    card_updates: Sequence[str] = ()  # the card's own updates: before session 2, 3, ...
    rounds: int = 5
    end_at_sentence: bool = False
    seeker_stop: bool = False
    session_ids: Sequence[str] | None = None  # per session: its dialogue's sticky routing key
    # (the session's role prompt, its index) -> DialogueSetup.role_prompt_from; None: the prompt throughout
    role_prompts: Callable[[str, int], dict[int, str]] | None = None

    def __post_init__(self) -> None:
        if self.memory not in MEMORY_MODES:
            raise ValueError(f"unknown memory {self.memory!r}; known: {', '.join(MEMORY_MODES)}")

    def dialogue(self, session: Session, updates: Sequence[str]) -> DialogueSetup:
        """Session `session` as one dialogue: the card with the updates so far; the later sessions' opener."""
        card = seeker_card(self.card_text, updates, self.language)
        first = opener(self.language, self.strategy) if session.index == 1 else session_opener(self.language)
        sid = self.session_ids[session.index - 1] if self.session_ids else None
        prompt = roleplay_system_prompt(card, self.language, self.strategy, seeker_stop=self.seeker_stop)
        scheduled = self.role_prompts(prompt, session.index) if self.role_prompts is not None else {}
        return DialogueSetup(prompt, first, rounds=self.rounds, session_id=sid, end_at_sentence=self.end_at_sentence,
                             seeker_stop=self.seeker_stop, role_prompt_from=scheduled)


Hook = Callable[[Session], Awaitable[None] | None]


async def _call(hook: Hook | None, session: Session) -> None:
    if hook is not None:
        maybe = hook(session)
        if maybe is not None:
            await maybe


def _sid(setup: CourseSetup, index: int, side: str) -> str | None:
    return f"{setup.session_ids[index - 1]}:{side}" if setup.session_ids else None


async def _between(setup: CourseSetup, done: list[Session], role: Participant, target: Participant) -> Session:
    """Session len(done) + 1's update and memory, from the sessions before it."""
    k, last = len(done) + 1, done[-1]
    s = Session(index=k)
    updates = [d.update for d in done[1:] if d.update is not None]
    if len(setup.card_updates) >= k - 1 and str(setup.card_updates[k - 2]).strip():
        s.update, s.update_source = str(setup.card_updates[k - 2]).strip(), CARD
    else:
        result = await role.model.chat(update_messages(setup.card_text, updates, last.turns, k, setup.language),
                                       role.params, adapter=role.adapter, session_id=_sid(setup, k, "role"))
        s.update, s.update_source = result.text.strip(), ROLE_MODEL
        s.calls.append(Call("role", result.prompt_tokens, result.completion_tokens, result.latency_s))
    if setup.memory == "summary":
        result = await target.model.chat(summary_messages(last.notes, last.turns, k - 1, setup.language), target.params,
                                         adapter=target.adapter, session_id=_sid(setup, k, "target"))
        s.notes = result.text.strip()
        s.calls.append(Call("target", result.prompt_tokens, result.completion_tokens, result.latency_s))
        s.memory_text, s.memory_sessions = memory_from_notes(s.notes, setup.language), k - 1
    elif setup.memory == "transcripts":
        s.memory_sessions = k - 1
        s.memory_text = _transcripts(done, s.memory_sessions, setup.language)
    return s


def _transcripts(done: Sequence[Session], keep: int, language: str) -> str | None:
    """The last `keep` sessions of `done` in full (None when none)."""
    kept = list(done)[len(done) - keep:] if keep else []
    return memory_from_transcripts([(d.index, d.turns) for d in kept], language) if kept else None


async def run_course(
    setup: CourseSetup,
    role: Participant,
    target: Participant,
    *,
    resume: Sequence[Session] | None = None,
    on_session: Hook | None = None,
    on_turn: Hook | None = None,
) -> list[Session]:
    """Run (or continue) the course's sessions in order; return them all, each with its turns.

    role, target: the participants of every session (target.system_prompt: its configured system
    prompt, None for none; each session's memory goes after it)."""
    sessions = list(resume or [])
    for k in range(1, setup.sessions + 1):
        if k <= len(sessions) and sessions[k - 1].ended:
            continue
        if k > len(sessions):
            sessions.append(Session(index=1) if k == 1 else await _between(setup, sessions, role, target))
            await _call(on_session, sessions[-1])
        s = sessions[k - 1]
        updates = [d.update for d in sessions[1:k] if d.update is not None]
        while True:
            dialogue = setup.dialogue(s, updates)
            with_target = Participant(target.model, target.params, with_memory(target.system_prompt, s.memory_text),
                                      target.adapter)

            async def turned(turns: list[Turn], s: Session = s) -> None:
                s.turns = turns
                await _call(on_turn, s)

            try:
                s.turns = await run_dialogue(dialogue, role, with_target, resume_from=s.turns, on_turn=turned)
            except ContextOverflowError:
                # the earlier sessions do not fit the target's context with this one: keep fewer of them
                if setup.memory != "transcripts" or s.memory_sessions == 0:
                    raise
                s.memory_sessions -= 1
                s.memory_text = _transcripts(sessions[:k - 1], s.memory_sessions, setup.language)
                await _call(on_session, s)
                continue
            break
        s.ended = True
        await _call(on_session, s)
    return sessions
