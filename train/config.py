"""Training configs: pydantic models (a description on every field), loaded from YAML and
validated at the door; errors name the bad field (e.g. "train.deepspeed_stage: ...").

    role job: {task: role, train: TrainConfig, data: RoleDataConfig}
    rank job: {task: rank, train: TrainConfig, data: RankDataConfig, evaluation: EvalConfig}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from esc_eval.serve.config import ConfigModel, load_config_file
from esc_eval.serve.engines.embedded import EMBEDDED

from esc_eval.train.errors import TrainConfigError

# Defaults the datasets and the judge evaluation share with this config (train/data, train/jobs read these):
SOURCE_KIND = "auto"  # a dialogue file's format is detected unless named
OFFICIAL_ANNOTATOR = "official"  # the annotator name of the release's score files
SPLIT_GROUP = "annotation"  # split unit: each (dialogue, dimension) label, as the paper's 7:1:2 split
OVERFLOW = "shorten"  # a prompt over max_seq_len loses dialogue turns rather than its example
JUDGE_METHOD = "logprob"  # a judge's score: argmax of P('0'..'4') at the answer, as esc-eval's judges score
JUDGE_MAX_CONCURRENCY = 16  # judge requests in flight: a vLLM engine's batch fills
ROLEPLAY_STRATEGY = "official"  # the role model learns the paper's role-play prompt (sim.dialogue.prompts)


class _Strict(ConfigModel):
    pass


class LoraSettings(_Strict):
    """LoRA adapter shape (PEFT LoraConfig)."""

    r: int = Field(16, ge=1, le=256, description="LoRA rank (vLLM serves it with max_lora_rank >= r).")
    alpha: int = Field(32, ge=1, description="LoRA alpha (scaling = alpha / r).")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="Dropout on the LoRA input.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1, description="Names of the linear modules that get LoRA (Llama/Qwen/InternLM naming).",
    )


class TrainConfig(_Strict):
    """The model, LoRA, optimisation, Ray Train and DeepSpeed settings of one training job."""

    model: str = Field(EMBEDDED, description="Base model: a local safetensors folder, or 'embedded' for the "
                       "converted SmolLM2-135M-Instruct (serve.engines.embedded.embedded_model_path()).")
    lora: LoraSettings = Field(default_factory=LoraSettings, description="LoRA adapter settings.")
    learning_rate: float = Field(2e-4, gt=0.0, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    warmup_steps: int = Field(0, ge=0, description="0: constant learning rate; N > 0: linear warm-up over N optimizer steps, then linear decay to 0.")
    max_steps: int | None = Field(None, ge=1, description="Optimizer steps to train; overrides epochs when set.")
    epochs: float = Field(1.0, gt=0.0, description="Passes over the training split (when max_steps is unset).")
    micro_batch_size: int = Field(1, ge=1, description="Examples per worker per forward pass.")
    gradient_accumulation_steps: int = Field(1, ge=1, description="Micro batches per optimizer step.")
    max_seq_len: int = Field(1024, ge=16, description="Token limit per example (longer chats are cut at turns).")
    gradient_clipping: float = Field(1.0, ge=0.0, description="Gradient norm clipping (0 = off).")
    num_workers: int = Field(2, ge=1, description="Ray Train workers (data-parallel ranks).")
    cpus_per_worker: float = Field(1.0, gt=0.0, description="CPUs Ray reserves per worker.")
    use_gpu: bool = Field(False, description="Train on GPUs (NCCL backend); False = CPU with gloo.")
    gpus_per_worker: float = Field(1.0, gt=0.0, description="GPUs per worker when use_gpu is true.")
    deepspeed_stage: Literal[2, 3] = Field(2, description="DeepSpeed ZeRO stage: 2 or 3.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="Training precision; 'auto' = bf16 on GPUs and on CPUs with AVX512-BF16 or AMX, fp32 on "
        "other CPUs (bf16 is emulated there and slower); fp16 needs GPUs.")
    output_dir: Path = Field(Path("runs/train"), description="Where adapters, Ray checkpoints and metrics go.")
    resume: bool = Field(False, description="Continue from the last Ray Train checkpoint of the same output_dir "
                         "and adapter name; False starts over (old checkpoints of that name are removed).")
    checkpoint_every: int = Field(50, ge=1, description="Save a Ray Train checkpoint every N optimizer steps "
                                  "(and always at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints Ray Train keeps (CheckpointConfig.num_to_keep).")
    eval_every: int | None = Field(None, ge=1, description="Validation loss every N steps (None: only at the end).")
    seed: int = Field(0, description="Seed for data order, LoRA init and the splits.")
    ray_address: str | None = Field(None, description="Ray cluster to join (None: start a local Ray).")
    cpu_optimizer: Literal["torch_adam", "deepspeed_cpu_adam"] = Field(
        "torch_adam", description="CPU optimizer: torch AdamW (no JIT build) or DeepSpeed's CPUAdam (compiles an op).")
    torch_extensions_dir: Path | None = Field(
        None, description="TORCH_EXTENSIONS_DIR for DeepSpeed's JIT ops (default ~/.cache/esc-eval/torch_extensions).")

    @model_validator(mode="after")
    def _check(self) -> "TrainConfig":
        if self.precision == "fp16" and not self.use_gpu:
            raise ValueError("precision: fp16 needs GPUs (use bf16 or fp32 on CPU)")
        return self

    @property
    def resolved_precision(self) -> Literal["fp32", "bf16", "fp16"]:
        """`precision` with 'auto' decided by this machine's CPU (serve/devices/cpu.py) or the GPU."""
        if self.precision != "auto":
            return self.precision
        if self.use_gpu:
            return "bf16"
        from esc_eval.serve.devices.cpu import best_dtype

        return "bf16" if best_dtype() == "bfloat16" else "fp32"

    def resolved_model_path(self) -> Path:
        """The base model folder ('embedded' -> the converted SmolLM2 folder)."""
        if self.model == EMBEDDED:
            from esc_eval.serve.engines.embedded import embedded_model_path

            return Path(embedded_model_path())
        path = Path(self.model).expanduser()
        if not (path / "config.json").exists():
            raise TrainConfigError(f"train.model: {path} is not a model folder (no config.json)")
        return path


class DialogueSourceConfig(_Strict):
    """One dialogue source (see train.data.dialogue_sources)."""

    path: Path = Field(description="Run folder, official dialogue JSON or ESConv JSON.")
    kind: Literal["auto", "run", "official", "esconv"] = Field(SOURCE_KIND, description="Source format; auto detects it.")
    cards: Path | None = Field(None, description="Cards file giving the card text (joined by card id for run "
                               "folders, by position for official/ESConv files).")
    language: Literal["en", "zh"] | None = Field(None, description="Language override (default: from the source).")


class RoleDataConfig(_Strict):
    """Data of the ESC-Role job."""

    sources: list[DialogueSourceConfig] = Field(min_length=1, description="Dialogue sources to train on.")
    strategy: str = Field(ROLEPLAY_STRATEGY, description="Role-play prompt strategy (sim.dialogue.prompts.strategies()).")
    validation_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="Dialogues held out for validation loss.")
    adapter_name: str = Field("esc-role", description="Name of the produced adapter.")


class AnnotationSourceConfig(_Strict):
    """One annotation table."""

    path: Path = Field(description="CSV/Parquet/JSON/JSONL table (train.data.annotations) or an official score JSON.")
    format: Literal["table", "official_scores"] = Field("table", description="Table rows or the release's score JSON.")
    annotator: str = Field(OFFICIAL_ANNOTATOR, description="Annotator name for official score files.")


class SplitConfig(_Strict):
    """How annotations are split (paper: 7:1:2 at random)."""

    seed: int = Field(0, description="Split seed.")
    ratios: tuple[float, float, float] = Field((7, 1, 2), description="train:validation:test proportions.")
    group: Literal["annotation", "dialogue"] = Field(SPLIT_GROUP, description="Split unit: (dialogue, dimension) "
                                                      "or whole dialogues.")
    holdout_model: str | None = Field(None, description="Leave-one-model-out: this target model is the test split.")


class RankDataConfig(_Strict):
    """Data of the ESC-RANK job."""

    dialogues: list[DialogueSourceConfig] = Field(min_length=1, description="Dialogue sources the annotations refer to.")
    annotations: list[AnnotationSourceConfig] = Field(min_length=1, description="Annotation tables.")
    aggregate: Literal["median", "each"] = Field("median", description="One label per (dialogue, dimension) = low "
                                                 "median of annotators, or every annotator's row as an example.")
    split: SplitConfig = Field(default_factory=SplitConfig, description="Train/validation/test split.")
    layout: Literal["per_dimension", "multitask"] = Field(
        "per_dimension", description="One adapter per dimension and language (official names: fluency, "
        "diversity, ..., '_en' for English) or one multi-task adapter.")
    adapter_name: str = Field("esc-rank", description="Registry name; also the adapter name of the multitask layout.")
    dimensions: list[str] | None = Field(None, description="Train only these dimensions (paper names or official keys).")
    rubric: Literal["official", "paper"] = Field("official", description="Judge rubric variant (sim.judging.rubrics).")
    rendering: Literal["official", "clean"] = Field("official", description="Dialogue rendering in the judge prompt.")
    prompt_order: Literal["rubric_first", "dialogue_first"] = Field(
        "rubric_first", description="Judge prompt order: the paper's, or the dialogue first so that scoring shares "
        "a cached prefix across dimensions (serve the result with judge prompt_order=dialogue_first).")
    overflow: Literal["shorten", "drop", "error"] = Field(OVERFLOW, description="Prompt longer than max_seq_len: "
                                                          "trim the dialogue turns, drop the example, or fail.")

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        from esc_eval.sim.judging.dimensions import to_paper_dimension

        return [to_paper_dimension(d) for d in v]


class EvalConfig(_Strict):
    """Judge evaluation on the test split (Table 4: ACC and ACC_soft)."""

    enabled: bool = Field(True, description="Score the test split with the base and the trained judge after training.")
    method: Literal["logprob", "generate"] = Field(JUDGE_METHOD, description="logprob: argmax of P('0'..'4') at the "
                                                   "answer position; generate: greedy text + strict parse.")
    include_base: bool = Field(True, description="Also score with the base model (no adapter).")
    max_model_len: int = Field(4096, ge=256, description="vLLM max_model_len for scoring.")
    max_concurrency: int = Field(JUDGE_MAX_CONCURRENCY, ge=1, description="Judge requests in flight.")
    engine_kwargs: dict[str, Any] = Field(default_factory=lambda: {"enforce_eager": True},
                                          description="Extra vLLM engine arguments.")


class RoleJobConfig(_Strict):
    """`esc-eval train role --config FILE`."""

    task: Literal["role"] = Field("role", description="Job kind.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="Model and training settings.")
    data: RoleDataConfig = Field(description="Role-play data.")


class RankJobConfig(_Strict):
    """`esc-eval train rank --config FILE`."""

    task: Literal["rank"] = Field("rank", description="Job kind.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="Model and training settings.")
    data: RankDataConfig = Field(description="Judge data.")
    evaluation: EvalConfig = Field(default_factory=EvalConfig, description="Test-split evaluation.")


def load_job_config(path: str | Path, kind: type[BaseModel]) -> Any:
    """Read a YAML job config and validate it; relative data paths resolve against the YAML's
    folder, output_dir against the working directory."""
    path = Path(path)
    cfg = load_config_file(path, kind, TrainConfigError)
    return _resolve_paths(cfg, path.parent.resolve())


_CWD_RELATIVE = {"output_dir", "torch_extensions_dir"}


def _resolve_paths(cfg: Any, base: Path) -> Any:
    """Relative data paths are relative to the config file's folder; output_dir and
    torch_extensions_dir stay relative to the working directory."""
    if isinstance(cfg, BaseModel):
        for name in type(cfg).model_fields:
            value = getattr(cfg, name)
            if name in _CWD_RELATIVE:
                continue
            if isinstance(value, Path) and not value.is_absolute():
                object.__setattr__(cfg, name, (base / value.expanduser()).resolve()
                                   if not str(value).startswith("~") else value.expanduser())
            else:
                _resolve_paths(value, base)
    elif isinstance(cfg, list):
        for item in cfg:
            _resolve_paths(item, base)
    return cfg


def load_role_config(path: str | Path) -> RoleJobConfig:
    return load_job_config(path, RoleJobConfig)


def load_rank_config(path: str | Path) -> RankJobConfig:
    return load_job_config(path, RankJobConfig)
