"""The questions of the person's own view (sim/data/prompts/seeker_ratings.yaml), as messages: to the
simulated seeker at the end of its dialogue, in its role (`seeker_messages`), or to a judge reading a
dialogue in the seeker's place (`reader_messages`). One question per call, the conversation first."""
from __future__ import annotations

from typing import Iterable, Mapping

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.dialogue.dialogue import Turn, role_view
from esc_eval.sim.judging.distress_turns import conversation
from esc_eval.sim.prompt_files import load_prompt_file
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS

PROMPT_FILE = "seeker_ratings"


def _lang(language: str | None) -> str:
    return "zh" if language == "zh" else "en"


def check_item(item: str) -> str:
    if item not in SEEKER_RATING_ITEMS:
        raise ValueError(f"seeker rating item {item!r}: expected one of {', '.join(SEEKER_RATING_ITEMS)}")
    return item


def question(item: str, language: str | None) -> str:
    """The question of one item and the answer's instruction, in the dialogue's language."""
    data, lang = load_prompt_file(PROMPT_FILE), _lang(language)
    return data["items"][check_item(item)][lang], data["answer"][lang]


def seeker_messages(role_system_prompt: str, turns: Iterable[Mapping], language: str | None,
                    item: str) -> list[ChatMessage]:
    """The role model's conversation as it played it (sim/dialogue/dialogue.py role_view), then the
    question: appended to the supporter's last reply (the turns keep alternating), or as a message of
    its own when the seeker spoke last (it ended the dialogue)."""
    data, lang = load_prompt_file(PROMPT_FILE), _lang(language)
    q, answer = question(item, language)
    ask = data["seeker"][lang].replace("{question}", q).replace("{answer}", answer)
    own = [Turn(index=i, speaker=t["speaker"], text=t["text"] or "") for i, t in enumerate(turns)]
    messages = role_view(own, role_system_prompt)
    if messages[-1].role == "user":
        messages[-1] = ChatMessage(role="user", content=f"{messages[-1].content}\n\n{ask}")
    else:
        messages.append(ChatMessage(role="user", content=ask))
    return messages


def reader_messages(turns: Iterable[Mapping], language: str | None, item: str) -> list[ChatMessage]:
    """A judge's messages for one item of a dialogue it reads as the seeker (people's or simulated)."""
    data, lang = load_prompt_file(PROMPT_FILE), _lang(language)
    q, answer = question(item, language)
    labels = data["labels"][lang]
    lines = "\n".join(f"{labels[s]}: {t}" for s, t in conversation(turns) if t)
    body = data["reader"]["prompt"][lang].replace("{conversation}", lines).replace("{question}", q)
    return [ChatMessage(role="system", content=data["reader"]["system"][lang]),
            ChatMessage(role="user", content=body.replace("{answer}", answer))]
