"""The ESC-Role training job: dialogues -> role-play SFT examples -> one LoRA adapter."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esc_eval.train.adapter_registry import AdapterRegistryEntry, write_registry_entry
from esc_eval.train.data.chat_tokens import TokenizedExample
from esc_eval.train.config import RoleJobConfig
from esc_eval.train.data.dialogue_sources import SourceDialogue, load_dialogues
from esc_eval.train.errors import TrainInputError
from esc_eval.train.data.roleplay_data import RolePlayExample, build_roleplay_examples, tokenize_roleplay


@dataclass
class PreparedData:
    """Tokenized splits plus counts for the summary."""

    train: list[TokenizedExample]
    validation: list[TokenizedExample]
    stats: dict[str, Any] = field(default_factory=dict)


def load_sources(sources) -> list[SourceDialogue]:
    dialogues: list[SourceDialogue] = []
    for s in sources:
        dialogues.extend(load_dialogues(s.path, kind=s.kind, cards=s.cards, language=s.language))
    ids = [d.dialogue_id for d in dialogues]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise TrainInputError(f"dialogue ids occur in more than one source: {dup[:5]}")
    return dialogues


def load_tokenizer(model_path: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path))
    if tok.chat_template is None:
        raise TrainInputError(f"{model_path}: the tokenizer has no chat template")
    return tok


def pad_token_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def prepare_role_data(cfg: RoleJobConfig, tokenizer) -> PreparedData:
    """Load, build, split (seeded, by dialogue) and tokenize; every input error surfaces here."""
    examples: list[RolePlayExample] = build_roleplay_examples(load_sources(cfg.data.sources), cfg.data.strategy)
    if not examples:
        raise TrainInputError("no role-play examples: the sources hold no dialogue with a seeker turn")
    order = sorted(examples, key=lambda e: e.dialogue_id)
    random.Random(cfg.train.seed).shuffle(order)
    n_val = round(len(order) * cfg.data.validation_fraction) if len(order) > 1 else 0
    val_ex, train_ex = order[:n_val], order[n_val:]
    stats = {"dialogues": len(examples), "truncated": 0, "dropped": 0}

    def tok(exs):
        out = []
        for e in exs:
            t = tokenize_roleplay(tokenizer, e, cfg.train.max_seq_len)
            if t is None:
                stats["dropped"] += 1
                continue
            stats["truncated"] += int(t.truncated)
            out.append(t)
        return out

    train, val = tok(train_ex), tok(val_ex)
    if not train:
        raise TrainInputError(f"no role-play example fits in max_seq_len={cfg.train.max_seq_len} tokens")
    stats.update(train=len(train), validation=len(val),
                 target_tokens=sum(t.n_target_tokens for t in train))
    return PreparedData(train, val, stats)


def run_role_job(cfg: RoleJobConfig, on_step: Callable[[dict], None] | None = None,
                 on_prepared: Callable[[PreparedData, int], None] | None = None) -> dict[str, Any]:
    """Train the ESC-Role adapter; write the registry entry; return a summary dict."""
    from esc_eval.train.jobs.deepspeed_config import preflight, total_steps
    from esc_eval.train.jobs.run import run_training


    preflight(cfg.train)
    model_path = cfg.train.resolved_model_path()
    tokenizer = load_tokenizer(model_path)
    data = prepare_role_data(cfg, tokenizer)
    if on_prepared:
        on_prepared(data, total_steps(cfg.train, len(data.train)))
    run = run_training(cfg.train, cfg.data.adapter_name, data.train, data.validation, pad_token_id(tokenizer),
                       model_path=model_path, on_step=on_step)
    entry = AdapterRegistryEntry(
        name=cfg.data.adapter_name, kind="role", base=str(model_path), adapters={cfg.data.adapter_name: str(run.adapter_path)},
        layout="single", max_lora_rank=cfg.train.lora.r,
        extra={"run": run.as_dict(), "data": data.stats, "config": cfg.model_dump(mode="json")},
    )
    entry_path = write_registry_entry(cfg.train.output_dir, entry)
    return {"registry_entry": str(entry_path), "runs": [run.as_dict()], "data": data.stats}
