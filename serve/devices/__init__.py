"""serve.devices: what machine the engines run on. The CPU (ISA flags, the fast dtype, KV block
size, `cpu.py`) and the GPUs a run may use (NVML, nvidia-smi, the driver; CUDA_VISIBLE_DEVICES
respected, `gpus.py`), and the one decision of "cuda" or "cpu" that the plan and every engine follow,
with what makes a machine contradict itself (a CPU build of torch beside GPUs, a driver older than
torch's CUDA: `accelerator.py`).

Layer: the floor of serve beside config; imports nothing of the project."""
from esc_eval.serve.devices.accelerator import (AcceleratorDecision, AcceleratorMismatch, check_accelerator,
                                              decide_accelerator)
from esc_eval.serve.devices.cpu import CpuInfo, DtypeError, best_dtype, cpu_info, kv_block_size, resolve_dtype, runtime_summary
from esc_eval.serve.devices.gpus import GPU_MEMORY_GB, Gpu, GpuInventory, accelerator_type, detect_gpus, ray_inventory, visible

__all__ = ["AcceleratorDecision", "AcceleratorMismatch", "CpuInfo", "DtypeError", "GPU_MEMORY_GB", "Gpu", "GpuInventory", "accelerator_type", "best_dtype", "check_accelerator", "cpu_info", "decide_accelerator",
           "detect_gpus", "kv_block_size", "ray_inventory", "resolve_dtype", "runtime_summary", "visible"]
