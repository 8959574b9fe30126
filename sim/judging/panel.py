"""A panel of judges (`PanelConfig`): several judges score the same dialogues in one scoring pass,
each judge's rows kept apart under its own judge id; the panel's score per dialogue and dimension is
taken afterwards by the rule named here (analysis/panels/panel_scores.py). "Replacing Judges with
Juries" (Verga et al., 2024): a panel of smaller judges from different families can agree with people
better than one large judge, and its scores are not comparable with a single judge's."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from esc_eval.serve.config import ConfigModel
from esc_eval.sim.judging.config import JudgeConfig

PANEL_RULES = ("mean", "median", "majority", "trimmed_mean")


class PanelJudge(ConfigModel):
    """One judge of a panel, its weight and (optionally) its model family."""

    judge: JudgeConfig = Field(description="The judge: its model, method, rubric, dimensions, as a scoring job's `judge`.")
    weight: float = Field(1.0, gt=0, description="The judge's weight in the panel's rule (positive; 1 each by default).")
    family: str | None = Field(None, description="The judge model's family (base-model lineage, e.g. 'qwen') for the "
                               "self-preference audit; default: the registry entry's `family`.")


class PanelConfig(ConfigModel):
    """Several judges over the same dialogues, and the rule that makes their scores one."""

    judges: list[PanelJudge] = Field(min_length=2, description="The panel's judges (at least two, each judge id once).")
    rule: Literal["mean", "median", "majority", "trimmed_mean"] = Field(
        "mean", description="How the panel's score per dialogue and dimension is taken: 'mean' (weighted mean of the "
        "judges' expected scores, their labels where a judge gave no P(0..4)), 'median' (weighted median of the "
        "labels), 'majority' (weighted majority label), 'trimmed_mean' (without the highest and lowest judge, 3+ judges).")

    @field_validator("judges")
    @classmethod
    def _distinct(cls, v: list[PanelJudge]) -> list[PanelJudge]:
        ids = [j.judge.judge_id for j in v]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"the panel names judge {twice[0]!r} twice: each judge's rows are kept under its id, so "
                             "each judge may be in it once (give two configs of one model different `name`s)")
        return v
