"""The judge of a scoring job (`JudgeConfig`): ESC-RANK or any chat model, the scoring method, the
rubric variant, the dialogue rendering and the dimensions."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.judging.dimensions import CONTINUITY, DIMENSION_NAMES, REPLY_TAG, to_dimension

ONE_CALL_TAG = ":one_call"  # ends the judge id of rubric_mode one_call


class JudgeConfig(ConfigModel):
    """The judge (ESC-RANK or any chat model) and how it scores."""

    model: ModelRef = Field(default_factory=lambda: ModelRef(model="vllm/embedded"), description="The judge model.")
    method: Literal["logprob", "generate"] = Field("logprob", description="'logprob': one forward pass reading P('0'..'4'); 'generate': free answer parsed by `parser` (API judges).")
    parser: Literal["strict", "compat"] = Field("strict", description="'strict': the answer must be one score 0-4; 'compat': the official rule, the first of the labels 0,1,2,3,4 (in that order) found anywhere in the answer.")
    rubric: Literal["official", "paper"] = Field("official", description="Rubric texts: the release's score.py or the paper's Figures 12-19.")
    rendering: Literal["official", "clean"] = Field("official", description="Dialogue rendering the judge reads.")
    prompt_order: Literal["rubric_first", "dialogue_first"] = Field(
        "rubric_first", description="'rubric_first': the paper's prompt; 'dialogue_first': the dialogue before the "
        "rubric, so a dialogue's seven prompts share a cached prefix (only for judges trained that way).")
    dimensions: list[str] = Field(default_factory=lambda: list(DIMENSION_NAMES), description="Dimensions to score (paper names or official keys), and 'safety': the crisis-safety rubric (sim/data/prompts/safety.yaml), reported apart from the seven.")
    adapters: dict[str, str] | None = Field(None, description="LoRA adapter per dimension (multi-LoRA judge, official layout).")
    system_prompt: str | None = Field(None, description="System message put before the rubric's messages when they have none (a registry judge's judge_system_prompt: ESC-RANK's InternLM2 meta instruction).")
    name: str | None = Field(None, description="Judge id written into score rows (default: the model string).")
    reads: Literal["dialogue", "reply"] = Field(
        "dialogue", description="'dialogue': the judge rates the whole dialogue it reads (the paper); 'reply': it rates "
        "the dialogue's last reply, read in the context before it, on the per-reply rubric (sim/data/prompts/"
        "reply_rubrics.yaml, the seven dimensions; `rubric` is then unused): `score --by-reply`. The judge id "
        "says so (`:reply`).")
    rubric_mode: Literal["per_dimension", "one_call"] = Field(
        "per_dimension", description="'per_dimension': one call per dimension, each carrying the whole dialogue (the "
        "paper's protocol); 'one_call': one call per dialogue answering every dimension as a JSON object (structured "
        "output where the backend takes a schema; sim/judging/one_call). Its rows are another judge's: the judge id "
        "ends in ':one_call'.")

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str]) -> list[str]:
        return [to_dimension(d) for d in v]

    @model_validator(mode="after")
    def _modes_agree(self) -> "JudgeConfig":
        beyond = [d for d in self.dimensions if d not in DIMENSION_NAMES]
        if self.reads == "reply" and beyond:
            raise ValueError(f"reads 'reply': no per-reply rubric for {', '.join(beyond)} (only the seven dimensions)")
        if self.reads == "reply" and self.rubric_mode == "one_call":
            raise ValueError("reads 'reply' rates one reply per dimension on the per-reply rubric: rubric_mode one_call "
                             "asks for every dimension of a whole dialogue at once; score by reply per_dimension")
        if self.rubric_mode == "one_call" and CONTINUITY in self.dimensions:
            raise ValueError("continuity reads the previous session before this one, one dimension per call: "
                             "rubric_mode one_call scores one session alone; score continuity per_dimension")
        if self.rubric_mode == "one_call" and self.adapters:
            raise ValueError("rubric_mode one_call asks one model for every dimension: a judge with one adapter per "
                             "dimension (ESC-RANK) scores per_dimension")
        if self.rubric_mode != "one_call" and (self.name or "").endswith(ONE_CALL_TAG):
            raise ValueError(f"name {self.name!r} ends in {ONE_CALL_TAG!r}, the tag of rubric_mode one_call: "
                             "set rubric_mode: one_call, or name the judge otherwise")
        return self

    @property
    def judge_id(self) -> str:
        """The id its score rows carry: the name, else model:method:rubric; ':reply' for per-reply judgments
        and ':one_call' in that mode (each is another measurement, never mixed with the per-dimension rows
        of whole dialogues)."""
        if self.reads == "reply":
            return f"{self.name}{REPLY_TAG}" if self.name else f"{self.model.model}:{self.method}{REPLY_TAG}"
        base = self.name or f"{self.model.model}:{self.method}:{self.rubric}"
        return base if self.rubric_mode != "one_call" or base.endswith(ONE_CALL_TAG) else base + ONE_CALL_TAG
