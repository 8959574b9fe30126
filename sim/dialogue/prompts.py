"""Prompts as data: role-play strategies, the opener, the target's system prompt, judge rubrics.

The texts live in sim/data/prompts/*.yaml (verbatim from the paper and the official release);
this module only selects and fills them. Placeholders are literal `{card}`, `{example}`, `{ask}`,
filled with str.replace so that braces inside the texts are harmless.
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

from esc_eval.serve.chat import ChatMessage
from esc_eval.sim.official import official_lines
from esc_eval.sim.prompt_texts import RubricVariant, load_prompt_file as _load, rubric_ask, rubric_text, strategy_kinds

Rendering = Literal["official", "clean"]
PromptOrder = Literal["rubric_first", "dialogue_first"]


def strategies() -> list[str]:
    """Names of the role-play prompt strategies: the paper's (official, zero_shot, cot, icl,
    cot_icl) and the worst-case seekers (resistant, low_engagement, volatile)."""
    return list(_load("roleplay")["strategies"])


def worst_case_strategies() -> list[str]:
    """The strategies playing worst-case seekers (beyond the paper's five cooperative ones)."""
    return [name for name, kind in strategy_kinds().items() if kind == "worst_case"]


def _strategy(strategy: str, language: str) -> dict[str, str]:
    table = _load("roleplay")["strategies"]
    if strategy not in table:
        raise ValueError(f"unknown role-play strategy {strategy!r}; known: {', '.join(table)}")
    if language not in table[strategy]:
        raise ValueError(f"strategy {strategy!r} has no {language!r} prompt")
    return table[strategy][language]


def roleplay_system_prompt(card_text: str, language: str, strategy: str = "official", example: str | None = None) -> str:
    """The system prompt of the role model: the strategy's instructions around the card."""
    template = _strategy(strategy, language)["system"]
    if "{example}" in template:
        example = example if example is not None else _load("roleplay")["examples"][language]
        template = template.replace("{example}", example.strip())
    return template.replace("{card}", card_text)


def opener(language: str, strategy: str = "official") -> str:
    """The first line of every dialogue, spoken by the assistant side."""
    return _strategy(strategy, language)["opener"]


def target_system_prompt(language: str) -> str:
    """Default system prompt of the model under test (the release: 'You are a helpful assistant!')."""
    return _load("roleplay")["target_system"][language]


# -- judge --------------------------------------------------------------------------------------
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


def card_prompts() -> dict[str, Any]:
    """The card-construction prompts (Figures 6-8) as loaded from data/prompts/cards.yaml."""
    return _load("cards")
