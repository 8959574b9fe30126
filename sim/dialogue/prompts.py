"""The role-play prompts as data: the strategies of the seeker (the paper's five cooperative ones
and the worst-case seekers beyond it), the role model's system prompt around a card, the opener,
the target's default system prompt.

The texts live in sim/data/prompts/roleplay.yaml (verbatim from the paper and the official
release); this module only selects and fills them. Placeholders are literal `{card}` and
`{example}`, filled with str.replace so that braces inside the texts are harmless.
"""
from __future__ import annotations

from typing import Literal

from esc_eval.sim.dialogue.seeker_stop import stop_instruction
from esc_eval.sim.prompt_files import load_prompt_file as _load

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


def roleplay_system_prompt(card_text: str, language: str, strategy: str = "official", example: str | None = None,
                           seeker_stop: bool = False) -> str:
    """The system prompt of the role model: the strategy's instructions around the card; with
    seeker_stop, the stop signal's instruction after them (sim/dialogue/seeker_stop.py)."""
    template = _strategy(strategy, language)["system"]
    if "{example}" in template:
        example = example if example is not None else _load("roleplay")["examples"][language]
        template = template.replace("{example}", example.strip())
    prompt = template.replace("{card}", card_text)
    if seeker_stop:
        prompt = f"{prompt.rstrip()}\n{stop_instruction(language)}"
    return prompt


def opener(language: str, strategy: str = "official") -> str:
    """The first line of every dialogue, spoken by the assistant side."""
    return _strategy(strategy, language)["opener"]


def target_system_prompt(language: str) -> str:
    """Default system prompt of the model under test (the release: 'You are a helpful assistant!')."""
    return _load("roleplay")["target_system"][language]


StrategyKind = Literal["cooperative", "worst_case"]


def strategy_kinds() -> dict[str, StrategyKind]:
    """Every role-play strategy -> cooperative (the paper's five) or worst_case (resistant,
    low-engagement and volatile seekers, beyond the paper), from roleplay.yaml's `worst_case`."""
    data = _load("roleplay")
    worst = set(data.get("worst_case") or [])
    return {name: ("worst_case" if name in worst else "cooperative") for name in data["strategies"]}
