"""One LoRA + DeepSpeed training run on Ray Train (driver side).

`run_training` writes the tokenized examples, checks resources (a GPU config on a CPU cluster
fails here, before any worker starts), builds the DeepSpeed config and a `TorchTrainer` with
N workers, checkpoints through Ray Train (`CheckpointConfig`), resumes from the last
checkpoint of the same output folder when `resume` is set, streams per-step metrics to a
callback, and copies the final PEFT adapter to `<output_dir>/<name>/adapter`.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from esc_eval.train.data.chat_tokens import TokenizedExample
from esc_eval.train.config import TrainConfig
from esc_eval.train.jobs.deepspeed_config import (
    build_deepspeed_config, check_resources, local_resources, scaling_config_kwargs, torch_backend, total_steps,
)
from esc_eval.train.errors import TrainConfigError, TrainInputError
from esc_eval.train.jobs.worker import ADAPTER_DIR, train_loop_per_worker

DEFAULT_EXTENSIONS_DIR = Path.home() / ".cache" / "esc-eval" / "torch_extensions"


@dataclass
class TrainRunResult:
    """What one training run produced."""

    name: str
    adapter_path: Path
    checkpoint_path: str | None
    total_steps: int
    n_train: int
    n_validation: int
    history: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    first_step_at_s: float | None = None  # seconds from fit() to the first reported step

    @property
    def final_metrics(self) -> dict[str, Any]:
        return self.history[-1] if self.history else {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "adapter_path": str(self.adapter_path), "checkpoint_path": self.checkpoint_path,
            "total_steps": self.total_steps, "n_train": self.n_train, "n_validation": self.n_validation,
            "wall_s": round(self.wall_s, 2), "first_step_at_s": self.first_step_at_s,
            "final": self.final_metrics,
            "mean_step_time_s": (sum(h["step_time_s"] for h in self.history) / len(self.history)) if self.history else None,
        }


def worker_env(cfg: TrainConfig) -> dict[str, str]:
    """Environment of the Ray Train workers."""
    ext = cfg.torch_extensions_dir or Path(os.environ.get("TORCH_EXTENSIONS_DIR", DEFAULT_EXTENSIONS_DIR))
    env = {"TORCH_EXTENSIONS_DIR": str(ext), "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": str(max(1, int(cfg.cpus_per_worker)))}
    if not cfg.use_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def write_examples(examples: Sequence[TokenizedExample], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps(e.as_dict()) + "\n")
    tmp.replace(path)
    return path


@contextlib.contextmanager
def ray_session(cfg: TrainConfig) -> Iterator[None]:
    """Start (or join) Ray for training; shut down only what this call started. Resources are
    checked against the machine before a local Ray starts and against the cluster after."""
    import ray

    if cfg.ray_address is None and not ray.is_initialized():
        check_resources(cfg, local_resources(cfg))
    owned = False
    if not ray.is_initialized():
        from esc_eval.serve.app.ray_cluster import forget_stale_address, prepare_auth

        prepare_auth(cfg.ray_address)  # Ray's token auth stays on; tests opt out via RAY_AUTH_MODE
        if not cfg.ray_address:
            forget_stale_address()
        kwargs: dict[str, Any] = {"runtime_env": {"env_vars": worker_env(cfg)}, "log_to_driver": True,
                                  "include_dashboard": False}
        if cfg.ray_address:
            kwargs["address"] = cfg.ray_address
        ray.init(**kwargs)
        owned = True
    try:
        check_resources(cfg, ray.cluster_resources())
        yield
    finally:
        if owned:
            ray.shutdown()


def build_loop_config(cfg: TrainConfig, model_path: Path, run_dir: Path, steps: int, pad_token_id: int,
                      has_validation: bool) -> dict[str, Any]:
    """The dict every worker receives (plain JSON-able values)."""
    return {
        "model_path": str(model_path), "lora": cfg.lora.model_dump(), "seed": cfg.seed,
        "deepspeed": build_deepspeed_config(cfg, steps), "total_steps": steps,
        "micro_batch_size": cfg.micro_batch_size, "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "checkpoint_every": cfg.checkpoint_every, "eval_every": cfg.eval_every,
        "train_file": str(run_dir / "data" / "train.jsonl"),
        "validation_file": str(run_dir / "data" / "validation.jsonl") if has_validation else None,
        "metrics_file": str(run_dir / "metrics.jsonl"), "pad_token_id": pad_token_id,
        "threads_per_worker": max(1, int(cfg.cpus_per_worker)),
    }


def _follow(path: Path, callback: Callable[[dict], None], stop: threading.Event, seen: list[dict]) -> None:
    pos = 0
    while True:
        finished = stop.is_set()
        if path.exists():
            with path.open(encoding="utf-8") as f:
                f.seek(pos)
                for line in f:
                    if line.endswith("\n"):
                        rec = json.loads(line)
                        seen.append(rec)
                        callback(rec)
                        pos += len(line.encode("utf-8"))
                    else:
                        break
        if finished:
            return
        stop.wait(0.5)


def run_training(cfg: TrainConfig, name: str, train: Sequence[TokenizedExample],
                 validation: Sequence[TokenizedExample], pad_token_id: int, model_path: Path | None = None,
                 on_step: Callable[[dict], None] | None = None) -> TrainRunResult:
    """Train one LoRA adapter on Ray Train with DeepSpeed (see the module docstring)."""
    import ray
    from ray.train import CheckpointConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    if not train:
        raise TrainInputError(f"adapter {name!r}: no training examples")
    model_path = model_path or cfg.resolved_model_path()
    run_dir = cfg.output_dir / name
    storage = (cfg.output_dir / "ray").resolve()
    if not cfg.resume:
        shutil.rmtree(storage / name, ignore_errors=True)
        (run_dir / "metrics.jsonl").unlink(missing_ok=True)
    elif not (storage / name).exists():
        raise TrainConfigError(f"train.resume: no earlier run {name!r} under {storage} to resume")
    write_examples(train, run_dir / "data" / "train.jsonl")
    if validation:
        write_examples(validation, run_dir / "data" / "validation.jsonl")
    steps = total_steps(cfg, len(train))
    loop_cfg = build_loop_config(cfg, model_path, run_dir.resolve(), steps, pad_token_id, bool(validation))
    (run_dir / "deepspeed_config.json").write_text(json.dumps(loop_cfg["deepspeed"], indent=2))

    with ray_session(cfg) if not ray.is_initialized() else contextlib.nullcontext():
        check_resources(cfg, ray.cluster_resources())
        trainer = TorchTrainer(
            train_loop_per_worker, train_loop_config=loop_cfg,
            torch_config=TorchConfig(backend=torch_backend(cfg), timeout_s=1800),
            scaling_config=ScalingConfig(**scaling_config_kwargs(cfg)),
            run_config=RunConfig(
                name=name, storage_path=str(storage),
                checkpoint_config=CheckpointConfig(num_to_keep=cfg.keep_checkpoints),
                worker_runtime_env={"env_vars": worker_env(cfg)},
            ),
        )
        history: list[dict] = []
        stop = threading.Event()
        started = time.time()
        first: list[float] = []

        def callback(rec: dict) -> None:
            if not first:
                first.append(time.time() - started)
            if on_step:
                on_step(rec)

        follower = threading.Thread(target=_follow, args=(run_dir / "metrics.jsonl", callback, stop, history), daemon=True)
        follower.start()
        try:
            result = trainer.fit()
        finally:
            stop.set()
            follower.join(timeout=10)
        wall = time.time() - started
    if result.checkpoint is None:
        raise RuntimeError(f"adapter {name!r}: training ended without a checkpoint (error: {result.error})")
    adapter_out = run_dir / "adapter"
    with result.checkpoint.as_directory() as d:
        shutil.rmtree(adapter_out, ignore_errors=True)
        shutil.copytree(Path(d) / ADAPTER_DIR, adapter_out)
    return TrainRunResult(
        name=name, adapter_path=adapter_out.resolve(), checkpoint_path=result.checkpoint.path, total_steps=steps,
        n_train=len(train), n_validation=len(validation), history=history, wall_s=wall,
        first_step_at_s=round(first[0], 2) if first else None,
    )
