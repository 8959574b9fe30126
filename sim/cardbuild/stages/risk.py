"""Risk labelling (beyond the paper): which crisis-risk level (sim/cards/risk.py) a source post or
dialogue shows, so a card built from it carries `risk_level` and the safety summary can weigh it.

The prompt is data (sim/data/prompts/safety.yaml, `risk_classify`), this project's wording. It
reads the source itself, not the extracted card: a card's one-paragraph problem may drop the
very sentence that carries the risk. With `constrained` the model can only answer one of the
four labels (structured output); the reply is parsed strictly (a label, or a level name or
accepted spelling of sim/cards/risk.py), and an unreadable one leaves the card unassessed (method
"unparsed"), never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.cardbuild.config import MAX_INPUT_CHARS
from esc_eval.sim.cardbuild.stages.extraction import NO_SITUATION, _truncate, source_dialogue_text
from esc_eval.sim.cardbuild.sources.items import SourceItem
from esc_eval.sim.cards.risk import RISK_LEVELS, normalize_risk_level
from esc_eval.sim.prompt_files import load_prompt_file


@dataclass
class RiskLabel:
    risk_level: str | None  # a level of sim/cards/risk.py, None when the reply was not understood
    method: str  # llm | unparsed
    raw: str = ""


def _prompts(language: str) -> dict:
    return load_prompt_file("safety")["risk_classify"][language]


def risk_input(item: SourceItem, max_chars: int = MAX_INPUT_CHARS) -> str:
    """What the seeker wrote: the post, or the situation summary and the dialogue."""
    if item.kind == "qa":
        return _truncate(item.text or "", max_chars)
    return (item.situation or NO_SITUATION[item.language]) + "\n" + source_dialogue_text(item, max_chars)


def risk_messages(item: SourceItem, *, max_input_chars: int = MAX_INPUT_CHARS) -> list[ChatMessage]:
    """The chat messages asking for this item's risk level."""
    p = _prompts(item.language)
    body = p["instruction"] + "\n" + p["input"].replace("{text}", risk_input(item, max_input_chars))
    system = load_prompt_file("safety")["risk_classify"]["system"]
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=body)]


def risk_choices(language: str) -> list[str]:
    """The four answers, in the order of sim/cards/risk.py's levels."""
    labels = _prompts(language)["labels"]
    return [labels[level] for level in RISK_LEVELS]


def parse_risk_reply(reply: str, language: str) -> RiskLabel:
    """The level a reply names: one of the prompt's labels (any case, quotes and final
    punctuation ignored) or a level name; otherwise unparsed."""
    text = (reply or "").strip().strip("'\"“”「」*").strip().rstrip(".。").strip()
    by_label = {label.lower(): level for level, label in _prompts(language)["labels"].items()}
    level = by_label.get(text.lower())
    if level is None:
        try:
            level = normalize_risk_level(text) if text else None
        except ValueError:
            level = None
    return RiskLabel(level, "llm" if level else "unparsed", reply or "")
