"""DeepSpeed and Ray Train settings derived from a TrainConfig, plus the resource check.

CPU (use_gpu false): gloo backend, torch AdamW inside DeepSpeed ("torch_adam": true; avoids
JIT-compiling DeepSpeed's fused/CPU Adam), bf16 or fp32. GPU: NCCL, DeepSpeed's fused AdamW,
bf16/fp16, overlap_comm. These dicts are pure functions of the config: tests check the GPU ones
on CPU.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from esc_eval.train.config import TrainConfig
from esc_eval.train.errors import TrainConfigError


def global_batch_size(cfg: TrainConfig) -> int:
    """Examples per optimizer step across all workers."""
    return cfg.micro_batch_size * cfg.gradient_accumulation_steps * cfg.num_workers


def total_steps(cfg: TrainConfig, n_train_examples: int) -> int:
    """Optimizer steps: max_steps, else ceil(epochs * examples / global batch)."""
    if cfg.max_steps is not None:
        return cfg.max_steps
    if n_train_examples <= 0:
        raise TrainConfigError("no training examples: cannot derive the number of steps from epochs")
    return max(1, math.ceil(cfg.epochs * n_train_examples / global_batch_size(cfg)))


def torch_backend(cfg: TrainConfig) -> str:
    """Process-group backend: nccl on GPUs, gloo on CPUs."""
    return "nccl" if cfg.use_gpu else "gloo"


def build_deepspeed_config(cfg: TrainConfig, steps: int) -> dict[str, Any]:
    """The DeepSpeed config dict for `deepspeed.initialize(config=...)`."""
    optimizer_params: dict[str, Any] = {
        "lr": cfg.learning_rate, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": cfg.weight_decay,
    }
    if not cfg.use_gpu and cfg.cpu_optimizer == "torch_adam":
        optimizer_params["torch_adam"] = True
    zero: dict[str, Any] = {
        "stage": cfg.deepspeed_stage,
        "overlap_comm": cfg.use_gpu,
        "contiguous_gradients": True,
        "reduce_bucket_size": 5e7,
    }
    if cfg.deepspeed_stage == 3:
        zero.update({"stage3_gather_16bit_weights_on_model_save": True, "stage3_param_persistence_threshold": 1e4})
    else:
        zero["allgather_bucket_size"] = 5e7
    if not cfg.use_gpu and cfg.cpu_optimizer == "deepspeed_cpu_adam":
        zero["offload_optimizer"] = {"device": "cpu"}
    return {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "train_batch_size": global_batch_size(cfg),
        "gradient_clipping": cfg.gradient_clipping,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
        "zero_optimization": zero,
        "bf16": {"enabled": cfg.resolved_precision == "bf16"},
        "fp16": {"enabled": cfg.resolved_precision == "fp16", "loss_scale": 0, "initial_scale_power": 16},
        "optimizer": {"type": "AdamW", "params": optimizer_params},
        # WarmupDecayLR needs >= 1 warm-up step: warmup_steps 0 = constant lr (min = max);
        # N > 0 = linear warm-up from 0 over N steps, then linear decay to 0.
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {
                "warmup_min_lr": 0.0 if cfg.warmup_steps else cfg.learning_rate,
                "warmup_max_lr": cfg.learning_rate,
                "warmup_num_steps": max(1, min(cfg.warmup_steps, steps - 1)) if cfg.warmup_steps else 1,
                "total_num_steps": max(steps, 2),
                "warmup_type": "linear",
            },
        },
    }


def scaling_config_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """Arguments of ray.train.ScalingConfig."""
    resources: dict[str, float] = {"CPU": cfg.cpus_per_worker}
    if cfg.use_gpu:
        resources["GPU"] = cfg.gpus_per_worker
    return {"num_workers": cfg.num_workers, "use_gpu": cfg.use_gpu, "resources_per_worker": resources}


def check_resources(cfg: TrainConfig, cluster_resources: Mapping[str, float]) -> None:
    """Fail before training when the cluster cannot host the workers (e.g. GPUs asked on a CPU box)."""
    if cfg.use_gpu:
        have = float(cluster_resources.get("GPU", 0.0))
        need = cfg.num_workers * cfg.gpus_per_worker
        if have < need:
            raise TrainConfigError(
                f"train.use_gpu: the config asks for {need:g} GPU(s) ({cfg.num_workers} workers x "
                f"{cfg.gpus_per_worker:g}) but the Ray cluster has {have:g}; set use_gpu: false to train on CPU")
    have_cpu = float(cluster_resources.get("CPU", 0.0))
    need_cpu = cfg.num_workers * cfg.cpus_per_worker
    if have_cpu < need_cpu:
        raise TrainConfigError(
            f"train.num_workers: {cfg.num_workers} workers x {cfg.cpus_per_worker:g} CPU need {need_cpu:g} CPUs, "
            f"the Ray cluster has {have_cpu:g}; lower num_workers or cpus_per_worker")


def local_resources(cfg: TrainConfig) -> dict[str, float]:
    """What a local Ray would offer on this machine (checked before Ray starts)."""
    import os

    import torch

    return {"CPU": float(os.cpu_count() or 1), "GPU": float(torch.cuda.device_count() if torch.cuda.is_available() else 0)}


def preflight(cfg: TrainConfig) -> None:
    """Cheap checks before any data is prepared: a local run must fit this machine (GPUs asked on
    a CPU-only machine fail here). A cluster run (ray_address set) is checked once Ray is joined."""
    if cfg.ray_address is None:
        check_resources(cfg, local_resources(cfg))
