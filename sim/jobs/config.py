"""Pydantic configs of simulation and scoring runs; YAML in, validated at the door."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator

from esc_eval.serve.chat import GenerationParams
from esc_eval.serve.config_base import ConfigModel, describe_validation_error, read_yaml_mapping, validate_config  # noqa: F401 - re-exported
from esc_eval.serve.plan import PlacementConfig
from esc_eval.serve.limits import ModelLimits
from esc_eval.serve.registry import TokenPrice
from esc_eval.sim.dimensions import DIMENSION_NAMES, to_dimension


class ConfigError(ValueError):
    """A config file is missing, malformed or invalid; the message names the file and field."""


class _Strict(ConfigModel):
    pass


class ModelRef(_Strict):
    """A model taking part in a run: a registry name or a backend spec, and how to call it."""

    model: str = Field("vllm/embedded", description="Registry name (e.g. 'qwen1.5-7b-chat') or spec '<backend>/<name>' (vllm/embedded, openai/gpt-4, serve/app, fake/echo).")
    params: GenerationParams = Field(default_factory=GenerationParams, description="Sampling parameters for this model's calls.")
    system_prompt: str | None = Field(None, description="System prompt override (targets: default is the release's 'You are a helpful assistant!').")
    adapter: str | None = Field(None, description="LoRA adapter name to use on every call (multi-LoRA backends).")
    options: dict[str, Any] = Field(default_factory=dict, description="Backend options, e.g. vLLM engine kwargs (max_model_len, adapters), or base_url and api ('openai' | 'vllm') for openai/.")
    limits: ModelLimits | None = Field(None, description="This model's quota for the whole run (max_concurrency, requests_per_minute, tokens_per_minute), over the registry entry's `limits` field by field; models named twice share one quota (the stricter value of each field).")
    name: str | None = Field(None, min_length=1, description="A target's name in rows, tables and dialogue ids (default: the model, plus ':<adapter>'); name two targets of one model apart, e.g. the same model with two system prompts. Unset keeps existing run folders' ids.")

    @property
    def target_name(self) -> str:
        """The name rows and dialogue ids carry: `name`, else the model (+ ':<adapter>')."""
        return self.name or self.model + (f":{self.adapter}" if self.adapter else "")


class ExecutionConfig(_Strict):
    """How a batch job runs: Ray actor pool shape, retries, checkpoints."""

    executor: Literal["ray", "local"] = Field("ray", description="'ray': a pool of Ray actors; 'local': the same job in this process (debugging, tests).")
    ray_address: str | None = Field(None, description="Join an existing Ray cluster at this address; default starts a local one.")
    workers: int = Field(1, ge=1, description="Number of worker actors (each holds its own engines).")
    concurrency: int | None = Field(
        None, ge=1, description="Dialogues (or dialogues to score) in flight per worker; None = auto: with GPU engines "
        "in the worker, what their KV cache holds at the run's expected sequence length (capped by max_num_seqs; "
        "sim/capacity.py), else the CPU defaults as measured (simulation 32, scoring 8). The manifest says what was "
        "chosen and why.")
    chunk_size: int = Field(8, ge=1, description="Work items sent to a worker per Ray call (amortises call overhead).")
    num_cpus_per_worker: float | None = Field(
        None, ge=0, description="Ray CPUs reserved per worker actor; None = auto: 1 (as measured on CPUs), 8 for "
        "workers holding GPUs (their engine loops; within the cluster's CPUs per worker).")
    num_gpus_per_worker: float = Field(0.0, ge=0, description="Ray GPUs reserved per worker actor (GPU clusters).")
    max_attempts: int = Field(3, ge=1, description="Attempts per model call before the item is recorded as failed.")
    retry_initial_wait_s: float = Field(0.5, ge=0, description="First backoff wait between attempts (exponential, jittered).")
    retry_max_wait_s: float = Field(30.0, ge=0, description="Longest backoff wait between attempts.")
    call_timeout_s: float = Field(600.0, gt=0, description="Timeout of one model call; a timeout counts as a failed attempt.")
    flush_rows: int = Field(512, ge=1, description="Write a Parquet part when this many rows are buffered (real models "
                            "mostly flush on flush_seconds; a crash loses no finished dialogue: its turn checkpoints stay "
                            "until its row is written).")
    flush_seconds: float = Field(10.0, gt=0, description="... or when this many seconds passed since the last part.")
    turn_checkpoints: bool = Field(True, description="Checkpoint every turn so a resumed run continues half-finished dialogues.")
    retry_failed: bool = Field(True, description="On resume, run again the items recorded as failed.")
    worker_start_timeout_s: float = Field(900.0, gt=0, description="Give up if a worker has not set up its models in this time.")
    placement_timeout_s: float = Field(20.0, gt=0, description="Fail (saying what is needed and what the cluster has) if the worker actors cannot be placed on the cluster in this time.")
    log_to_driver: bool = Field(True, description="Show worker logs (engines, retries) on the driver's console.")
    env: dict[str, str] = Field(default_factory=lambda: {"VLLM_CPU_KVCACHE_SPACE": "2"}, description="Environment of the worker actors (Ray runtime_env env_vars).")
    cpu_bind: Literal["auto", "per_worker"] = Field(
        "auto", description="vLLM-CPU thread binding of the workers' engines: 'auto' = vLLM's default (every engine on "
        "the first core); 'per_worker' = worker i's engine on core i (mod the cores): several CPU engines on one "
        "machine use all its cores. Ignored by GPU engines.")
    worker_writes: Literal["auto", "direct", "via_driver"] = Field(
        "auto", description="How Ray workers reach a run folder on the driver's disk (a local path; URIs such as "
        "s3:// are written by every worker directly): 'auto' = directly when the worker sees the folder (same node, "
        "or a file system shared by every node: checked with a marker file per job), else through a writer actor on "
        "the driver's node; 'direct' = require a shared file system (a worker that cannot see the folder fails); "
        "'via_driver' = always through the driver's node.")
    budget_usd: float | None = Field(
        None, gt=0, description="Spend cap of this job (one simulate or score command) on priced API models, in US dollars: "
        "a call that could pass it (its prompt estimate plus max_tokens at the model's price) is not made; the job stops "
        "feeding work, writes what finished and exits non-zero, resumable (a re-run spends up to the cap again).")
    call_cache: Literal["auto", "on", "off"] = Field(
        "auto", description="Cache deterministic calls (temperature 0 or a fixed seed), keyed by model, adapter, messages "
        "and every parameter: 'auto' = for API models (openai/, litellm/), 'on' = every model, 'off' = none.")
    cache_dir: str | None = Field(
        None, description="Where the call cache lives: a folder or a URI pyarrow reads (s3://...) that every worker can "
        "reach; None = the run folder's `cache/`. Point two runs at one folder to share answers.")
    max_failure_rate: float = Field(
        0.5, ge=0, le=1, description="The command exits non-zero (one line saying why; the rows stay for a resume) when "
        "more than this share of the job's items failed (dialogues: failed rows; scores: judge calls that failed, not "
        "answers that did not parse), or "
        "every one did.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Model dtype of the workers' in-process vLLM engines: 'auto' = bfloat16 on GPUs and on CPUs "
        "with AVX512-BF16 or AMX, float32 on other CPUs (bf16 is emulated there, 4-6x slower); a model's "
        "`options: {dtype: ...}` overrides it.")

    placement: PlacementConfig = Field(
        default_factory=PlacementConfig, description="Where the run's self-hosted models run: engines in the workers "
        "(the default on CPU) or Ray Serve deployments with their own GPUs and autoscaling (the default when the run "
        "has GPUs); planned before any engine starts (serve/plan.py, `esc-eval plan`).")

    def retry_policy(self):
        """The one retry policy (serve/retry.py) with this job's attempts, backoff and timeout."""
        from esc_eval.serve.retry import RetryPolicy

        return RetryPolicy(max_attempts=self.max_attempts, initial_wait_s=self.retry_initial_wait_s,
                           max_wait_s=self.retry_max_wait_s, timeout_s=self.call_timeout_s)


def _default_role() -> ModelRef:
    return ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=512))


class SimulationConfig(_Strict):
    """A simulation: role cards x targets x strategies x seeds, 5-round dialogues each."""

    cards: str = Field("sample", description="Card file (our JSON/YAML or the official ESC-Eval JSON), or a shipped set: 'sample' (everyday troubles) or 'safety' (risk-stratified cards for the safety rubric).")
    languages: list[Literal["en", "zh"]] | None = Field(None, description="Keep only cards in these languages.")
    card_ids: list[str] | None = Field(None, description="Keep only these card ids.")
    limit: int | None = Field(None, ge=1, description="Use at most this many cards (after filtering).")
    targets: list[ModelRef] = Field(default_factory=lambda: [ModelRef(model="vllm/embedded")], description="Models under test.")
    role: ModelRef = Field(default_factory=_default_role, description="The role-play model (ESC-Role).")
    strategies: list[str] = Field(default_factory=lambda: ["official"], description="Role-play prompt strategies: the paper's cooperative seekers (official, zero_shot, cot, icl, cot_icl) and the worst-case ones (resistant, low_engagement, volatile).")
    seeds: list[int] = Field(default_factory=lambda: [0], description="Seeds; each adds one dialogue per card, target and strategy, and reaches every sampled call (role and target). More than one needs sampling (temperature > 0 somewhere).")
    profile: Literal["release", "greedy"] = Field(
        "greedy", description="Generation defaults under the config's own params: 'greedy' = temperature 0 for every "
        "call (the paper's wording); 'release' = what the released code ran (the registry's caps, plus the model "
        "folder's generation_config.json sampling where it samples). Recorded in the manifest and the report.")
    rounds: int = Field(5, ge=1, le=50, description="Seeker/assistant rounds after the opener (the paper: 5).")
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
        from esc_eval.sim.prompts import strategies

        known = strategies()
        bad = [s for s in v if s not in known]
        if bad:
            raise ValueError(f"unknown strategy {bad[0]!r}; known: {', '.join(known)}")
        return v


class JudgeConfig(_Strict):
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

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str]) -> list[str]:
        return [to_dimension(d) for d in v]

    @property
    def judge_id(self) -> str:
        return self.name or f"{self.model.model}:{self.method}:{self.rubric}"


class ScoringConfig(_Strict):
    """A scoring job over a run folder or an official result folder."""

    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="The judge.")
    execution: ExecutionConfig = Field(default_factory=lambda: ExecutionConfig(chunk_size=4), description="Pool shape and retries (concurrency auto: 8 dialogues per worker on CPUs).")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec, overriding the registry's `price` (manifest `usage`).")


class PipelineConfig(_Strict):
    """simulate -> score -> report, as `esc-eval demo` runs it."""

    simulation: SimulationConfig = Field(default_factory=SimulationConfig, description="The simulation.")
    scoring: ScoringConfig = Field(default_factory=ScoringConfig, description="The scoring.")


T = TypeVar("T", bound=BaseModel)


def load_config(path: str | Path | None, cls: type[T], overrides: dict[str, Any] | None = None) -> T:
    """Load a YAML config into `cls`; errors name the file and the field."""
    where = str(path) if path else "config"
    data: dict[str, Any] = read_yaml_mapping(path, ConfigError) if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, key, value)
    return validate_config(cls, data, where, ConfigError)


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = data
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
