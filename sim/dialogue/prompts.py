"""The role-play prompts as data: the strategies of the seeker (the paper's five cooperative ones
and the worst-case seekers beyond it), the role model's system prompt around a card, the opener,
the target's default system prompt.

The texts live in sim/data/prompts/roleplay.yaml (verbatim from the paper and the official
release); this module only selects and fills them. Placeholders are literal `{card}` and
`{example}`, filled with str.replace so that braces inside the texts are harmless.
"""
from __future__ import annotations

from typing import Literal

from esc_eval.sim.dialogue.seeker_controls import SEP, SeekerControlError, control_text, is_hard, split_strategy
from esc_eval.sim.dialogue.seeker_stop import stop_instruction
from esc_eval.sim.prompt_files import load_prompt_file as _load

def strategies() -> list[str]:
    """Names of the role-play prompt strategies: the paper's (official, zero_shot, cot, icl,
    cot_icl), plain, and the presets of worst-case seekers (resistant, low_engagement, volatile).
    Any of them with seeker controls (`zero_shot+resistance=strong`, sim/dialogue/seeker_controls.py)
    is a strategy too: check_strategy accepts it."""
    data = _load("roleplay")
    return [*data["strategies"], *(data.get("presets") or {})]


def worst_case_strategies() -> list[str]:
    """The named strategies playing worst-case seekers (the presets: one control at its hardest)."""
    return [name for name, kind in strategy_kinds().items() if kind == "worst_case"]


def resolve_strategy(spec: str) -> tuple[str, dict[str, str]]:
    """A strategy as its base prompt and its seeker controls (a preset expanded; a control the preset
    sets again is refused). ValueError in one line for an unknown strategy, control or level."""
    data = _load("roleplay")
    presets = data.get("presets") or {}
    name, chosen = split_strategy(spec)
    if name in presets:
        base, preset = split_strategy(presets[name])
        twice = sorted(set(preset) & set(chosen))
        if twice:
            raise SeekerControlError(f"strategy {spec!r}: {name} already sets the seeker control {twice[0]!r}")
        name, chosen = base, {**preset, **chosen}
    if name not in data["strategies"]:
        raise ValueError(f"unknown strategy {spec.split(SEP)[0]!r}; known: {', '.join(strategies())}")
    return name, chosen


def preset_controls() -> dict[str, dict[str, str]]:
    """Each preset (resistant, ...) -> the seeker controls it sets."""
    return {name: split_strategy(spec)[1] for name, spec in (_load("roleplay").get("presets") or {}).items()}


def check_strategy(spec: str) -> str:
    """The strategy as given when it resolves (else ValueError in one line)."""
    resolve_strategy(spec)
    return spec


def _strategy(strategy: str, language: str) -> tuple[dict[str, str], dict[str, str]]:
    base, chosen = resolve_strategy(strategy)
    table = _load("roleplay")["strategies"][base]
    if language not in table:
        raise ValueError(f"strategy {strategy!r} has no {language!r} prompt")
    return table[language], chosen


def roleplay_system_prompt(card_text: str, language: str, strategy: str = "official", example: str | None = None,
                           seeker_stop: bool = False) -> str:
    """The system prompt of the role model: the strategy's instructions around the card; its seeker
    controls' sentences after them (sim/dialogue/seeker_controls.py); with seeker_stop, the stop
    signal's instruction last (sim/dialogue/seeker_stop.py)."""
    texts, chosen = _strategy(strategy, language)
    template = texts["system"]
    if "{example}" in template:
        example = example if example is not None else _load("roleplay")["examples"][language]
        template = template.replace("{example}", example.strip())
    prompt = template.replace("{card}", card_text)
    behaviour = control_text(chosen, language)
    if behaviour:
        prompt = f"{prompt.rstrip()}\n{behaviour}"
    if seeker_stop:
        prompt = f"{prompt.rstrip()}\n{stop_instruction(language)}"
    return prompt


def opener(language: str, strategy: str = "official") -> str:
    """The first line of every dialogue, spoken by the assistant side (the base strategy's)."""
    return _strategy(strategy, language)[0]["opener"]


def target_system_prompt(language: str) -> str:
    """Default system prompt of the model under test (the release: 'You are a helpful assistant!')."""
    return _load("roleplay")["target_system"][language]


StrategyKind = Literal["cooperative", "worst_case"]


def strategy_kind(spec: str) -> StrategyKind | None:
    """cooperative (every seeker control at its first level: the paper's seekers) or worst_case (a
    control past it); None for a strategy this version does not know."""
    try:
        _, chosen = resolve_strategy(spec)
    except ValueError:
        return None
    return "worst_case" if is_hard(chosen) else "cooperative"


def strategy_kinds() -> dict[str, StrategyKind]:
    """Every named strategy -> its kind (strategy_kind)."""
    return {name: strategy_kind(name) for name in strategies()}
