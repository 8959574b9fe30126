"""The continuity judge (beyond the paper): does the AI assistant of a course's later session follow up
on, remember and build on the previous session? The judge reads the previous session, then this one,
and scores this one 0-4 on the rubric of sim/data/prompts/continuity.yaml, in the frame of the seven
(rubrics.yaml's system line and question, the release's and the figures' layouts, either order).

`earlier_sessions` finds each later session's previous one among a run folder's dialogue rows: only
sessions 2, 3, ... whose previous session is ok have one, and only they are scored on continuity.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.judging.dimensions import CONTINUITY
from esc_eval.sim.judging.prompts import PromptOrder, Rendering, render_dialogue
from esc_eval.sim.judging.rubrics import RubricVariant, rubric_ask, rubric_text
from esc_eval.sim.prompt_files import load_prompt_file

Pairs = Sequence[tuple[str, str]]


def continuity_messages(earlier: Pairs, turns: Pairs, language: str, rubric: RubricVariant = "official",
                        rendering: Rendering = "official", order: PromptOrder = "rubric_first") -> list[ChatMessage]:
    """The chat messages asking a judge for a later session's continuity score, the previous session
    (`earlier`) shown before it. Laid out as judging/prompts.py judge_messages lays out the seven."""
    if order not in ("rubric_first", "dialogue_first"):
        raise ValueError(f"unknown prompt order {order!r} (rubric_first | dialogue_first)")
    frame, own = load_prompt_file("rubrics"), load_prompt_file("continuity")
    question = frame["question"].replace("{ask}", rubric_ask(CONTINUITY, rubric))
    both = (own["earlier_header"] + " \n" + render_dialogue(earlier, rendering).strip() + "\n\n"
            + own["current_header"] + " \n" + render_dialogue(turns, rendering).strip())
    if rubric == "official":
        rules = rubric_text(CONTINUITY, language, "official")
        body = both + "\n\n" + rules + question if order == "dialogue_first" else rules + both + "\n" + question
        return [ChatMessage(role="user", content=body)]
    rules = rubric_text(CONTINUITY, language, "paper").rstrip()
    body = both + "\n\n" + rules + "\n" + question if order == "dialogue_first" else rules + "\n" + both + "\n" + question
    return [ChatMessage(role="system", content=frame["system"]), ChatMessage(role="user", content=body)]


def earlier_sessions(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Dialogue id of each session 2, 3, ... -> its course's previous session's turns as (speaker, text),
    from dialogue rows (dialogue_id, course_id, session, status, turns), where that session is ok."""
    by_place: dict[tuple[str, int], list[tuple[str, str]]] = {}
    later: list[tuple[str, str, int]] = []
    for r in rows:
        course, session = r.get("course_id"), r.get("session")
        if course is None or session is None or r.get("status") != "ok":
            continue
        by_place[(course, int(session))] = [(t["speaker"], t["text"]) for t in r.get("turns") or []]
        if session > 1:
            later.append((r["dialogue_id"], course, int(session)))
    return {did: by_place[(course, k - 1)] for did, course, k in later if (course, k - 1) in by_place}
