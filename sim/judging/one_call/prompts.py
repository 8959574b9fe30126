"""The one-call rubric prompt (sim/data/prompts/rubric_one_call.yaml): every dimension's rubric, the
dialogue once, and the question asking for one JSON object; the JSON schema sent with it (each
dimension an integer 0-4) and the answer's layout (what the question shows and the dry run counts)."""
from __future__ import annotations

import json
from typing import Any, Sequence

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.prompts import render_dialogue
from esc_eval.sim.judging.rubrics import rubric_text
from esc_eval.sim.judging.score_parser import LABELS
from esc_eval.sim.prompt_files import load_prompt_file

PROMPT_FILE = "rubric_one_call"


def rubric_schema(dimensions: Sequence[str]) -> dict[str, Any]:
    """The answer's JSON schema: an object of exactly these keys, each an integer 0-4 (OpenAI's strict mode
    wants every key required and no other allowed)."""
    scores = [int(label) for label in LABELS]
    return {"type": "object", "properties": {d: {"type": "integer", "enum": scores} for d in dimensions},
            "required": list(dimensions), "additionalProperties": False}


def answer_layout(dimensions: Sequence[str], value: str = "<0-4>") -> str:
    """The answer as json.dumps lays it out, each value `value`: '{"fluency": <0-4>, ...}' for the question;
    with value '0', an answer as the constrained judge writes it (its length in tokens: the dry run's)."""
    return "{" + ", ".join(f"{json.dumps(d)}: {value}" for d in dimensions) + "}"


def one_call_messages(dimensions: Sequence[str], turns: Sequence[tuple[str, str]], language: str,
                      judge: JudgeConfig) -> list[ChatMessage]:
    """The chat messages of one call asking for every dimension (see the prompt file for the assembly); a
    system message of the judge's own (a registry judge's) goes first where the rubric's frame has none."""
    data = load_prompt_file(PROMPT_FILE)
    frame = data["zh" if language == "zh" else "en"]
    parts = [frame["intro"].replace("{n}", str(len(dimensions)))]
    for d in dimensions:
        parts.append(frame["header"].replace("{key}", d) + "\n" + rubric_text(d, language, judge.rubric).strip())
    dialogue = render_dialogue(turns, judge.rendering).strip()
    body = ("\n\n".join(parts) + "\n\n" + frame["input_header"] + "\n" + dialogue + "\n"
            + frame["question"].replace("{layout}", answer_layout(dimensions)))
    messages = [ChatMessage(role="user", content=body)]
    if judge.rubric == "paper":
        messages.insert(0, ChatMessage(role="system", content=data["system"]))
    elif judge.system_prompt:
        messages.insert(0, ChatMessage(role="system", content=judge.system_prompt))
    return messages
