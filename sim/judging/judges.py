"""Building judges: a multi-LoRA ESC-RANK judge (one base model, one LoRA adapter per dimension).

The official ESC-RANK release (score.py) loads one LoRA per dimension from subfolders named by
the official keys (fluency, diversity, empathic, suggestion, human, tech, overall) and, for
English dialogues, their `_en` variants (fluency_en, ...). Here all of them are loaded into ONE
vLLM engine (`VLLMChatModel(model, adapters={name: path})`) and every scoring request names its
adapter, so the 7 (or 14) judges batch together instead of being 7 separate models.

A judge built here is a plain `JudgeConfig`:
  adapters        paper dimension -> adapter name, plus '<dimension>:<language>' -> adapter name
                  for language-specific variants (e.g. 'fluency:en' -> 'fluency_en');
  model.options   {'adapters': {name: local folder}, 'max_lora_rank': ..., 'max_loras': ...}
                  for the vLLM backend.
`select_adapter(judge, dimension, language)` is the single rule that picks the adapter of one
request; scoring calls it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS, is_paper_dimension, to_dimension

# The release's layout: '<official key>' for Chinese, '<official key>_en' for English.
LANGUAGE_SUFFIX: dict[str, str] = {"zh": "", "en": "_en"}
# LoRA ranks vLLM accepts for max_lora_rank (vllm.config.lora); a judge's rank is rounded up.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class JudgeBuildError(ValueError):
    """A judge cannot be built (missing adapter, bad folder); the message names what is missing."""


def official_adapter_name(dimension: str, language: str | None = None) -> str:
    """The release's adapter name of a dimension: 'empathy', 'en' -> 'empathic_en'."""
    name = to_dimension(dimension)
    if not is_paper_dimension(name):
        raise JudgeBuildError(f"dimension {name!r} is beyond the paper: ESC-RANK has no adapter for it")
    key = DIMENSIONS[name]
    if language is None:
        return key
    if language not in LANGUAGE_SUFFIX:
        raise JudgeBuildError(f"no adapter naming rule for language {language!r}; known: {', '.join(LANGUAGE_SUFFIX)}")
    return key + LANGUAGE_SUFFIX[language]


def select_adapter(judge: JudgeConfig, dimension: str, language: str) -> str | None:
    """The adapter one scoring request uses: the language-specific one ('<dim>:<lang>') if the
    judge has it, else the dimension's, else the model's default adapter (None = base model)."""
    adapters = judge.adapters or {}
    dim = to_dimension(dimension)
    return adapters.get(f"{dim}:{language}") or adapters.get(dim) or judge.model.adapter


def adapter_rank(path: str | Path) -> int:
    """The LoRA rank `r` a PEFT adapter folder declares (adapter_config.json)."""
    cfg_path = Path(path) / "adapter_config.json"
    if not cfg_path.is_file():
        raise JudgeBuildError(f"{path}: not a PEFT adapter folder (no adapter_config.json)")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise JudgeBuildError(f"{cfg_path}: not valid JSON ({e})") from None
    rank = cfg.get("r")
    if not isinstance(rank, int) or rank < 1:
        raise JudgeBuildError(f"{cfg_path}: field 'r' must be a positive integer, got {rank!r}")
    return rank


def vllm_max_lora_rank(ranks: Iterable[int]) -> int:
    """The smallest max_lora_rank vLLM accepts that holds every adapter's rank."""
    top = max(ranks, default=1)
    for r in VLLM_LORA_RANKS:
        if r >= top:
            return r
    raise JudgeBuildError(f"LoRA rank {top} exceeds vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}")


def scan_adapter_folder(folder: str | Path) -> dict[str, str]:
    """Adapter name -> path for each subfolder of `folder` holding an adapter_config.json
    (the release's layout: <folder>/fluency, <folder>/fluency_en, ...)."""
    root = Path(folder)
    if not root.is_dir():
        raise JudgeBuildError(f"{root}: adapter folder does not exist")
    found = {p.parent.name: str(p.parent) for p in sorted(root.glob("*/adapter_config.json"))}
    if not found:
        raise JudgeBuildError(f"{root}: no adapter subfolders (expected {root}/fluency/adapter_config.json, ...)")
    return found


def multi_lora_judge(
    adapters: Mapping[str, str | Path] | str | Path,
    base_model: str = "vllm/embedded",
    *,
    languages: Iterable[str] = ("en", "zh"),
    dimensions: Iterable[str] = DIMENSION_NAMES,
    method: Literal["logprob", "generate"] = "logprob",
    rubric: Literal["official", "paper"] = "official",
    rendering: Literal["official", "clean"] = "official",
    prompt_order: Literal["rubric_first", "dialogue_first"] = "rubric_first",
    name: str | None = None,
    engine_options: Mapping[str, Any] | None = None,
) -> JudgeConfig:
    """A JudgeConfig scoring each dimension with its own LoRA adapter on one vLLM engine.

    adapters: {adapter name: local folder} in the official naming (fluency, fluency_en, ...), or a
      folder whose subfolders are named so. Every requested dimension needs its base adapter
      (the Chinese one, which the release also uses as the fallback); a language's variant
      ('_en') is used where present.
    base_model: the vLLM spec of the base model the adapters were trained on.
    engine_options: extra vLLM engine kwargs (max_model_len, trust_remote_code, ...).
    """
    paths = scan_adapter_folder(adapters) if isinstance(adapters, (str, Path)) else {k: str(v) for k, v in adapters.items()}
    if not base_model.startswith(("vllm/", "fake/")):  # fake: the scripted stand-in for tests
        raise JudgeBuildError(f"base_model {base_model!r}: a multi-LoRA judge needs the vLLM backend ('vllm/<model>')")
    dims = [to_dimension(d) for d in dimensions]
    # A dimension beyond the paper (safety) has no ESC-RANK adapter: the base model answers it.
    adapted = [d for d in dims if is_paper_dimension(d)]
    missing = [official_adapter_name(d) for d in adapted if official_adapter_name(d) not in paths]
    if missing:
        raise JudgeBuildError(f"missing adapter(s) {', '.join(missing)}; have: {', '.join(sorted(paths)) or 'none'}")
    mapping: dict[str, str] = {}
    used: dict[str, str] = {}
    for d in adapted:
        base = official_adapter_name(d)
        mapping[d] = base
        used[base] = paths[base]
        for lang in languages:
            variant = official_adapter_name(d, lang)
            if variant != base and variant in paths:
                mapping[f"{d}:{lang}"] = variant
                used[variant] = paths[variant]
    for adapter, path in used.items():
        if not Path(path).is_dir():
            raise JudgeBuildError(f"adapter {adapter!r}: folder {path} does not exist (give a local PEFT folder)")
    options: dict[str, Any] = {
        "adapters": used,
        "max_lora_rank": vllm_max_lora_rank(adapter_rank(p) for p in used.values()),
        # All adapters resident at once, so a batch mixing the 7/14 judges never swaps.
        "max_loras": len(used),
        **dict(engine_options or {}),
    }
    return JudgeConfig(
        model=ModelRef(model=base_model, options=options), method=method, rubric=rubric, rendering=rendering,
        prompt_order=prompt_order, dimensions=dims, adapters=mapping, name=name or f"{base_model}+lora:{method}:{rubric}",
    )


def judge_from_registry(name: str = "esc-rank", registry=None, **kwargs: Any) -> JudgeConfig:
    """The multi-LoRA judge of a registry entry (default ESC-RANK), from local weights.

    The registry lists the adapters as hub subfolders; esc-eval never downloads weights at run
    time, so each must be overridden by a local folder (ESC_EVAL_MODEL_PATHS=
    'esc-rank=/models/internlm2-chat-7b,esc-rank:fluency=/lora/fluency,...').
    """
    from esc_eval.serve.registry.registry import default_registry
    from esc_eval.serve.registry.entry import vllm_engine_options

    entry = (registry or default_registry()).get(name)
    if not entry.adapters:
        raise JudgeBuildError(f"registry entry {name!r} has no adapters")
    not_local = sorted(a for a, p in entry.adapters.items() if not Path(p).expanduser().is_dir())
    if not_local:
        raise JudgeBuildError(
            f"{name}: adapter(s) {', '.join(not_local)} are not local folders; set "
            f"ESC_EVAL_MODEL_PATHS='{name}:{not_local[0]}=/path/to/{not_local[0]},...' "
            f"(no folder at {entry.adapters[not_local[0]]}; the base model is never used instead)")
    spec = entry.resolved_spec()
    engine: dict[str, Any] = {**vllm_engine_options(entry), **(kwargs.pop("engine_options", None) or {})}
    for key in ("adapters", "max_loras", "max_lora_rank"):
        engine.pop(key, None)  # multi_lora_judge loads the adapters the dimensions need and sizes for them
    if entry.judge_rendering == "clean":
        kwargs.setdefault("rendering", "clean")
    elif entry.judge_rendering == "paper":
        kwargs.setdefault("rubric", "paper")
    kwargs.setdefault("prompt_order", entry.judge_prompt_order)
    judge = multi_lora_judge({a: str(Path(p).expanduser()) for a, p in entry.adapters.items()}, spec,
                             languages=entry.languages, name=kwargs.pop("name", name), engine_options=engine, **kwargs)
    # as the release ran it: the entry's system message (ESC-RANK: InternLM2's meta instruction)
    # and its generation defaults for free answers (method 'generate')
    return judge.model_copy(update={"system_prompt": entry.judge_system_prompt,
                                    "model": judge.model.model_copy(update={"params": entry.generation})})
