"""Card extraction prompts (Figure 6 for QA posts, Figure 7 for dialogues) and their outcome.

The prompt texts come from sim/data/prompts/cards.yaml (`card_prompts()`); this module fills
them. Messages: system "You are a helpful assistant!", then (one_shot) the figure's worked
example as a user/assistant pair, then the instruction + this item's input as the user message.
"""
from __future__ import annotations

from typing import Any

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.cardbuild.config import MAX_INPUT_CHARS
from esc_eval.sim.cardbuild.sources.items import SourceItem
from esc_eval.sim.prompt_files import load_prompt_file

SPEAKER_LABELS = {"en": {"seeker": "seeker", "supporter": "supporter"}, "zh": {"seeker": "求助者", "supporter": "支持者"}}
NO_SITUATION = {"en": "(no summary given)", "zh": "（无概述）"}


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + " ..."


def source_dialogue_text(item: SourceItem, max_chars: int = MAX_INPUT_CHARS) -> str:
    """The dialogue as Figure 7 prints it: one 'seeker: ...' / 'supporter: ...' line per utterance.

    Longer dialogues keep their beginning (the problem is stated early) up to max_chars.
    """
    labels = SPEAKER_LABELS[item.language]
    sep = "：" if item.language == "zh" else ": "
    lines, used = [], 0
    for turn in item.turns or []:
        line = f"{labels[turn.speaker]}{sep}{turn.text}"
        if used + len(line) > max_chars and lines:
            lines.append("...")
            break
        lines.append(_truncate(line, max_chars))
        used += len(line) + 1
    return "\n".join(lines)


def extraction_messages(item: SourceItem, *, one_shot: bool = True, max_input_chars: int = MAX_INPUT_CHARS) -> list[ChatMessage]:
    """The chat messages asking for this item's role card."""
    prompts = card_prompts()
    key = "extract_qa" if item.kind == "qa" else "extract_md"
    p = prompts[key][item.language]
    if item.kind == "qa":
        body = p["input"].replace("{post}", _truncate(item.text or "", max_input_chars))
    else:
        situation = item.situation or NO_SITUATION[item.language]
        body = p["input"].replace("{situation}", situation).replace("{dialogue}", source_dialogue_text(item, max_input_chars))
    messages = [ChatMessage(role="system", content=prompts["system"])]
    if one_shot:
        messages += [
            ChatMessage(role="user", content=p["instruction"] + "\n" + p["example_input"]),
            ChatMessage(role="assistant", content=p["example_output"]),
        ]
    messages.append(ChatMessage(role="user", content=p["instruction"] + "\n" + body))
    return messages


def card_prompts() -> dict[str, Any]:
    """The card-construction prompts (Figures 6-8) as loaded from data/prompts/cards.yaml."""
    return load_prompt_file("cards")
