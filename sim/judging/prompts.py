"""The judge's prompts: the dialogue as the judge reads it and the chat messages asking for one
dimension's 0-4 score, filled from the rubric texts (judging/rubrics.py) with str.replace, so that
braces inside the texts are harmless (`{ask}`); and the per-reply prompt (`reply_messages`: one reply
rated in the context before it, sim/data/prompts/reply_rubrics.yaml; this project's, not the paper's).
"""
from __future__ import annotations

from typing import Literal, Sequence

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.dialogue.transcript import official_lines
from esc_eval.sim.judging.dimensions import to_dimension
from esc_eval.sim.judging.rubrics import RubricVariant, rubric_ask, rubric_text
from esc_eval.sim.prompt_files import load_prompt_file as _load

Rendering = Literal["official", "clean"]
PromptOrder = Literal["rubric_first", "dialogue_first"]


def render_dialogue(turns: Sequence[tuple[str, str]], rendering: Rendering = "official") -> str:
    """The dialogue text a judge reads.

    official: exactly the release's score.py: lines joined by blank lines, then
      .replace("AI assistant", "**AI助手**").replace("ESC-Role：", "**用户**") — which also rewrites
      "AI assistant" inside the text, and drops the seeker's colon; a published judge saw this.
    clean: "User: ..." / "AI assistant: ..." lines, one per turn, nothing rewritten.
    """
    if rendering == "official":
        joined = "\n\n".join(official_lines(turns))
        return joined.replace("AI assistant", "**AI助手**").replace("ESC-Role：", "**用户**")
    if rendering == "clean":
        return "\n".join(("AI assistant: " if s == "assistant" else "User: ") + t.strip() for s, t in turns)
    raise ValueError(f"unknown dialogue rendering {rendering!r} (official | clean)")


def judge_messages(
    dimension: str,
    turns: Sequence[tuple[str, str]],
    language: str,
    rubric: RubricVariant = "official",
    rendering: Rendering = "official",
    order: PromptOrder = "rubric_first",
) -> list[ChatMessage]:
    """The chat messages asking a judge for one dimension's 0-4 score.

    rubric="official" reproduces score.py: one user message (no system message; the model's
    template default applies), rubric + 'Dialogue between user and AI assistant: \\n' + dialogue
    + '\\n' + 'Based on the rules, give your <ask> score (The number only) to the Dialogue.'
    rubric="paper" follows Figures 12-19: system 'You are a helpful assistant!', the figure's
    instruction, the input header, the dialogue and the figure's question.
    order="dialogue_first" (not in the paper; for judges trained with it) puts the dialogue before
    the rubric, so the seven prompts of a dialogue share their longest part as a prefix and an
    engine with prefix caching computes it once; the texts are the same, only their order moves.
    """
    if order not in ("rubric_first", "dialogue_first"):
        raise ValueError(f"unknown prompt order {order!r} (rubric_first | dialogue_first)")
    data = _load("rubrics")  # the frame (system, header, question) is shared by every dimension, safety too
    dialogue = render_dialogue(turns, rendering)
    if rubric == "official":
        question = data["question"].replace("{ask}", rubric_ask(dimension, "official"))
        rules = rubric_text(dimension, language, "official")
        if order == "dialogue_first":
            body = "Dialogue between user and AI assistant: \n" + dialogue.strip() + "\n\n" + rules + question
        else:
            body = rules + "Dialogue between user and AI assistant: \n" + dialogue.strip() + "\n" + question
        return [ChatMessage(role="user", content=body)]
    question = data["question"].replace("{ask}", rubric_ask(dimension, "paper"))
    rules = rubric_text(dimension, language, "paper").rstrip()
    if order == "dialogue_first":
        body = data["input_header"] + "\n" + dialogue.strip() + "\n\n" + rules + "\n" + question
    else:
        body = rules + "\n" + data["input_header"] + "\n" + dialogue.strip() + "\n" + question
    return [ChatMessage(role="system", content=data["system"]), ChatMessage(role="user", content=body)]


REPLY_RUBRICS = "reply_rubrics"  # sim/data/prompts/reply_rubrics.yaml


def reply_rubric_text(dimension: str, language: str) -> str:
    """The per-reply rubric of one of the seven dimensions (en, or zh for Chinese dialogues)."""
    dims = _load(REPLY_RUBRICS)["dimensions"]
    name = to_dimension(dimension)
    if name not in dims:
        raise ValueError(f"dimension {name!r} has no per-reply rubric (the seven of the paper have: "
                         f"{', '.join(dims)}); score it on whole dialogues")
    return dims[name]["rubric"][_lang(language)]


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def reply_messages(dimension: str, context: Sequence[tuple[str, str]], reply: str, language: str,
                   rendering: Rendering = "official", order: PromptOrder = "rubric_first") -> list[ChatMessage]:
    """The chat messages asking a judge for one dimension's 0-4 score of ONE reply, read in the
    context of the dialogue before it (reply_rubrics.yaml; the paper's frame: a system message and
    one user turn). The context is rendered as `render_dialogue` renders a dialogue; the reply as it is."""
    if order not in ("rubric_first", "dialogue_first"):
        raise ValueError(f"unknown prompt order {order!r} (rubric_first | dialogue_first)")
    data, lang = _load(REPLY_RUBRICS), _lang(language)
    rules = reply_rubric_text(dimension, language).rstrip()
    ask = data["dimensions"][to_dimension(dimension)]["ask"][lang]
    question = data["question"][lang].replace("{ask}", ask)
    shown = (data["context_header"][lang] + "\n" + render_dialogue(context, rendering).strip() + "\n\n"
             + data["reply_header"][lang] + "\n" + reply.strip())
    body = (shown + "\n\n" + rules + "\n" + question if order == "dialogue_first"
            else rules + "\n" + shown + "\n" + question)
    return [ChatMessage(role="system", content=data["system"]), ChatMessage(role="user", content=body)]

