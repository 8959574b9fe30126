"""The per-worker training loop run by Ray Train's TorchTrainer: PEFT LoRA + DeepSpeed.

Each worker loads the base model, wraps it with LoRA, initialises DeepSpeed (the process group is
the one Ray Train set up: gloo on CPU, NCCL on GPU), trains on its shard of the tokenized
examples and reports metrics every optimizer step. Checkpoints (DeepSpeed state of the trainable
parameters and optimizer, the PEFT adapter, the step) go through `ray.train.report(checkpoint=)`;
all ranks write into one checkpoint folder. A restarted run continues from `get_checkpoint()`.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

IGNORE_INDEX = -100
STATE_FILE = "train_state.json"
ADAPTER_DIR = "adapter"
DS_DIR = "deepspeed"


def read_examples(path: str | Path) -> list[dict[str, list[int]]]:
    """Tokenized examples written by the driver (JSON lines of input_ids/labels)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def collate(examples: list[dict[str, list[int]]], pad_id: int):
    """Right-pad a batch: input_ids, attention_mask, labels (-100 on padding)."""
    import torch

    n = max(len(e["input_ids"]) for e in examples)
    ids = torch.full((len(examples), n), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), n), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), n), dtype=torch.long)
    for i, e in enumerate(examples):
        k = len(e["input_ids"])
        ids[i, :k] = torch.tensor(e["input_ids"])
        labels[i, :k] = torch.tensor(e["labels"])
        mask[i, :k] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def micro_batch(shard: list, index: int, size: int, seed: int) -> list:
    """The `index`-th micro batch of a worker's shard, in a seeded order reshuffled every pass
    (a pure function of index: resuming at step k sees the same data as an uninterrupted run)."""
    n = len(shard)
    out = []
    for j in range(index * size, index * size + size):
        epoch, pos = divmod(j, n)
        order = list(range(n))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append(shard[order[pos]])
    return out


def adapter_state_dict(model, stage: int) -> dict:
    """The trainable (LoRA) parameters as full tensors under their model names, ready for
    `PeftModel.save_pretrained(state_dict=...)` (ZeRO-3 partitions them: gather first)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if stage != 3:
        return {n: p.detach().cpu().clone() for n, p in named}
    import deepspeed

    with deepspeed.zero.GatheredParameters([p for _, p in named], modifier_rank=None):
        return {n: p.detach().cpu().clone() for n, p in named}


def _evaluate(engine, examples: list, cfg: dict, pad_id: int) -> float | None:
    """Mean token loss on the worker's validation shard, averaged across workers."""
    import torch
    import torch.distributed as dist

    total = torch.zeros(2, dtype=torch.float64)
    engine.eval()
    with torch.no_grad():
        for i in range(0, len(examples), cfg["micro_batch_size"]):
            batch = collate(examples[i: i + cfg["micro_batch_size"]], pad_id)
            batch = {k: v.to(engine.device) for k, v in batch.items()}
            n_tok = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
            loss = engine(**batch).loss
            total += torch.tensor([float(loss) * n_tok, n_tok], dtype=torch.float64)
    engine.train()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(total)
    return float(total[0] / total[1]) if total[1] > 0 else None


def train_loop_per_worker(cfg: dict[str, Any]) -> None:
    """Ray Train entry point; cfg is built by train.jobs.run.build_loop_config."""
    import deepspeed
    import ray.train
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(cfg["seed"])
    torch.set_num_threads(max(1, int(cfg.get("threads_per_worker", 1))))
    started = time.time()

    model = AutoModelForCausalLM.from_pretrained(cfg["model_path"], dtype=torch.float32)
    model.config.use_cache = False
    lora = cfg["lora"]
    model = get_peft_model(model, LoraConfig(
        r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
        target_modules=lora["target_modules"], task_type="CAUSAL_LM"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=trainable, config=cfg["deepspeed"])

    train_all = read_examples(cfg["train_file"])
    shard = train_all[rank::world] or train_all  # more workers than examples: reuse
    val_all = read_examples(cfg["validation_file"]) if cfg.get("validation_file") else []
    val_shard = val_all[rank::world]
    pad_id = cfg["pad_token_id"]

    start_step = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            load_path, _ = engine.load_checkpoint(os.path.join(d, DS_DIR), tag="state", load_module_strict=False)
            if load_path is None:
                raise RuntimeError(f"could not load the DeepSpeed state from checkpoint {d}")
            start_step = json.loads(Path(d, STATE_FILE).read_text())["step"]

    steps, accum, mbs = cfg["total_steps"], cfg["gradient_accumulation_steps"], cfg["micro_batch_size"]
    metrics_file = Path(cfg["metrics_file"]) if rank == 0 and cfg.get("metrics_file") else None
    if metrics_file is not None and start_step == 0 and metrics_file.exists():
        metrics_file.unlink()
    setup_s = time.time() - started
    engine.train()
    for step in range(start_step, steps):
        t0 = time.time()
        losses, n_tokens = [], 0
        for micro in range(accum):
            batch = collate(micro_batch(shard, step * accum + micro, mbs, cfg["seed"]), pad_id)
            n_tokens += int(batch["attention_mask"].sum())
            batch = {k: v.to(engine.device) for k, v in batch.items()}
            loss = engine(**batch).loss
            engine.backward(loss)
            engine.step()
            losses.append(float(loss.detach()))
        done = step + 1
        metrics: dict[str, Any] = {
            "step": done, "total_steps": steps, "loss": sum(losses) / len(losses),
            "lr": float(engine.get_lr()[0]), "step_time_s": time.time() - t0,
            "tokens_per_s": n_tokens * world / max(time.time() - t0, 1e-9), "setup_s": setup_s,
        }
        is_last = done == steps
        if val_all and (is_last or (cfg.get("eval_every") and done % cfg["eval_every"] == 0)):
            metrics["val_loss"] = _evaluate(engine, val_shard, cfg, pad_id)
        if metrics_file is not None:
            with metrics_file.open("a", encoding="utf-8") as f:
                f.write(json.dumps(metrics) + "\n")
        if is_last or done % cfg["checkpoint_every"] == 0:
            tmp = Path(tempfile.mkdtemp(prefix=f"esc-eval-ckpt-{rank}-"))
            try:
                engine.save_checkpoint(str(tmp / DS_DIR), tag="state", exclude_frozen_parameters=True)
                state = adapter_state_dict(engine.module, cfg["deepspeed"]["zero_optimization"]["stage"])
                if rank == 0:
                    engine.module.save_pretrained(str(tmp / ADAPTER_DIR), state_dict=state)
                    (tmp / STATE_FILE).write_text(json.dumps({"step": done, "loss": metrics["loss"]}))
                ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(str(tmp)))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        else:
            ray.train.report(metrics)
