"""The texts of a course between and around its sessions, from sim/data/prompts/sessions.yaml: the
later sessions' opener, the seeker's card with the updates so far, the messages asking the role
model for a between-session update and the target for its notes, and what the target's system
prompt carries of the earlier sessions. Only selects and fills the texts (str.replace, so braces in
them are harmless)."""
from __future__ import annotations

from typing import Sequence

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.prompt_files import load_prompt_file

SESSIONS_FILE = "sessions"  # sim/data/prompts/sessions.yaml


def _texts() -> dict:
    return load_prompt_file(SESSIONS_FILE)


def _pick(entry: dict, language: str, where: str) -> str:
    if language not in entry:
        raise ValueError(f"sessions.yaml {where} has no {language!r} text")
    return entry[language]


def check_languages(languages: Sequence[str]) -> None:
    """ValueError in one line naming the first text sessions.yaml lacks in one of `languages`."""
    data = _texts()
    for language in languages:
        _pick(data["opener"], language, "opener")
        for group, keys in (("seeker", ("header", "line")), ("update", ("system", "user", "no_updates", "seeker", "assistant")),
                            ("summary", ("system", "user", "no_notes", "seeker", "assistant")),
                            ("memory", ("summary", "transcripts", "session", "seeker", "assistant"))):
            for key in keys:
                _pick(data[group][key], language, f"{group}.{key}")


def session_opener(language: str) -> str:
    """The assistant side's first line of sessions 2, 3, ... (the role model's only: the target never sees it)."""
    return _pick(_texts()["opener"], language, "opener")


def transcript(turns: Sequence, language: str, labels: str) -> str:
    """A session as lines '<who>: <text>', the opener left out (the target never saw it); `labels` is the
    sessions.yaml group whose `seeker` and `assistant` name the two sides."""
    group = _texts()[labels]
    seeker, assistant = _pick(group["seeker"], language, f"{labels}.seeker"), _pick(group["assistant"], language, f"{labels}.assistant")
    lines = []
    for t in list(turns)[1:]:
        speaker, text = (t["speaker"], t["text"]) if isinstance(t, dict) else (t.speaker, t.text)
        lines.append(f"{seeker if speaker == 'seeker' else assistant}: {text.strip()}")
    return "\n".join(lines)


def seeker_card(card_text: str, updates: Sequence[str], language: str) -> str:
    """The card the role model plays in session len(updates) + 1: the card, then which conversation this
    is and each between-session update so far (update i came before session i + 2)."""
    if not updates:
        return card_text
    seeker = _texts()["seeker"]
    header = _pick(seeker["header"], language, "seeker.header").replace("{session}", str(len(updates) + 1))
    line = _pick(seeker["line"], language, "seeker.line")
    lines = [line.replace("{session}", str(i + 2)).replace("{update}", u.strip()) for i, u in enumerate(updates)]
    return "\n".join([card_text.rstrip(), header, *lines])


def update_messages(card_text: str, updates: Sequence[str], last_turns: Sequence, session: int,
                    language: str) -> list[ChatMessage]:
    """The role model's call for the update before `session`: the card, the updates so far and the last
    session as the seeker lived it."""
    u = _texts()["update"]
    earlier = "\n".join(f"- {x.strip()}" for x in updates) or _pick(u["no_updates"], language, "update.no_updates")
    user = (_pick(u["user"], language, "update.user").replace("{card}", card_text.strip()).replace("{updates}", earlier)
            .replace("{transcript}", transcript(last_turns, language, "update")).replace("{session}", str(session)))
    return [ChatMessage(role="system", content=_pick(u["system"], language, "update.system")),
            ChatMessage(role="user", content=user)]


def summary_messages(notes: str | None, last_turns: Sequence, session: int, language: str) -> list[ChatMessage]:
    """The target's call for its notes after session `session` (memory "summary"): its earlier notes and
    the session that ended, its own replies as "You"."""
    s = _texts()["summary"]
    user = (_pick(s["user"], language, "summary.user")
            .replace("{notes}", (notes or "").strip() or _pick(s["no_notes"], language, "summary.no_notes"))
            .replace("{transcript}", transcript(last_turns, language, "summary")).replace("{session}", str(session)))
    return [ChatMessage(role="system", content=_pick(s["system"], language, "summary.system")),
            ChatMessage(role="user", content=user)]


def memory_from_notes(notes: str, language: str) -> str:
    """What the target's system prompt carries under memory "summary": its notes."""
    return _pick(_texts()["memory"]["summary"], language, "memory.summary").replace("{notes}", notes.strip())


def memory_from_transcripts(sessions: Sequence[tuple[int, Sequence]], language: str) -> str:
    """What it carries under memory "transcripts": each earlier session (number, turns) in full."""
    m = _texts()["memory"]
    head = _pick(m["session"], language, "memory.session")
    blocks = [head.replace("{session}", str(n)) + "\n" + transcript(turns, language, "memory") for n, turns in sessions]
    return _pick(m["transcripts"], language, "memory.transcripts").replace("{transcripts}", "\n\n".join(blocks))


def with_memory(system: str | None, memory: str | None) -> str | None:
    """The target's system prompt for a session: its configured one, then what it keeps of the earlier
    sessions. None/"" = no system message, unless there is memory (then it is the system message)."""
    if not memory:
        return system or None
    return f"{system.rstrip()}\n\n{memory}" if system else memory
