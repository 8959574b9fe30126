"""Role-play SFT examples for ESC-Role (paper section 2.3, Figure 11).

The role model plays the seeker. Its chat is: system = the role-play prompt around the card;
"user" = the AI assistant's turns (the first one is the opener, "Hello, I'm your personal
assistant..."); "assistant" = the seeker's turns. The loss is taken only on the seeker's turns.
A dialogue that starts with the seeker (ESConv) gets the opener prepended as the first user
turn, exactly as in Figure 11; a trailing assistant turn (nothing for the seeker to answer) is
dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from esc_eval.train.config import ROLEPLAY_STRATEGY
from esc_eval.train.data.chat_tokens import TokenizedExample, tokenize_chat
from esc_eval.train.data.dialogue_sources import SourceDialogue
from esc_eval.train.errors import TrainInputError


@dataclass
class RolePlayExample:
    """One role-play chat: messages in the role model's view (seeker = assistant)."""

    dialogue_id: str
    language: str
    target_model: str
    messages: list[dict[str, str]]
    meta: dict[str, Any] = field(default_factory=dict)


def roleplay_messages(dialogue: SourceDialogue, strategy: str = ROLEPLAY_STRATEGY,
                      card_text: str | None = None) -> list[dict[str, str]]:
    """The role model's chat for one dialogue (see the module docstring)."""
    from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt

    card = card_text or dialogue.card_text
    if not card:
        raise TrainInputError(f"dialogue {dialogue.dialogue_id}: no role card text (give cards= for this source)")
    messages = [{"role": "system", "content": roleplay_system_prompt(card, dialogue.language, strategy)}]
    turns = list(dialogue.turns)
    if turns and turns[0][0] == "seeker":
        messages.append({"role": "user", "content": opener(dialogue.language, strategy)})
    for speaker, text in turns:
        messages.append({"role": "user" if speaker == "assistant" else "assistant", "content": text})
    while messages and messages[-1]["role"] == "user":
        messages.pop()
    if not any(m["role"] == "assistant" for m in messages):
        raise TrainInputError(f"dialogue {dialogue.dialogue_id}: has no seeker turn to train on")
    return messages


def build_roleplay_examples(dialogues: Sequence[SourceDialogue], strategy: str = ROLEPLAY_STRATEGY,
                            skip_empty: bool = True) -> list[RolePlayExample]:
    """One example per dialogue. Dialogues with no seeker turn are skipped (skip_empty) or raise."""
    out = []
    for d in dialogues:
        if skip_empty and not any(s == "seeker" for s, _ in d.turns):
            continue
        out.append(RolePlayExample(
            dialogue_id=d.dialogue_id, language=d.language, target_model=d.target_model,
            messages=roleplay_messages(d, strategy), meta=dict(d.meta),
        ))
    return out


def tokenize_roleplay(tokenizer, example: RolePlayExample, max_length: int) -> TokenizedExample | None:
    """Loss on the seeker's turns; a chat longer than max_length keeps its complete leading turns."""
    return tokenize_chat(tokenizer, example.messages, max_length, target_role="assistant", truncation="turns")
