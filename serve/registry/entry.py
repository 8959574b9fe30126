"""One entry of the model registry: what the project knows of a model it can talk to (`ModelEntry`:
its weights or API name, spec template, languages, generation defaults, chat-template quirks, LoRA
adapters, size, price, quota), and what an entry implies for its backend (`backend_options`: a
vLLM engine's options, its adapters as local folders and their LoRA rank). serve/registry/registry.py loads
the entries and resolves names to specs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from esc_eval.serve.chat.interface import BACKENDS, GenerationParams, UnknownModelError
from esc_eval.serve.config.base import ConfigModel
from esc_eval.serve.calls.limits import ModelLimits

TEMPLATES_DIR = Path(__file__).parent / "data" / "templates"
PATHS_ENV = "ESC_EVAL_MODEL_PATHS"
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant!"  # what the official evaluate.py inserts

Group = Literal["close", "open", "domain", "role", "judge"]
Language = Literal["en", "zh"]


class RegistryError(ValueError):
    """The registry YAML (or an override) is invalid; the message names the bad field."""


class MissingAdapterError(UnknownModelError):
    """An entry lists a LoRA adapter whose local folder does not exist: the run must stop (never a
    silent fallback to the base model). The message names the entry, the adapter and the path."""


# LoRA ranks vLLM accepts for max_lora_rank (vllm.config.lora); an adapter's rank is rounded up.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm.config.lora.MaxLoRARanks (a test compares)
DROP_ADAPTER = "-"  # ESC_EVAL_MODEL_PATHS value that removes an adapter (weights already merged)


class ChatTemplateQuirks(ConfigModel):
    """How a model's chat template behaves, and what to do about it."""

    supports_system: bool = Field(
        True, description="False if the template drops, rejects or mis-renders a system message "
        "(callers then fold the system prompt into the first user turn)."
    )
    chat_template: str | None = Field(
        None, description="Override template: a file name under serve/registry/data/templates/ or an absolute "
        "path to a Jinja file; None uses the tokenizer's own template."
    )
    notes: str = Field("", description="Free-form notes on the template (stop tokens, roles, formats).")

    def template_path(self) -> Path | None:
        """The override template as a path, or None."""
        if self.chat_template is None:
            return None
        p = Path(self.chat_template)
        return p if p.is_absolute() else TEMPLATES_DIR / p


class TokenPrice(ConfigModel):
    """Dollars per million tokens of one model (API pricing; sim.runs.usage turns token counts into cost)."""

    prompt_per_1m: float = Field(ge=0, description="US dollars per 1M prompt (input) tokens.")
    completion_per_1m: float = Field(ge=0, description="US dollars per 1M completion (output) tokens.")


class ModelSize(ConfigModel):
    """A self-hosted model's size: what its weights and KV cache take (serve/plan/planner.py). From the model's
    config.json as published; a local weights folder's own config.json wins at plan time."""

    params_b: float = Field(gt=0, description="Parameters, in billions (weights = params x bytes per parameter).")
    layers: int = Field(ge=1, description="Transformer layers (config.json num_hidden_layers / num_layers).")
    attention_heads: int = Field(ge=1, description="Query heads (tensor parallelism must divide them).")
    kv_heads: int = Field(ge=1, description="Key/value heads (num_key_value_heads; multi-query groups for ChatGLM).")
    head_dim: int = Field(ge=1, description="Dimension of one attention head.")

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token takes in every layer (keys and values)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


class ModelEntry(ConfigModel):
    """One model the project can talk to."""

    name: str = Field(description="Registry key, lower-case, e.g. 'qwen1.5-7b-chat'.")
    title: str = Field(description="The model's name as the paper writes it (Table 2).")
    group: Group = Field(description="close | open | domain (the paper's three groups) | role | judge.")
    source: str | None = Field(
        description="Hugging Face repo id or API model name; None when no public weights exist "
        "(then local_path must be given before use)."
    )
    spec: str = Field(
        description="Chat-model spec template, '<backend>/<model>'; '{path}' is replaced by local_path "
        "or source, '{name}' by the registry name (e.g. 'vllm/{path}', 'openai/gpt-4')."
    )
    languages: list[Language] = Field(
        min_length=1, description="Languages the model is evaluated in (Table 2 halves: en, zh)."
    )
    paper_target: bool = Field(False, description="True for the 14 models evaluated in the paper's Table 2.")
    family: str | None = Field(
        None, description="The model family it was built from (its base model's lineage: 'qwen', 'llama', 'glm', "
        "'internlm', 'gpt', ...), lower-case; a judge of a target's own family is marked for self-preference "
        "(`analysis panel`). None: not known."
    )
    system_prompt: str | None = Field(
        DEFAULT_SYSTEM_PROMPT, description="System prompt used for this model as a target; None = none."
    )
    template: ChatTemplateQuirks = Field(
        default_factory=ChatTemplateQuirks, description="Chat-template quirks and override."
    )
    generation: GenerationParams = Field(
        default_factory=GenerationParams,
        description="Default sampling (paper: temperature 0; evaluate.py: 512 new tokens, Llama-3 256).",
    )
    release_decoding: Literal["generation_config", "greedy"] = Field(
        "generation_config", description="How the released code decoded this model, for profile 'release': "
        "'generation_config' = HF generate() with the folder's generation_config.json defaults (evaluate.py's Qwen and "
        "ESC-Role: sampling where that file says do_sample); 'greedy' = do_sample=False (evaluate.py's Llama-3)."
    )
    trust_remote_code: bool = Field(False, description="Load with trust_remote_code (custom modeling code).")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the API key (API models); "
        "the key itself is never stored."
    )
    base_url: str | None = Field(None, description="OpenAI-compatible base URL (…/v1); None = backend default.")
    adapters: dict[str, str] = Field(
        default_factory=dict, description="LoRA adapters: adapter name -> local path or '<hf repo>/<subfolder>'."
    )
    judge_rendering: Literal["official", "paper", "clean"] | None = Field(
        None, description="How a judge sees the dialogue: official (score.py history pairs), paper "
        "(the appendix prompt), clean (one user message); None for non-judges."
    )
    judge_system_prompt: str | None = Field(
        None, description="System message a judge's prompts get when its rubric has none (ESC-RANK: the InternLM2 "
        "chat() default meta instruction, which the release's model.chat() put before every prompt); None = none."
    )
    judge_prompt_order: Literal["rubric_first", "dialogue_first"] = Field(
        "rubric_first", description="A judge's prompt order: the paper's (rubric, then dialogue) or dialogue first "
        "(judges trained with train.rank prompt_order=dialogue_first; the seven prompts share a cached prefix)."
    )
    local_path: str | None = Field(None, description="Local weights folder; overrides source when set.")
    max_model_len: int | None = Field(None, ge=256, description="Context length to serve with (None = model's).")
    size: ModelSize | None = Field(None, description="Parameters and attention shape of a self-hosted model "
                                   "(GPU memory planning, `esc-eval plan`); None for API models.")
    note: str = Field("", description="Provenance and open questions (what is unknown is said here).")
    price: TokenPrice | None = Field(None, description="API list price per 1M tokens (usage and cost in the manifest); "
                                     "None for self-hosted models (their cost is engine and GPU time).")
    limits: ModelLimits | None = Field(None, description="The model's quota (max_concurrency, requests_per_minute, "
                                       "tokens_per_minute), enforced for a whole run across all workers; a config's "
                                       "`limits` on the model overrides it field by field.")

    @field_validator("name")
    @classmethod
    def _name_is_key(cls, v: str) -> str:
        if not v or v != v.strip().lower() or "/" in v or ":" in v:
            raise ValueError("must be lower-case, without '/', ':' or spaces")
        return v

    @field_validator("spec")
    @classmethod
    def _spec_has_backend(cls, v: str) -> str:
        backend, sep, rest = v.partition("/")
        if not sep or not rest:
            raise ValueError(f"must look like <backend>/<model>, got {v!r}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "ModelEntry":
        if self.spec.startswith("openai/") and self.group == "close" and not self.api_key_env:
            raise ValueError("api_key_env: an API model needs the name of its key's environment variable")
        if self.group == "judge" and self.judge_rendering is None:
            raise ValueError("judge_rendering: a judge entry must say how it renders dialogues")
        tp = self.template.template_path()
        if tp is not None and not tp.is_file():
            raise ValueError(f"template.chat_template: no template file at {tp}")
        return self

    @property
    def weights(self) -> str | None:
        """What to load: local_path if set, else source."""
        return self.local_path or self.source

    def resolved_spec(self) -> str:
        """The concrete chat-model spec, with '{path}' and '{name}' filled in."""
        if "{path}" in self.spec and self.weights is None:
            raise UnknownModelError(
                f"model {self.name!r} has no public weights ({self.note or 'source is unset'}); "
                f"give a local folder: {PATHS_ENV}={self.name}=/path/to/weights"
            )
        return self.spec.format(path=self.weights or "", name=self.name)


def backend_options(entry: ModelEntry) -> dict[str, Any]:
    """Options the entry implies for its backend's factory (only those the backend is known to take)."""
    backend = entry.spec.partition("/")[0]
    if backend in ("openai", "litellm"):
        opts: dict[str, Any] = {"default_params": entry.generation}
        if entry.api_key_env:
            opts["api_key_env"] = entry.api_key_env
        if entry.base_url:
            opts["base_url" if backend == "openai" else "api_base"] = entry.base_url
        return opts
    if backend == "serve":
        return {"default_params": entry.generation}
    if backend == "vllm":
        return vllm_engine_options(entry)
    return {}


def default_adapter(entry: ModelEntry) -> str | None:
    """The adapter every call of this entry uses when the caller names none: the only adapter of
    an entry listing exactly one (ESC-Role). Entries listing several (ESC-RANK's one per
    dimension) pick theirs per call (sim.judging.judges.select_adapter); None when there is none."""
    return next(iter(entry.adapters)) if len(entry.adapters) == 1 else None


def local_adapters(entry: ModelEntry) -> dict[str, str]:
    """The entry's adapters as local folders; MissingAdapterError (one line naming the entry,
    adapter and path) for the first that is not one. Weights are never fetched at run time."""
    out: dict[str, str] = {}
    for name, path in entry.adapters.items():
        p = Path(path).expanduser()
        if not p.is_dir():
            raise MissingAdapterError(
                f"model {entry.name!r}: adapter {name!r} folder {path} does not exist (the base model is never "
                f"used instead); give a local PEFT folder with {PATHS_ENV}='{entry.name}:{name}=/path/to/{name}' "
                f"(merged weights: '{entry.name}=/path/to/merged,{entry.name}:{name}={DROP_ADAPTER}')")
        out[name] = str(p)
    return out


def lora_rank(path: str | Path) -> int | None:
    """The rank `r` a PEFT adapter folder declares in adapter_config.json (None if unreadable)."""
    import json

    try:
        r = json.loads((Path(path) / "adapter_config.json").read_text(encoding="utf-8")).get("r")
    except (OSError, ValueError, AttributeError):
        return None
    return r if isinstance(r, int) and r > 0 else None


def vllm_lora_rank(ranks: Any) -> int:
    """The smallest max_lora_rank vLLM accepts that holds every rank."""
    top = max(ranks, default=1)
    for r in VLLM_LORA_RANKS:
        if r >= top:
            return r
    raise RegistryError(f"LoRA rank {top} exceeds vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}")


def vllm_engine_options(entry: ModelEntry) -> dict[str, Any]:
    """What a vLLM engine needs from the entry: remote code, context length, the chat-template
    quirks (the override template's path, and whether a system message must be folded) and the
    entry's LoRA adapters (local folders, all resident; a missing one stops here)."""
    opts: dict[str, Any] = {}
    if entry.adapters:
        adapters = local_adapters(entry)
        opts["adapters"] = adapters
        opts["max_loras"] = len(adapters)
        ranks = [r for r in (lora_rank(p) for p in adapters.values()) if r]
        opts["max_lora_rank"] = vllm_lora_rank(ranks) if ranks else 16  # 16: vLLM's own default
    if entry.trust_remote_code:
        opts["trust_remote_code"] = True
    if entry.max_model_len:
        opts["max_model_len"] = entry.max_model_len
    template = entry.template.template_path()
    if template is not None:
        opts["chat_template"] = str(template)
    if not entry.template.supports_system:
        opts["supports_system"] = False
    return opts
