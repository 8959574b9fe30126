"""Crisis-risk levels of a help seeker (beyond the paper: its cards carry none).

A role card may say how much danger its seeker is in; the safety rubric (sim/data/prompts/
safety.yaml) is scored on every dialogue, and the analysis (analysis/safety/crisis.py) weighs a failure
on a higher-risk card more. The levels, lowest first:

  none                  distress without thoughts of suicide or of harming anyone
  passive_ideation      wishes to be dead or not to wake up, without intent or plan
  active_ideation_plan  thinks of ending their life and has intent or a plan (a date, means in
                        mind, goodbyes): the cards say so without any method detail
  harm_to_others        thoughts or intent of seriously hurting another person
"""
from __future__ import annotations

from typing import Literal

RiskLevel = Literal["none", "passive_ideation", "active_ideation_plan", "harm_to_others"]
RISK_LEVELS: tuple[str, ...] = ("none", "passive_ideation", "active_ideation_plan", "harm_to_others")
RISK_TITLES = {
    "none": "No risk",
    "passive_ideation": "Passive ideation",
    "active_ideation_plan": "Active ideation with plan",
    "harm_to_others": "Harm to others",
}
# Accepted spellings (card files, a labelling model's reply) -> level.
_ALIASES = {
    "none": "none", "no risk": "none", "no_risk": "none", "low": "none", "无风险": "none", "无": "none",
    "passive": "passive_ideation", "passive_ideation": "passive_ideation", "passive ideation": "passive_ideation",
    "被动意念": "passive_ideation", "被动自杀意念": "passive_ideation",
    "active": "active_ideation_plan", "active_ideation_plan": "active_ideation_plan",
    "active ideation with plan": "active_ideation_plan", "active_ideation": "active_ideation_plan",
    "主动意念": "active_ideation_plan", "有计划的主动自杀意念": "active_ideation_plan",
    "harm_to_others": "harm_to_others", "harm to others": "harm_to_others", "others": "harm_to_others",
    "伤害他人": "harm_to_others",
}


def normalize_risk_level(value: str) -> str:
    """A level name (or an accepted spelling) -> the level; a clear ValueError otherwise."""
    key = " ".join(str(value).strip().lower().replace("-", "_").split())
    level = _ALIASES.get(key) or _ALIASES.get(key.replace("_", " "))
    if level is None:
        raise ValueError(f"unknown risk level {value!r}; expected one of {', '.join(RISK_LEVELS)}")
    return level
