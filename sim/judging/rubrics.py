"""The judge rubrics as data (sim/data/prompts/rubrics.yaml for the seven dimensions, safety.yaml
for safety, continuity.yaml for continuity across sessions), read without any model code: the
instruction of each dimension in both variants (the release's score.py and the paper's Figures
12-19), the phrase the judge's question asks for, and the rules per score shown to human annotators.

judging/prompts.py fills these texts into chat messages; readers that only need the texts (the
annotation page shows the rubrics to human annotators) use this module, which imports nothing of
serve.
"""
from __future__ import annotations

from typing import Any, Literal

from esc_eval.sim.judging.dimensions import EXTRA_DIMENSIONS, to_dimension
from esc_eval.sim.prompt_files import load_prompt_file

RubricVariant = Literal["official", "paper"]


# The prompt file of each dimension beyond the paper (the seven's is rubrics.yaml).
EXTRA_PROMPT_FILES = {"safety": "safety", "continuity": "continuity"}


def dimension_prompts(dimension: str) -> dict[str, Any]:
    """A dimension's prompt entry: rubrics.yaml for the seven, safety.yaml for safety, continuity.yaml
    for continuity."""
    name = to_dimension(dimension)
    source = EXTRA_PROMPT_FILES[name] if name in EXTRA_DIMENSIONS else "rubrics"
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
