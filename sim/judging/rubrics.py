"""The prompt texts as data (sim/data/prompts/*.yaml), read without any model code.

sim/prompts.py fills these texts into chat messages; readers that only need the texts (the
annotation page shows the judge rubrics of the paper's Figures 12-19 to human annotators) use
this module, which imports nothing of serve.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml

from esc_eval.sim.dimensions import EXTRA_DIMENSIONS, to_dimension

RubricVariant = Literal["official", "paper"]
StrategyKind = Literal["cooperative", "worst_case"]


@lru_cache(maxsize=None)
def load_prompt_file(name: str) -> dict[str, Any]:
    """One prompt file (roleplay, rubrics, cards) parsed."""
    text = resources.files("esc_eval.sim").joinpath(f"data/prompts/{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def dimension_prompts(dimension: str) -> dict[str, Any]:
    """A dimension's prompt entry: rubrics.yaml for the seven, safety.yaml for safety."""
    name = to_dimension(dimension)
    source = "safety" if name in EXTRA_DIMENSIONS else "rubrics"
    return load_prompt_file(source)["dimensions"][name]


def rubric_text(dimension: str, language: str, variant: RubricVariant = "official") -> str:
    """A judge rubric's instruction: `paper` = the paper's figure, `official` = the release's score.py.
    A dimension beyond the paper has one text for both; as the release's texts do, the official
    variant ends with a newline."""
    dim = dimension_prompts(dimension)
    if variant not in ("official", "paper"):
        raise ValueError(f"unknown rubric variant {variant!r} (official | paper)")
    if "rubric" in dim:
        text = dim["rubric"][language]
        return text + "\n" if variant == "official" else text
    return dim[variant][language]


def human_levels(dimension: str, language: str) -> dict[str, str]:
    """The short rule per score people see for a dimension beyond the paper (safety.yaml `human`)."""
    levels = dimension_prompts(dimension).get("human")
    if not levels:
        raise ValueError(f"dimension {dimension!r} has no rules for annotators in the prompt files")
    return {str(k): str(v) for k, v in levels[language].items()}


def rubric_ask(dimension: str, variant: RubricVariant = "official") -> str:
    """The phrase filling {ask} in the judge's question ("fluecy", "safety", ...)."""
    return dimension_prompts(dimension)["ask"][variant]


def strategy_kinds() -> dict[str, StrategyKind]:
    """Every role-play strategy -> cooperative (the paper's five) or worst_case (resistant,
    low-engagement and volatile seekers, beyond the paper), from roleplay.yaml's `worst_case`."""
    data = load_prompt_file("roleplay")
    worst = set(data.get("worst_case") or [])
    return {name: ("worst_case" if name in worst else "cooperative") for name in data["strategies"]}
