"""The pairwise judging job's config (`PairwiseConfig`): the judge, the pairs plan, the dimensions,
the pool's shape and prices; and `pairwise_config`, the config from `esc-eval pairwise`'s options."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, to_paper_dimension
from esc_eval.sim.pool.config import ExecutionConfig

PLANS = ("all", "round_robin", "reference")
PlanName = Literal["all", "round_robin", "reference"]


class PairwiseConfig(ConfigModel):
    """A pairwise judging job over a run folder: which targets meet on which cards, judged by whom."""

    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="The judge: its model, method (logprob: P(first, second, tie) in one pass; generate: the answer parsed strictly), rendering and system prompt; its `rubric`, `prompt_order`, `adapters` and `dimensions` are not used here.")
    plan: PlanName = Field("all", description="Which pairs meet on each card: 'all' (every pair of the targets present), 'round_robin' (one circle-method round per card: each target meets one other; every pair equally often across cards), 'reference' (every target against `reference`).")
    reference: str | None = Field(None, description="The reference target model (its target_model in the run) of plan 'reference'.")
    dimensions: list[str] = Field(default_factory=lambda: list(DIMENSION_NAMES), description="Dimensions compared (paper names or official keys; default the seven).")
    execution: ExecutionConfig = Field(default_factory=lambda: ExecutionConfig(chunk_size=4), description="Pool shape and retries (concurrency auto: 8 pairs per worker on CPUs).")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec, overriding the registry's `price` (manifest `usage`).")

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str]) -> list[str]:
        dims = [to_paper_dimension(d) for d in v]  # the seven only: pairwise.yaml describes those
        if not dims:
            raise ValueError("no dimension to compare")
        return list(dict.fromkeys(dims))

    @model_validator(mode="after")
    def _reference(self) -> "PairwiseConfig":
        if self.plan == "reference" and not self.reference:
            raise ValueError("plan 'reference' needs a reference model (--reference)")
        if self.reference and self.plan != "reference":
            raise ValueError(f"a reference model is only used by plan 'reference' (the plan is {self.plan!r})")
        return self

    @property
    def judge_id(self) -> str:
        """The judge id written into the rows: the judge's name, else '<model>:pairwise:<method>'."""
        return self.judge.name or f"{self.judge.model.model}:pairwise:{self.judge.method}"


def pairwise_config(config: Path | None = None, judge: str | None = None, plan: str | None = None,
                    reference: str | None = None, dimensions: str | None = None, method: str | None = None,
                    address: str | None = None) -> PairwiseConfig:
    """The config: `config` (YAML, or the defaults) with each option given set over it; `dimensions`
    comma-separated. A bad plan or dimension is one line (ConfigError)."""
    from esc_eval.serve.config import load_config

    dims = [d.strip() for d in dimensions.split(",") if d.strip()] if dimensions else None
    o: dict[str, Any] = {"judge.model.model": judge, "judge.method": method, "plan": plan, "reference": reference,
                         "dimensions": dims, "execution.ray_address": address}
    return load_config(config, PairwiseConfig, o)
