"""Pydantic configs of the jobs: a simulation, a scoring job and the demo's pipeline of both; YAML in,
validated at the door (serve/config/base.py `load_config`)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from esc_eval.serve.batches.config import BatchConfig
from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.courses.course import Memory
from esc_eval.sim.dialogue.seeker_stop import stop_instruction
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.panel import PanelConfig
from esc_eval.sim.pool.config import ExecutionConfig


PAPER_ROUNDS = 5  # the paper's rounds; longer runs let the seeker end by default (seeker_stop)


def _default_role() -> ModelRef:
    return ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=512))


class SimulationConfig(ConfigModel):
    """A simulation: role cards x targets x strategies x seeds, 5-round dialogues each."""

    cards: str = Field("sample", description="Card file (our JSON/YAML or the official ESC-Eval JSON), or a shipped set: 'sample' (everyday troubles), 'safety' (risk-stratified cards for the safety rubric), 'emerging_risk' (risk disclosed at a set round: guides/emerging-risk.md) or 'emerging_risk_sessions' (risk disclosed in a later session of a course: run with sessions >= 2).")
    languages: list[Literal["en", "zh"]] | None = Field(None, description="Keep only cards in these languages.")
    card_ids: list[str] | None = Field(None, description="Keep only these card ids.")
    limit: int | None = Field(None, ge=1, description="Use at most this many cards (after filtering).")
    targets: list[ModelRef] = Field(default_factory=lambda: [ModelRef(model="vllm/embedded")], description="Models under test.")
    role: ModelRef = Field(default_factory=_default_role, description="The role-play model (ESC-Role).")
    strategies: list[str] = Field(default_factory=lambda: ["official"], description="Role-play prompt strategies: the paper's cooperative seekers (official, zero_shot, cot, icl, cot_icl), plain (short plain words a small model can follow: the demo's) and the worst-case presets (resistant, low_engagement, volatile); any of them with seeker controls, e.g. 'zero_shot+resistance=strong+engagement=low' (controls and levels: sim/data/prompts/seeker_controls.yaml).")
    controls: dict[str, list[str]] = Field(default_factory=dict, description="Seeker controls swept over every strategy: control -> levels, e.g. {resistance: [none, mild, strong]}; each strategy runs at every combination of the levels (a strategy that sets a control itself keeps its level). Controls: engagement, resistance, expression, disclosure, volatility; the first level of each is the paper's cooperative seeker. Empty: the strategies as written.")
    seeds: list[int] = Field(default_factory=lambda: [0], description="Seeds; each adds one dialogue per card, target and strategy, and reaches every sampled call (role and target). More than one needs sampling (temperature > 0 somewhere).")
    profile: Literal["release", "greedy"] = Field(
        "greedy", description="Generation defaults under the config's own params: 'greedy' = temperature 0 for every "
        "call (the paper's wording); 'release' = what the released code ran (the registry's caps, plus the model "
        "folder's generation_config.json sampling where it samples). Recorded in the manifest and the report.")
    rounds: int = Field(PAPER_ROUNDS, ge=1, le=50, description="Seeker/assistant rounds after the opener (the paper: 5).")
    end_at_sentence: bool = Field(False, description="A reply (seeker's or target's) that reaches its max_tokens is cut back "
                                  "to its last full sentence, finish reason 'sentence' (none found: kept as cut, 'length'). "
                                  "Off in the paper's protocol; on in the demo, whose small model writes to any cap.")
    seeker_stop: bool | None = Field(None, description="The seeker may end the conversation itself: its role prompt gets "
                                     "the stop signal (<END:resolved> when helped, <END:gave_up> to leave; en and zh), and a "
                                     "dialogue ends after the seeker turn carrying one (termination_reason 'seeker_ended'; "
                                     "`end_reason` and `end_round` in the row). Unset: on for runs of more than "
                                     f"{PAPER_ROUNDS} rounds, off for {PAPER_ROUNDS} or fewer (the paper's protocol, whose "
                                     "runs and fingerprints are unchanged); true or false sets it either way.")
    sessions: int = Field(1, ge=1, le=20, description="Beyond the paper: each card run as a course of this many sessions "
                          "with the same target (sim/courses/). Between two sessions the seeker's situation moves on (the "
                          "card's `session_updates`, else an update the role model writes from the card and what was "
                          "said) and the target keeps what `memory` says. One dialogue row per session (`course_id`, "
                          "`session`), resumable per session. 1: the paper's single session.")
    memory: Memory = Field("none", description="With sessions > 1, what the target's deployment keeps of the earlier "
                           "sessions: 'none' (a bare model behind an API), 'summary' (a memory feature: the target model "
                           "itself writes notes after each session, and its system prompt carries them), 'transcripts' "
                           "(one long thread: its system prompt carries the earlier sessions in full, the oldest left out "
                           "while they do not fit its context).")
    seeker_ratings: bool = Field(False, description="The person's own view: after the dialogues, the role model, still "
                                 "as the seeker, rates each completed one as ESConv's seekers did (empathy and relevance "
                                 "1-5, its emotion intensity before and after; sim/seekerview), into the run folder's "
                                 "`seeker_ratings` rows (resumable; turning it on for a finished run rates its "
                                 "dialogues). Off in the paper's protocol; the dialogues and the fingerprint are the "
                                 "same either way.")
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig, description="Pool shape, retries and checkpoints.")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec, overriding the registry's `price` (manifest `usage`).")

    @field_validator("targets")
    @classmethod
    def _distinct_targets(cls, v: list[ModelRef]) -> list[ModelRef]:
        names = [t.target_name for t in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two targets are both named {twice[0]!r}: their dialogues would share ids; give each "
                             "its own `name` (e.g. the same model with two system prompts)")
        return v

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v: list[str]) -> list[str]:
        from esc_eval.sim.dialogue.prompts import check_strategy

        for s in v:
            check_strategy(s)  # ValueError in one line: the strategy, control or level it does not know
        return v

    @field_validator("controls")
    @classmethod
    def _controls(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        from esc_eval.sim.dialogue.seeker_controls import check_sweep

        return check_sweep(v)

    @property
    def seeker_strategies(self) -> list[str]:
        """The strategies the run plays: each of `strategies` at each combination of `controls`."""
        from esc_eval.sim.dialogue.prompts import preset_controls
        from esc_eval.sim.dialogue.seeker_controls import expand_strategies

        return expand_strategies(self.strategies, self.controls, preset_controls())

    @model_validator(mode="after")
    def _stop_signal_in_every_language(self) -> "SimulationConfig":
        if self.seeker_stop is None:  # unset: resolved here, once, so every reader sees a bool (not marked as set)
            self.__dict__["seeker_stop"] = self.rounds > PAPER_ROUNDS
        if self.seeker_stop:
            for language in self.languages or ("en", "zh"):
                stop_instruction(language)  # ValueError naming the language without one
        return self

    @field_validator("sessions")
    @classmethod
    def _session_texts(cls, v: int, info: ValidationInfo) -> int:
        if v > 1:
            from esc_eval.sim.courses.texts import check_languages

            check_languages(info.data.get("languages") or ("en", "zh"))  # ValueError naming the text a language lacks
        return v

    @field_validator("memory")
    @classmethod
    def _memory_needs_sessions(cls, v: str, info: ValidationInfo) -> str:
        if v != "none" and info.data.get("sessions", 1) == 1:
            raise ValueError(f"{v!r} keeps earlier sessions: it needs sessions > 1 (sessions is 1)")
        return v


class ScoringConfig(ConfigModel):
    """A scoring job over a run folder or an official result folder."""

    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="The judge (with `panel`: left unset).")
    panel: PanelConfig | None = Field(None, description="Several judges in one pass over the dialogues, each judge's rows "
                                      "kept apart and resumable per judge (sim/judging/panel.py); instead of `judge`.")
    execution: ExecutionConfig = Field(default_factory=lambda: ExecutionConfig(chunk_size=4), description="Pool shape and retries (concurrency auto: 8 dialogues per worker on CPUs).")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec, overriding the registry's `price` (manifest `usage`).")
    batch: BatchConfig = Field(default_factory=BatchConfig, description="Judge calls as provider batches (OpenAI's Batch API, Anthropic's Message Batches) at half the price; `score --batch` (sim/batching).")

    @model_validator(mode="after")
    def _judge_or_panel(self) -> "ScoringConfig":
        if self.panel is not None and "judge" in self.model_fields_set:
            raise ValueError("give the judges inside `panel` (panel.judges[].judge), not `judge` beside it")
        return self

    @property
    def judges(self) -> list[JudgeConfig]:
        """The judges that score: the panel's, in its order, or the one judge."""
        return [j.judge for j in self.panel.judges] if self.panel is not None else [self.judge]


class PipelineConfig(ConfigModel):
    """simulate -> score -> report, as `esc-eval demo` runs it."""

    simulation: SimulationConfig = Field(default_factory=SimulationConfig, description="The simulation.")
    scoring: ScoringConfig = Field(default_factory=ScoringConfig, description="The scoring.")
