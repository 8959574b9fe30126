"""The GPUs a run may use, found one way at plan time (`esc-eval plan`) and at run time (`simulate`,
`score`): nothing here starts CUDA, torch or Ray.

This machine, in order (the first that answers wins):
1. NVML (`pynvml`, from the nvidia-ml-py package: imported only here, never a CPU dependency);
2. `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits`;
3. the driver's /proc/driver/nvidia/gpus folders (a count and a model name; memory from the type).
CUDA_VISIBLE_DEVICES is applied as CUDA does: unset = every GPU, empty = none, else indices or
UUIDs (a unique prefix is enough), in the order given, up to the first entry naming no GPU.
A Ray cluster the run joins: its `GPU` resources and `accelerator_type:<T>` labels (ray_inventory).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")

# GPU memory by Ray's accelerator type (ray.util.accelerators); the smaller variant where a type has
# two (A100 40/80 GB, V100 16/32 GB): give gpu_memory_gb for the larger.
GPU_MEMORY_GB = {"T4": 16, "V100": 16, "A10G": 24, "L4": 24, "L40S": 48, "A100": 40, "H100": 80, "H200": 141}
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")  # one folder per GPU the driver sees (Linux)
SMI_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"]
MIB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver names it."""

    index: int  # the driver's index (nvidia-smi's), before CUDA_VISIBLE_DEVICES
    uuid: str
    name: str  # e.g. "NVIDIA H100 80GB HBM3"
    memory_gb: float | None  # total memory in GB (1e9 bytes); None where the source does not say


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs found, where from, and what CUDA_VISIBLE_DEVICES left of them."""

    gpus: tuple[Gpu, ...] = ()
    source: str = "none"  # nvml | nvidia-smi | driver | ray | none
    where: str = "this machine"  # or "the Ray cluster"
    per_node: int | None = None  # GPUs on the largest node (Ray clusters)
    notes: tuple[str, ...] = field(default_factory=tuple)  # e.g. a CUDA_VISIBLE_DEVICES entry naming no GPU

    @property
    def count(self) -> int:
        return len(self.gpus)

    @property
    def accelerator_type(self) -> str | None:
        return accelerator_type(self.gpus[0].name) if self.gpus else None

    @property
    def memory_gb(self) -> float | None:
        """The smallest GPU's memory (a plan must fit the smallest); None when unknown."""
        known = [g.memory_gb for g in self.gpus if g.memory_gb]
        if known:
            return min(known)
        kind = self.accelerator_type
        return float(GPU_MEMORY_GB[kind]) if kind else None

    def describe(self) -> str:
        if not self.gpus:
            return f"no GPU on {self.where} ({self.source})" if self.source != "none" else f"no GPU found on {self.where}"
        names = sorted({g.name for g in self.gpus})
        mem = f", {self.memory_gb:.1f} GB" if self.memory_gb else ""
        return f"{self.count} x {' / '.join(names)}{mem} on {self.where} ({self.source})"


def accelerator_type(name: str) -> str | None:
    """Ray's accelerator type in a driver's model name: "NVIDIA H100 80GB HBM3" -> "H100"."""
    # the longest first: "L40S" before "L4"
    return next((k for k in sorted(GPU_MEMORY_GB, key=len, reverse=True) if k.lower() in name.lower()), None)


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def nvml_query(read: Callable[[Any], T], nvml: Any = None) -> T | None:
    """read(nvml) between nvmlInit and nvmlShutdown. None when pynvml is missing, NVML cannot start
    (NVMLError_LibraryNotFound / DriverNotLoaded: no driver this way) or the read fails (let nvidia-smi try)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py; GPU images only
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver this way
        return None
    try:
        return read(nvml)
    except Exception:  # noqa: BLE001 - something NVML cannot read
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def gpus_from_nvml(nvml: Any = None) -> list[Gpu] | None:
    """The GPUs NVML lists (None: no pynvml, or NVML cannot start: no driver)."""
    def read(nvml: Any) -> list[Gpu]:
        out = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            total = nvml.nvmlDeviceGetMemoryInfo(h).total
            out.append(Gpu(i, _text(nvml.nvmlDeviceGetUUID(h)), _text(nvml.nvmlDeviceGetName(h)), round(total / 1e9, 1)))
        return out

    return nvml_query(read, nvml)


def gpus_from_nvidia_smi(run: Callable[..., Any] = subprocess.run) -> list[Gpu] | None:
    """The GPUs `nvidia-smi` lists (None: not installed, or it failed)."""
    try:
        proc = run(SMI_QUERY, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    out = []
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        try:
            mem = round(float(parts[3]) * MIB / 1e9, 1)  # MiB, as nounits prints it
        except ValueError:
            mem = None
        out.append(Gpu(int(parts[0]), parts[1], ", ".join(parts[2:-1]), mem))
    return out


def gpus_from_driver(proc: Path | None = None) -> list[Gpu] | None:
    """The GPUs the NVIDIA driver lists under /proc (no memory figure there)."""
    proc = NVIDIA_PROC if proc is None else proc
    try:
        folders = sorted(p for p in proc.iterdir() if p.is_dir())
    except OSError:
        return None
    out = []
    for i, folder in enumerate(folders):
        info: dict[str, str] = {}
        with contextlib.suppress(OSError):
            for line in (folder / "information").read_text(errors="replace").splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    info[key.strip().lower()] = value.strip()
        out.append(Gpu(i, info.get("gpu uuid", ""), info.get("model", "NVIDIA GPU"), None))
    return out


def visible(gpus: list[Gpu], value: str | None) -> tuple[list[Gpu], list[str]]:
    """The GPUs CUDA_VISIBLE_DEVICES=`value` leaves, in its order, and a note for an entry naming none."""
    if value is None:
        return list(gpus), []
    if "MIG-" in value:  # MIG instances: their memory is a slice of a GPU that nothing here reads
        return list(gpus), [f"CUDA_VISIBLE_DEVICES={value!r} names MIG instances: planned as whole GPUs; give "
                            f"execution.placement.gpus and gpu_memory_gb for the instances"]
    out: list[Gpu] = []
    for entry in (e.strip() for e in value.split(",")):
        match = None
        if entry.lstrip("-").isdigit():
            match = next((g for g in gpus if g.index == int(entry)), None)
        elif entry.startswith("GPU-"):
            hits = [g for g in gpus if g.uuid.startswith(entry)]
            match = hits[0] if len(hits) == 1 else None
        if match is None or match in out:
            if entry:
                known = ", ".join(str(g.index) for g in gpus) or "none"
                return out, [f"CUDA_VISIBLE_DEVICES={value!r}: {entry!r} names no GPU of this machine (indices "
                             f"{known}); CUDA stops at it, so {len(out)} GPU{'s' if len(out) != 1 else ''} remain"]
            break
        out.append(match)
    return out, []


def detect_gpus(env: dict[str, str] | None = None, *, nvml: Any = None, run: Callable[..., Any] | None = None,
                proc: Path | None = None) -> GpuInventory:
    """This machine's GPUs that this process may use (see the module doc)."""
    env = os.environ if env is None else env
    for source, found in (("nvml", lambda: gpus_from_nvml(nvml)), ("nvidia-smi", lambda: gpus_from_nvidia_smi(run or subprocess.run)),
                          ("driver", lambda: gpus_from_driver(proc))):
        gpus = found()
        if gpus:
            kept, notes = visible(gpus, env.get("CUDA_VISIBLE_DEVICES"))
            if len(kept) < len(gpus) and not notes:
                notes = [f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r} leaves {len(kept)} of "
                         f"{len(gpus)} GPUs"]
            return GpuInventory(tuple(kept), source, notes=tuple(notes))
    return GpuInventory()


def ray_inventory(resources: dict[str, float], nodes: list[dict[str, Any]] | None = None) -> GpuInventory:
    """The GPUs of a Ray cluster from ray.cluster_resources() and (for the per-node count) ray.nodes()."""
    count = int(resources.get("GPU", 0))
    kind = next((k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), None)
    per_node = None
    if nodes:
        counts = [int((n.get("Resources") or {}).get("GPU", 0)) for n in nodes if n.get("Alive", True)]
        per_node = max(counts, default=0) or None
    mem = float(GPU_MEMORY_GB[kind]) if kind in GPU_MEMORY_GB else None
    gpus = tuple(Gpu(i, "", f"NVIDIA {kind}" if kind else "GPU", mem) for i in range(count))
    return GpuInventory(gpus, "ray", "the Ray cluster", per_node=per_node)


__all__ = ["GPU_MEMORY_GB", "Gpu", "GpuInventory", "accelerator_type", "detect_gpus", "gpus_from_driver",
           "gpus_from_nvidia_smi", "gpus_from_nvml", "ray_inventory", "visible"]
