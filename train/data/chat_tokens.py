"""Tokenize a chat with loss only on chosen turns (labels = -100 everywhere else).

Growing-prefix rendering with the tokenizer's own chat template: for every message i that is a
training target, the span of its tokens is [len(render(messages[:i], add_generation_prompt=True)),
len(render(messages[:i+1]))) of the full rendering. This works for any template (no
`{% generation %}` markers needed); the loss covers the message text and its end-of-turn token
(e.g. "...<|im_end|>\\n" for ChatML). A template whose renderings are not prefixes of each other
raises an error instead of producing silently wrong masks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from esc_eval.train.errors import TrainInputError

IGNORE_INDEX = -100


@dataclass
class TokenizedExample:
    """input_ids and labels of one SFT example (labels = -100 where no loss is taken)."""

    input_ids: list[int]
    labels: list[int]
    truncated: bool = False

    @property
    def n_target_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE_INDEX)

    def as_dict(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "labels": self.labels}


def _msg(m: Any) -> dict[str, str]:
    return {"role": m["role"], "content": m["content"]} if isinstance(m, dict) else {"role": m.role, "content": m.content}


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _render(tokenizer, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def tokenize_chat(tokenizer, messages: Sequence[Any], max_length: int, target_role: str = "assistant",
                  truncation: str = "turns") -> TokenizedExample | None:
    """input_ids + labels for `messages`, with loss on every message whose role is `target_role`.

    truncation: "turns" keeps the longest prefix ending after a complete target message that
    fits in max_length (None if not even the first one fits); "error" raises TrainInputError;
    "drop" returns None when the chat is too long.
    """
    msgs = [_msg(m) for m in messages]
    targets = [i for i, m in enumerate(msgs) if m["role"] == target_role]
    if not targets:
        raise TrainInputError(f"chat has no {target_role!r} message to train on")
    full_ids = _ids(tokenizer, _render(tokenizer, msgs, add_generation_prompt=False))
    spans = []
    for i in targets:
        start_ids = _ids(tokenizer, _render(tokenizer, msgs[:i], add_generation_prompt=True)) if i else []
        end = len(_ids(tokenizer, _render(tokenizer, msgs[: i + 1], add_generation_prompt=False)))
        if full_ids[: len(start_ids)] != start_ids or end > len(full_ids):
            raise TrainInputError(
                "the chat template's rendering of a prefix is not a prefix of the full rendering; "
                "cannot mask turns by growing prefixes with this template")
        spans.append((len(start_ids), end))
    truncated = False
    if len(full_ids) > max_length:
        if truncation == "error":
            raise TrainInputError(f"chat is {len(full_ids)} tokens, longer than max_length {max_length}")
        fitting = [s for s in spans if s[1] <= max_length]
        if truncation == "drop" or not fitting:
            return None
        spans = fitting
        full_ids = full_ids[: spans[-1][1]]
        truncated = True
    labels = [IGNORE_INDEX] * len(full_ids)
    for start, end in spans:
        labels[start:end] = full_ids[start:end]
    return TokenizedExample(input_ids=full_ids, labels=labels, truncated=truncated)
