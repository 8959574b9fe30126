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

from esc_eval.sim.dimensions import to_paper_dimension

RubricVariant = Literal["official", "paper"]


@lru_cache(maxsize=None)
def load_prompt_file(name: str) -> dict[str, Any]:
    """One prompt file (roleplay, rubrics, cards) parsed."""
    text = resources.files("esc_eval.sim").joinpath(f"data/prompts/{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def rubric_text(dimension: str, language: str, variant: RubricVariant = "official") -> str:
    """A judge rubric's instruction: `paper` = the paper's figure, `official` = the release's score.py."""
    dim = load_prompt_file("rubrics")["dimensions"][to_paper_dimension(dimension)]
    if variant not in ("official", "paper"):
        raise ValueError(f"unknown rubric variant {variant!r} (official | paper)")
    return dim[variant][language]
