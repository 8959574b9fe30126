"""The ESC-RANK training job: annotations + dialogues -> judge SFT examples -> LoRA adapters
(one per dimension and language in the official layout, or one multi-task adapter) ->
Table 4 evaluation of the base and the trained judge on the test split."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esc_eval.train.adapter_registry import AdapterRegistryEntry, write_registry_entry
from esc_eval.train.data.annotations import Annotation, aggregate_annotations, load_annotations, load_official_scores
from esc_eval.train.data.chat_tokens import TokenizedExample
from esc_eval.train.config import RankJobConfig
from esc_eval.train.errors import TrainInputError
from esc_eval.train.data.judge_data import JudgeExample, adapter_name, fit_judge_example, join_annotations
from esc_eval.train.jobs.role import load_sources, load_tokenizer, pad_token_id
from esc_eval.train.data.splits import split_annotations

BASE_JUDGE = "base"


@dataclass
class RankData:
    """Judge examples by split, and tokenized train/validation sets by adapter."""

    splits: dict[str, list[JudgeExample]]
    groups: dict[str, tuple[list[TokenizedExample], list[TokenizedExample]]]
    stats: dict[str, Any] = field(default_factory=dict)


def load_all_annotations(cfg: RankJobConfig) -> list[Annotation]:
    rows: list[Annotation] = []
    for src in cfg.data.annotations:
        rows.extend(load_official_scores(src.path, src.annotator) if src.format == "official_scores"
                    else load_annotations(src.path))
    return rows


def judge_examples(cfg: RankJobConfig) -> dict[str, list[JudgeExample]]:
    """Validated, joined and split judge examples (errors before any training)."""
    annotations = load_all_annotations(cfg)
    if cfg.data.dimensions:
        annotations = [a for a in annotations if a.dimension in cfg.data.dimensions]
        if not annotations:
            raise TrainInputError(f"data.dimensions: no annotation for {cfg.data.dimensions}")
    annotations = aggregate_annotations(annotations, cfg.data.aggregate)
    examples = join_annotations(annotations, load_sources(cfg.data.dialogues))
    s = cfg.data.split
    return split_annotations(examples, seed=s.seed, ratios=s.ratios, group=s.group, holdout_model=s.holdout_model)


def group_of(cfg: RankJobConfig, example: JudgeExample) -> str:
    """The adapter an example trains (and is scored with)."""
    return adapter_name(example.dimension, example.language) if cfg.data.layout == "per_dimension" else cfg.data.adapter_name


def prepare_rank_data(cfg: RankJobConfig, tokenizer) -> RankData:
    splits = judge_examples(cfg)
    if not splits["train"]:
        raise TrainInputError("the training split is empty (too few annotations for the split ratios)")
    stats: dict[str, Any] = {k: len(v) for k, v in splits.items()}
    stats.update(shortened=0, dropped=0)
    groups: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for split, slot in (("train", 0), ("validation", 1), ("test", None)):
        kept = []
        for ex in splits[split]:
            fitted = fit_judge_example(tokenizer, ex, cfg.train.max_seq_len, cfg.data.overflow, cfg.data.rubric,
                                       cfg.data.rendering, cfg.data.prompt_order)
            if fitted is None:
                stats["dropped"] += 1
                continue
            ex, tok = fitted
            stats["shortened"] += int(tok.truncated)
            kept.append(ex)
            if slot is not None:
                groups[group_of(cfg, ex)][slot].append(tok)
        splits[split] = kept  # test prompts are scored exactly as fitted for training
    empty = [g for g, (tr, _) in groups.items() if not tr]
    if not groups or empty:
        raise TrainInputError(f"no training example fits max_seq_len={cfg.train.max_seq_len} for adapter(s) "
                              f"{empty or 'all'}")
    return RankData(splits, dict(sorted(groups.items())), stats)


def evaluate_judges(cfg: RankJobConfig, model_path: Path, adapters: dict[str, Path], test: list[JudgeExample],
                    on_done: Callable[[], None] | None = None) -> list:
    """Score the test split with the base model and with the trained adapters (one vLLM engine)."""
    from esc_eval.serve.chat.interface import get_chat_model
    from esc_eval.serve.registry.entry import vllm_lora_rank
    from esc_eval.train.jobs.judge_eval import score_examples

    ev = cfg.evaluation
    model = get_chat_model(f"vllm/{model_path}", adapters=adapters, max_lora_rank=vllm_lora_rank([cfg.train.lora.r]),
                           max_model_len=ev.max_model_len, **ev.engine_kwargs)

    async def run() -> list:
        try:
            preds = []
            if ev.include_base:
                preds += await score_examples(model, test, BASE_JUDGE, lambda e: None, ev.method, cfg.data.rubric,
                                              cfg.data.rendering, ev.max_concurrency, on_done, cfg.data.prompt_order)
            preds += await score_examples(model, test, cfg.data.adapter_name,
                                          lambda e: group_of(cfg, e) if group_of(cfg, e) in adapters else None,
                                          ev.method, cfg.data.rubric, cfg.data.rendering, ev.max_concurrency, on_done,
                                          cfg.data.prompt_order)
            return preds
        finally:
            await model.close()

    try:
        return asyncio.run(run())
    finally:
        model.release()  # the evaluation's engine (base + adapters) is the job's own: stopped, its memory freed


def run_rank_job(cfg: RankJobConfig, on_step: Callable[[str, dict], None] | None = None,
                 on_prepared: Callable[[RankData], None] | None = None,
                 on_scored: Callable[[], None] | None = None) -> dict[str, Any]:
    """Train every adapter of the layout, evaluate (Table 4), write the registry entry."""
    from esc_eval.train.jobs.run import ray_session, run_training
    from esc_eval.train.jobs.judge_eval import write_evaluation

    from esc_eval.train.jobs.deepspeed_config import preflight

    preflight(cfg.train)
    model_path = cfg.train.resolved_model_path()
    tokenizer = load_tokenizer(model_path)
    data = prepare_rank_data(cfg, tokenizer)
    if on_prepared:
        on_prepared(data)
    runs = []
    with ray_session(cfg.train):
        for name, (train, val) in data.groups.items():
            runs.append(run_training(cfg.train, name, train, val, pad_token_id(tokenizer), model_path=model_path,
                                     on_step=(lambda rec, n=name: on_step(n, rec)) if on_step else None))
    adapters = {r.name: r.adapter_path for r in runs}
    summary: dict[str, Any] = {"runs": [r.as_dict() for r in runs], "data": data.stats}
    if cfg.evaluation.enabled and data.splits["test"]:
        preds = evaluate_judges(cfg, model_path, adapters, data.splits["test"], on_scored)
        paths = write_evaluation(cfg.train.output_dir / "evaluation", preds, cfg.evaluation.method)
        summary["evaluation"] = {k: str(v) for k, v in paths.items()}
    entry = AdapterRegistryEntry(
        name=cfg.data.adapter_name, kind="judge", base=str(model_path),
        adapters={k: str(v) for k, v in adapters.items()}, layout=cfg.data.layout, max_lora_rank=cfg.train.lora.r,
        extra={**summary, "config": cfg.model_dump(mode="json")},
    )
    summary["registry_entry"] = str(write_registry_entry(cfg.train.output_dir, entry))
    return summary
