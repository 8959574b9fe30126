"""Seekers who are hard to help, as controls with levels (sim/data/prompts/seeker_controls.yaml):
engagement, resistance, expression, disclosure and volatility, each from the paper's cooperative
seeker (its first level) to the hardest.

A strategy with controls is one string, `<strategy>+<control>=<level>[+...]`, so that it is a
strategy everywhere a strategy goes (the dialogue id, the rows' `strategy` column, the report's
groupings) with no new column: `zero_shot+resistance=strong+engagement=low`. Its canonical form
lists the controls in the file's order and leaves out first levels, so `official+resistance=none`
is `official`, and two spellings of one seeker are one strategy (one dialogue id).

A run sweeps levels with `controls: {resistance: [none, strong]}`: every strategy of the run with
every combination of the levels (`expand_strategies`).

Layer: dialogue; it reads the shipped data only.
"""
from __future__ import annotations

import itertools
from typing import Iterable

from esc_eval.sim.prompt_files import load_prompt_file

SEP, EQ = "+", "="


class SeekerControlError(ValueError):
    """A control or level the file does not have, or a control set twice."""


def _table() -> dict:
    return load_prompt_file("seeker_controls")["controls"]


def controls() -> dict[str, list[str]]:
    """Every control -> its levels, the cooperative (neutral) level first."""
    return {name: list(c["levels"]) for name, c in _table().items()}


def neutral_level(control: str) -> str:
    return controls()[check_level(control, None)][0]


def check_level(control: str, level: str | None) -> str:
    """The control's name when it exists and, given a level, has it; else SeekerControlError in one line."""
    table = controls()
    if control not in table:
        raise SeekerControlError(f"unknown seeker control {control!r}; controls: {', '.join(table)}")
    if level is not None and level not in table[control]:
        raise SeekerControlError(f"seeker control {control!r} has no level {level!r}; its levels: "
                                 f"{', '.join(table[control])}")
    return control


def split_strategy(spec: str) -> tuple[str, dict[str, str]]:
    """`zero_shot+resistance=strong` -> ('zero_shot', {'resistance': 'strong'}): the strategy and the
    controls written after it (levels as written, first levels included), each checked."""
    base, *parts = spec.split(SEP)
    chosen: dict[str, str] = {}
    for part in parts:
        control, eq, level = part.partition(EQ)
        if not eq or not control or not level:
            raise SeekerControlError(f"strategy {spec!r}: {part!r} is not control=level "
                                     f"(e.g. {base}+resistance=strong)")
        check_level(control, level)
        if control in chosen:
            raise SeekerControlError(f"strategy {spec!r} sets the seeker control {control!r} twice")
        chosen[control] = level
    return base, chosen


def join_strategy(base: str, chosen: dict[str, str]) -> str:
    """The canonical spelling: controls in the file's order, first levels left out."""
    table = controls()
    for control, level in chosen.items():
        check_level(control, level)
    parts = [f"{c}{EQ}{chosen[c]}" for c in table if c in chosen and chosen[c] != table[c][0]]
    return SEP.join([base, *parts])


def strategy_levels(chosen: dict[str, str]) -> dict[str, str]:
    """Every control's level, the first level where `chosen` has none."""
    return {c: chosen.get(c, levels[0]) for c, levels in controls().items()}


def is_hard(chosen: dict[str, str]) -> bool:
    """Whether any control is past its cooperative level (a worst-case seeker)."""
    return any(level != neutral_level(c) for c, level in chosen.items())


def control_text(chosen: dict[str, str], language: str) -> str | None:
    """The sentences the controls add to the role model's system prompt, after the file's lead
    line; None when every control is at its first level."""
    data = load_prompt_file("seeker_controls")
    sentences = []
    for control, c in data["controls"].items():
        level = chosen.get(control)
        if level is None or c["levels"][level] is None:
            continue
        text = c["levels"][level]
        if language not in text:
            raise SeekerControlError(f"seeker control {control}={level} has no {language!r} text")
        sentences.append(text[language].strip())
    if not sentences:
        return None
    sep = "" if language == "zh" else " "
    return f"{data['lead'][language]}{sep}{sep.join(sentences)}"


def parse_sweep(items: Iterable[str]) -> dict[str, list[str]]:
    """`resistance=none,strong` (the CLI's --control, repeatable) -> {'resistance': ['none', 'strong']}."""
    sweep: dict[str, list[str]] = {}
    for item in items:
        control, eq, levels = item.partition(EQ)
        if not eq or not levels:
            raise SeekerControlError(f"--control {item!r}: expected control=level[,level...] "
                                     f"(e.g. resistance=none,strong); controls: {', '.join(controls())}")
        sweep.setdefault(control, []).extend(x.strip() for x in levels.split(",") if x.strip())
    return check_sweep(sweep)


def check_sweep(sweep: dict[str, list[str]]) -> dict[str, list[str]]:
    for control, levels in sweep.items():
        if not levels:
            raise SeekerControlError(f"seeker control {control!r}: no level given")
        for level in levels:
            check_level(control, level)
        if len(set(levels)) < len(levels):
            raise SeekerControlError(f"seeker control {control!r} lists a level twice: {', '.join(levels)}")
    return sweep


def expand_strategies(strategies: list[str], sweep: dict[str, list[str]],
                      presets: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Each strategy with each combination of the sweep's levels (a control the strategy already
    sets, itself or through its preset in `presets`, keeps its own level), canonical and without
    repeats, in order."""
    out: list[str] = []
    names = list(sweep)
    for spec in strategies:
        base, chosen = split_strategy(spec)
        fixed = {**(presets or {}).get(base, {}), **chosen}
        for combo in itertools.product(*(sweep[n] for n in names)) if names else [()]:
            swept = {n: level for n, level in zip(names, combo) if n not in fixed}
            name = join_strategy(base, {**swept, **chosen})
            if name not in out:
                out.append(name)
    return out
