"""One decision, per process, of where the engines run: "cuda" or "cpu". The plan (sim/driver/placement.py,
serve/plan) and every engine (serve/engines/args.py `detect_device`) ask `decide_accelerator`, so a plan
never puts replicas on GPUs that the engines then do not use.

The decision follows from three facts, each read the cheapest way:
- the GPUs this process may use (serve/devices/gpus.py: NVML, nvidia-smi, the driver; CUDA_VISIBLE_DEVICES);
- the NVIDIA driver's version and the newest CUDA it runs (NVML `nvmlSystemGetCudaDriverVersion`, else the
  header of plain `nvidia-smi`, else /proc/driver/nvidia/version for the version alone);
- torch: its version, the CUDA it was built for (torch.version.cuda; None for a CPU build) and
  torch.cuda.is_available().
With no GPU seen, the answer is "cpu" without importing torch (its version and CUDA are read from the
installed files): a CPU machine pays for one failed nvidia-smi lookup, nothing more.

A machine that contradicts itself has a `problem` (one line naming both sides and the fix), and
`check_accelerator` raises it: GPUs seen but torch a CPU build; torch built for a newer CUDA than the
driver runs; torch built with CUDA that cannot reach the GPUs. The commands that start engines stop on it
before anything starts. ESC_EVAL_ACCELERATOR=cpu runs the engines on the CPU on purpose (the GPUs are
left alone, no problem); ESC_EVAL_ACCELERATOR=cuda accepts a driver whose CUDA is older than torch's
within the same major version (CUDA's minor-version compatibility); nothing else is overridden.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import esc_eval.serve.devices.gpus as gpu_detect
from esc_eval.serve.devices.gpus import GpuInventory, detect_gpus

OVERRIDE_ENV = "ESC_EVAL_ACCELERATOR"  # cpu: engines on the CPU on purpose; cuda: accept a same-major older driver
GPU_BUILD_HINT = "install the GPU build: `ESC_EVAL_EXTRA=gpu bash cluster/local/bootstrap.sh`"
_CACHE: dict[tuple[str | None, str | None], "AcceleratorDecision"] = {}


@dataclass(frozen=True)
class AcceleratorDecision:
    """Where this process's engines run, the facts it follows from, and what contradicts itself."""

    kind: Literal["cuda", "cpu"]  # what every engine and the plan use
    gpus: GpuInventory  # the visible GPUs serve.devices.gpus saw (may be empty)
    torch_version: str  # "" when torch is not installed
    torch_cuda: str | None  # torch.version.cuda (None for a CPU build)
    cuda_available: bool  # torch.cuda.is_available() (not asked, False, where no GPU is seen)
    driver: str | None  # NVIDIA driver version when known
    reason: str  # one line: why this kind
    problem: str | None  # one line when the machine contradicts itself, else None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["gpus"] = {"count": self.gpus.count, "source": self.gpus.source, "describe": self.gpus.describe(),
                       "names": [g.name for g in self.gpus.gpus], "notes": list(self.gpus.notes)}
        return out


class AcceleratorMismatch(RuntimeError):
    """The machine contradicts itself (the decision's `problem`); the message is that one line."""


@dataclass(frozen=True)
class TorchFacts:
    version: str = ""  # "" = not installed
    cuda: str | None = None
    available: bool = False
    error: str | None = None  # why torch could not be imported (a broken install)


@dataclass(frozen=True)
class DriverFacts:
    version: str | None = None
    cuda: str | None = None  # the newest CUDA the driver runs, "12.4"
    source: str = "none"  # nvml | nvidia-smi | driver | none
    extra: dict[str, Any] = field(default_factory=dict)


def _cuda_tuple(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_facts(probe_cuda: bool) -> TorchFacts:
    """torch's version and CUDA build; torch.cuda.is_available() only when `probe_cuda` (GPUs seen).
    Without the probe torch is not imported unless it already is: the version comes from the package
    metadata and the CUDA build from torch/version.py's text."""
    if probe_cuda or "torch" in sys.modules:
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - ImportError, or a broken CUDA install failing at import
            return TorchFacts(error=f"{type(e).__name__}: {e}") if not isinstance(e, ImportError) else TorchFacts()
        cuda = getattr(torch.version, "cuda", None)
        available = False
        if probe_cuda and cuda:
            try:
                available = bool(torch.cuda.is_available())
            except Exception:  # noqa: BLE001 - a CUDA runtime that cannot start: not available
                available = False
        return TorchFacts(str(torch.__version__), cuda, available)
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return TorchFacts()
    cuda = None
    with contextlib.suppress(Exception):
        spec = importlib.util.find_spec("torch")
        folder = Path(next(iter(spec.submodule_search_locations or [])))
        m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", (folder / "version.py").read_text(), re.M)
        cuda = m.group(1) if m else None
    return TorchFacts(version, cuda, False)


def _nvml_driver(nvml: Any = None) -> DriverFacts | None:
    def read(nvml: Any) -> DriverFacts:
        cuda = None
        with contextlib.suppress(Exception):
            n = int(nvml.nvmlSystemGetCudaDriverVersion())  # 12040 -> "12.4"
            cuda = f"{n // 1000}.{(n % 1000) // 10}"
        return DriverFacts(gpu_detect._text(nvml.nvmlSystemGetDriverVersion()), cuda, "nvml")

    return gpu_detect.nvml_query(read, nvml)


def _smi_driver(run: Callable[..., Any]) -> DriverFacts | None:
    """Plain `nvidia-smi`: its header says "Driver Version: 570.86.15   CUDA Version: 12.8"."""
    try:
        proc = run(["nvidia-smi"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    version = re.search(r"Driver Version:\s*([\d.]+)", proc.stdout)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", proc.stdout)
    if not version:
        return None
    return DriverFacts(version.group(1), cuda.group(1) if cuda else None, "nvidia-smi")


def _proc_driver() -> DriverFacts | None:
    """/proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  ..." (no CUDA)."""
    try:
        text = (gpu_detect.NVIDIA_PROC.parent / "version").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+([\d.]+)", text)
    return DriverFacts(m.group(1), None, "driver") if m else None


def driver_facts(nvml: Any = None, run: Callable[..., Any] | None = None) -> DriverFacts:
    """The NVIDIA driver's version and the newest CUDA it runs, from the first source that answers."""
    return _nvml_driver(nvml) or _smi_driver(run or subprocess.run) or _proc_driver() or DriverFacts()


def decide(gpus: GpuInventory, torch: TorchFacts, driver: DriverFacts, override: str | None = None) -> AcceleratorDecision:
    """The decision from the facts (pure; `decide_accelerator` gathers them)."""
    override = (override or "").strip().lower() or None

    def out(kind: Literal["cuda", "cpu"], reason: str, problem: str | None = None) -> AcceleratorDecision:
        return AcceleratorDecision(kind, gpus, torch.version, torch.cuda, torch.available, driver.version, reason, problem)

    build = f"torch {torch.version}" if torch.version else "torch"
    drv = f"the NVIDIA driver {driver.version}" if driver.version else "the NVIDIA driver"
    drv_cuda = f"{drv} (CUDA {driver.cuda})" if driver.cuda else drv
    if override not in (None, "cpu", "cuda"):
        return out("cpu", f"{OVERRIDE_ENV}={override!r}", f"{OVERRIDE_ENV}={override!r}: expected cpu or cuda (or unset)")
    if not gpus.count:
        why = gpus.describe() + (f" ({'; '.join(gpus.notes)})" if gpus.notes else "")
        return out("cpu", f"engines on the CPU: {why}")
    seen = gpus.describe()
    if override == "cpu":
        return out("cpu", f"engines on the CPU: {OVERRIDE_ENV}=cpu, although {seen}")
    if torch.error:
        return out("cpu", f"{seen}, but torch does not import", f"{seen}, but torch does not import ({torch.error}); "
                   f"reinstall it: `ESC_EVAL_EXTRA=gpu bash cluster/local/bootstrap.sh`")
    if not torch.version:
        return out("cpu", f"{seen}, but torch is not installed",
                   f"{seen}, but torch is not installed: {GPU_BUILD_HINT}")
    if not torch.cuda:
        return out("cpu", f"{seen}, but {build} is a CPU build",
                   f"{seen}, but {build} is a CPU build (engines would run on the CPU): {GPU_BUILD_HINT}, "
                   f"or set {OVERRIDE_ENV}=cpu to run on the CPU on purpose")
    have, need = _cuda_tuple(driver.cuda), _cuda_tuple(torch.cuda)
    if have and need and have < need and not (override == "cuda" and have[0] == need[0]):
        same_major = have[0] == need[0]
        return out("cpu", f"{drv_cuda} is older than {build}'s CUDA {torch.cuda}",
                   f"{seen}: {drv_cuda} is older than {build}'s CUDA {torch.cuda}: update the driver to one for "
                   f"CUDA {torch.cuda}, or install a torch built for CUDA {driver.cuda} or older"
                   + (f" ({OVERRIDE_ENV}=cuda tries it anyway)" if same_major else ""))
    if not torch.available:
        return out("cpu", f"{seen}, but torch.cuda.is_available() is False",
                   f"{seen} and {build} is built for CUDA {torch.cuda}, but torch.cuda.is_available() is False "
                   f"(with {drv_cuda}): check the driver (`nvidia-smi`), CUDA_VISIBLE_DEVICES and the container's "
                   f"GPU access")
    return out("cuda", f"engines on CUDA: {seen}; {build} (CUDA {torch.cuda}) sees them; {drv_cuda}")


def decide_accelerator(refresh: bool = False) -> AcceleratorDecision:
    """This process's decision (cached per CUDA_VISIBLE_DEVICES and ESC_EVAL_ACCELERATOR: a Ray worker's
    GPUs are set in its environment before its engines start)."""
    key = (os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get(OVERRIDE_ENV))
    if not refresh and key in _CACHE:
        return _CACHE[key]
    gpus = detect_gpus()
    override = os.environ.get(OVERRIDE_ENV)
    probe = bool(gpus.count) and (override or "").strip().lower() != "cpu"
    decision = decide(gpus, torch_facts(probe_cuda=probe), driver_facts() if probe else DriverFacts(), override)
    _CACHE[key] = decision
    return decision


def check_accelerator() -> AcceleratorDecision:
    """The decision; raises AcceleratorMismatch (one line) when the machine contradicts itself."""
    decision = decide_accelerator()
    if decision.problem:
        raise AcceleratorMismatch(decision.problem)
    return decision


__all__ = ["AcceleratorDecision", "AcceleratorMismatch", "DriverFacts", "OVERRIDE_ENV", "TorchFacts", "check_accelerator",
           "decide", "decide_accelerator", "driver_facts", "torch_facts"]
