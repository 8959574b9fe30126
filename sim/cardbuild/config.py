"""The card-construction config: pydantic models, loaded from YAML and validated at the door.

Relative source paths resolve against the config file's folder; `output` resolves against the
current folder. Errors name the bad field (`sources.2.path: ...`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from esc_eval.serve.calls.retry import MAX_ATTEMPTS
from esc_eval.serve.config import ConfigModel, read_yaml_mapping, validate_config
from esc_eval.serve.registry.ref import DEFAULT_MODEL

from esc_eval.sim.cardbuild.sources.items import canonical_dataset

# Defaults the stages and the runner share with their config (stages/, runner.py read these):
MAX_INPUT_CHARS = 6000  # a post or rendered dialogue cut here: the paper's sources fit, a runaway thread does not
CONCURRENCY = 16  # model calls in flight: a vLLM engine's batch fills, an API's rate limit mostly holds
DEDUP_NGRAM = 3  # character 3-grams: robust to small edits in short problem texts
DEDUP_THRESHOLD = 0.8  # Jaccard similarity from which two cards say the same
DEDUP_NUM_PERM = 128  # MinHash signature length: the Jaccard estimate's standard error about 0.035 at 0.8
DEDUP_BANDS = 32  # LSH bands of 4 rows: pairs near DEDUP_THRESHOLD almost always become candidates


class CardBuildConfigError(ValueError):
    """The config file is missing, not YAML, or has a bad field (named in the message)."""


class _Model(ConfigModel):
    pass


class SourceConfig(_Model):
    path: Path = Field(description="A source file (.json/.jsonl/.csv) or folder; relative to the config file.")
    dataset: str | None = Field(None, description="Dataset name (EPITOME, MHP, Psych8K, PsyQA, ESConv, ExTES, Smile); omit to detect from the fields.")
    limit: int | None = Field(None, ge=1, description="Read at most this many items (the first N).")
    sample: int | None = Field(None, ge=1, description="Then keep a seeded random sample of N items (Table 5's Sample_Num).")

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str | None) -> str | None:
        return canonical_dataset(v) if v else None


class ModelConfig(_Model):
    spec: str = Field(DEFAULT_MODEL, description="Chat model spec: vllm/<model>, openai/<model>, serve/<app>, fake/<script>.")
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword options for the backend (engine kwargs, base_url, ...).")
    temperature: float = Field(0.0, ge=0.0, description="Sampling temperature (the paper used GPT-4; 0 = greedy).")


class ExtractionConfig(_Model):
    one_shot: bool = Field(True, description="Show the figure's worked example as a prior user/assistant turn.")
    max_tokens: int = Field(200, ge=16, description="Max new tokens of an extraction reply.")
    max_input_chars: int = Field(MAX_INPUT_CHARS, ge=200, description="Truncate posts / rendered dialogues to this many characters.")


class FilterConfig(_Model):
    enabled: bool = Field(True, description="Run the Figure 8 LLM filter (off: every extracted card passes).")
    one_shot: bool = Field(True, description="Show the figure's worked example first.")
    constrained: bool = Field(True, description="Constrain the answer to the prompt's three labels + the discard sentence (structured output).")
    max_tokens: int = Field(32, ge=1, description="Max new tokens of a filter reply.")
    keep_unparsed: bool = Field(False, description="Keep cards whose filter reply could not be read (default: reject them with the reason).")


class ClassifyConfig(_Model):
    method: Literal["llm", "keyword"] = Field("llm", description="llm: the leaf-listing prompt (keyword fallback when unparsed); keyword: the keyword fallback only.")
    constrained: bool = Field(True, description="Constrain the LLM answer to the listed leaf names (structured output).")
    restrict_to_filter_top: bool = Field(True, description="List only the leaves under the top category the filter chose.")
    max_tokens: int = Field(48, ge=1, description="Max new tokens of a classification reply.")


class RiskConfig(_Model):
    enabled: bool = Field(False, description="Label each card's crisis-risk level (none, passive_ideation, active_ideation_plan, harm_to_others) from its source with an LLM prompt (beyond the paper; sim/cardbuild/stages/risk.py).")
    constrained: bool = Field(True, description="Constrain the answer to the prompt's four labels (structured output).")
    max_tokens: int = Field(16, ge=1, description="Max new tokens of a risk reply.")


class DedupConfig(_Model):
    enabled: bool = Field(True, description="Remove near-duplicate cards across sources.")
    field: Literal["problem", "card"] = Field("problem", description="Compare the problem text or the whole card text.")
    ngram: int = Field(DEDUP_NGRAM, ge=1, le=10, description="Character n-gram size of the shingles.")
    threshold: float = Field(DEDUP_THRESHOLD, gt=0.0, le=1.0, description="Jaccard similarity at or above which a card is a duplicate.")
    num_perm: int = Field(DEDUP_NUM_PERM, ge=8, description="MinHash signature length (candidate search).")
    bands: int = Field(DEDUP_BANDS, ge=1, description="LSH bands (num_perm must be a multiple).")


class AnnotationConfig(_Model):
    enabled: bool = Field(True, description="Export annotation sheets and apply filled ones (Appendix A.2) on each run.")
    annotators: list[str] = Field(["annotator_1", "annotator_2"], min_length=2, max_length=2, description="Names of the two crowd annotators (sheet file names).")
    reviewer: str = Field("reviewer", description="Name of the third reviewer (sheet file name).")


class RayConfig(_Model):
    enabled: bool = Field(False, description="Run the LLM stages inside one Ray task (local ray.init, or `address`).")
    address: str | None = Field(None, description="Ray cluster address (None = start/attach a local Ray).")
    num_cpus: float = Field(1.0, ge=0.0, description="CPUs the Ray task asks for.")


class CardBuildConfig(_Model):
    name: str = Field("cards", description="Name of this build (shown in the manifest).")
    output: Path = Field(description="Output folder (created; re-running resumes from its checkpoints).")
    sources: list[SourceConfig] = Field(min_length=1, description="Source datasets to read, in priority order (dedup keeps earlier ones).")
    model: ModelConfig = Field(default_factory=ModelConfig, description="The model doing extraction, filtering and classification.")
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig, description="Extraction stage (Figures 6/7).")
    filter: FilterConfig = Field(default_factory=FilterConfig, description="LLM filter stage (Figure 8).")
    classify: ClassifyConfig = Field(default_factory=ClassifyConfig, description="Third-level classification stage.")
    risk: RiskConfig = Field(default_factory=RiskConfig, description="Crisis-risk labelling stage (off by default).")
    dedup: DedupConfig = Field(default_factory=DedupConfig, description="Near-duplicate removal.")
    annotation: AnnotationConfig = Field(default_factory=AnnotationConfig, description="Human annotation sheets and correction rules.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Where the LLM stages run.")
    concurrency: int = Field(CONCURRENCY, ge=1, description="Model calls in flight at once.")
    max_attempts: int = Field(MAX_ATTEMPTS, ge=1, description="Attempts per model call before the item is recorded as failed.")
    retry_wait_s: float = Field(1.0, ge=0.0, description="First wait between attempts (doubles each time).")
    seed: int = Field(0, description="Seed of source sampling and MinHash.")


def parse_build_config(data: Any, base_dir: Path | None = None, where: str = "config") -> CardBuildConfig:
    cfg = validate_config(CardBuildConfig, data, where, CardBuildConfigError)
    if cfg.dedup.num_perm % cfg.dedup.bands:
        raise CardBuildConfigError(f"{where}: field 'dedup.bands': {cfg.dedup.bands} does not divide dedup.num_perm {cfg.dedup.num_perm}")
    if base_dir is not None:
        for src in cfg.sources:
            if not src.path.is_absolute():
                src.path = (base_dir / src.path).resolve()
    return cfg


def load_build_config(path: str | Path) -> CardBuildConfig:
    """Read and validate a card-build YAML config."""
    path = Path(path)
    return parse_build_config(read_yaml_mapping(path, CardBuildConfigError), base_dir=path.resolve().parent,
                              where=str(path))
