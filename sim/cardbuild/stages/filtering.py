"""LLM filtering with the Figure 8 prompt: a detailed card -> its top category; else discard.

The reply is parsed into one of the prompt's three labels (family issues / work, study, career
issues / social issues and others, or their Chinese forms) or the discard sentence. With
`constrained` the model may only answer one of those four strings (structured output); without,
a lenient keyword reading is used and an unreadable reply is reported as such (`unparsed`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.cardbuild.stages.extraction import card_prompts

# the prompt's label order -> taxonomy top-category ids
TOP_IDS = ("family_and_life", "work_and_study", "social_interaction_and_others")
_KEYWORDS = (
    (r"famil|家庭", 0),
    (r"work|study|career|job|工作|学习|职业", 1),
    (r"social|other|社会|其他", 2),
)
Verdict = Literal["keep", "discard", "unparsed"]


@dataclass
class FilterVerdict:
    verdict: Verdict
    category_1: str | None = None  # taxonomy top-category id when kept
    label: str | None = None  # the prompt label the reply matched


def render_card(fields: dict[str, str], language: str) -> str:
    labels = {"en": ("Age", "Gender", "Occupation", "Problem"), "zh": ("年龄", "性别", "职业", "问题")}[language]
    sep = "：" if language == "zh" else ": "
    keys = ("age", "gender", "occupation", "problem")
    return "\n\n".join(f"{lab}{sep}{fields[k]}" for lab, k in zip(labels, keys))


def filter_messages(card_text: str, language: str, *, one_shot: bool = True) -> list[ChatMessage]:
    prompts = card_prompts()
    p = prompts["filter"][language]
    messages = [ChatMessage(role="system", content=prompts["system"])]
    if one_shot:
        messages += [ChatMessage(role="user", content=p["instruction"] + "\n" + p["example_input"]),
                     ChatMessage(role="assistant", content=p["example_output"])]
    messages.append(ChatMessage(role="user", content=p["instruction"] + "\n" + p["input"].replace("{card}", card_text)))
    return messages


def filter_choices(language: str) -> list[str]:
    p = card_prompts()["filter"][language]
    return [*p["labels"], p["discard"]]


def parse_filter_reply(reply: str, language: str) -> FilterVerdict:
    """Map a Figure 8 reply to keep (with its top category), discard, or unparsed."""
    p = card_prompts()["filter"][language]
    text = (reply or "").strip().strip("'\"“”。.").strip()
    low = text.lower()
    if not low:
        return FilterVerdict("unparsed")
    if "not detailed" in low or "discard" in low or "不够详细" in text or "舍弃" in text:
        return FilterVerdict("discard", label=p["discard"])
    for i, label in enumerate(p["labels"]):  # exact label first
        if low == label.lower():
            return FilterVerdict("keep", TOP_IDS[i], label)
    hits = sorted({i for pattern, i in _KEYWORDS if re.search(pattern, low)})
    if len(hits) == 1:
        return FilterVerdict("keep", TOP_IDS[hits[0]], p["labels"][hits[0]])
    return FilterVerdict("unparsed")
