"""The data files of the method (sim/data/): the prompt texts (data/prompts/*.yaml: role-play,
rubrics, safety, card construction, verbatim from the paper and the official release), the shipped
card sets and the taxonomy. Every module that reads them finds them here.

Layer: the bottom of sim; it imports nothing of esc_eval."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from importlib.abc import Traversable
from typing import Any

import yaml

PROMPTS = "prompts"  # data/prompts/<name>.yaml


def data_file(relative: str) -> Traversable:
    """A file under sim/data/ ('taxonomy.yaml', 'prompts/roleplay.yaml', ...), wherever the package is installed."""
    return resources.files("esc_eval.sim").joinpath("data", *relative.split("/"))


@lru_cache(maxsize=None)
def load_prompt_file(name: str) -> dict[str, Any]:
    """One prompt file (roleplay, rubrics, safety, cards) parsed."""
    text = data_file(f"{PROMPTS}/{name}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)
