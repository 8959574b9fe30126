"""Where each model of a run runs, on what and with how much memory, decided before any engine starts.

`esc-eval plan CONFIG --gpus N --gpu-mem GB` prints a plan; `esc-eval simulate` makes the same plan
at run time (sim/placement.py) and follows it. Pure: the GPUs are described, never probed.

Two ways to place the self-hosted (vLLM) models of a run:
- serve: each distinct model is a Ray Serve deployment with its own GPUs (tensor_parallel_size per
  replica) and autoscaling between min and max replicas; the pool's workers are CPU actors calling
  it through `serve/<model>` handles, sticky per dialogue. The default when the run has GPUs.
- in_process: the engines live in the pool's workers (the default on CPU, as measured). On GPUs the
  engines a worker holds at once (the role with one target at a time during the simulation, the
  judge during scoring) share its GPUs: each gets a `gpu_memory_utilization` share, so the second
  engine can start beside the first.
API and fake models are external: nothing to place.

Memory is estimated from the model's size (serve/data/registry.yaml `size`, or a local folder's
config.json and weight files): weights = parameters x dtype bytes, split over the tensor-parallel
GPUs; ENGINE_OVERHEAD_GB per GPU for activations, CUDA graphs and the CUDA context (an estimate:
vLLM measures its own at start); the rest of the engine's share is KV cache, reported as tokens
and as full `max_model_len` sequences. Refused, one line each: a model whose weights do not fit
its GPUs, a tensor-parallel size the GPUs (or a node, or a worker) cannot hold, models that do not
fit together on a worker, replicas the run's GPUs cannot start, an adapter rank over max_lora_rank.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from esc_eval.serve.config_base import ConfigModel
from esc_eval.serve.engine_args import COMMON_ENGINE
from esc_eval.serve.model_size import ModelFacts, dtype_bytes, model_facts
from esc_eval.serve.registry import Registry, RegistryError, VLLM_LORA_RANKS, default_registry, lora_rank

GB = 1e9
ENGINE_OVERHEAD_GB = 2.0  # per GPU per engine (estimate; see the module doc)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM's own default
# GPU memory by Ray's accelerator type (ray.util.accelerators); the smaller variant where a type has
# two (A100 40/80 GB, V100 16/32 GB): give gpu_memory_gb for the larger.
GPU_MEMORY_GB = {"T4": 16, "V100": 16, "A10G": 24, "L4": 24, "L40S": 48, "A100": 40, "H100": 80, "H200": 141}
PLACEMENT_ENV = "ESC_EVAL_PLACEMENT"  # JSON the pool's workers read: model as configured -> how to build it
SERVE_MODEL_FIELDS_SET_BY_PLAN = ("name", "accelerator", "accelerator_type", "gpu_memory_utilization")
Mode = Literal["in_process", "serve"]


class PlanError(ValueError):
    """The run cannot be placed: the first refusal (each is one line naming the models, sizes and GPUs)."""


class PlacementConfig(ConfigModel):
    """Where a run's self-hosted models run (`execution.placement`)."""

    mode: Literal["auto", "in_process", "serve"] = Field(
        "auto", description="'serve': every vLLM model a Ray Serve deployment with its own GPUs and autoscaling, the "
        "pool's workers CPU actors calling it (sticky per dialogue); 'in_process': engines inside the workers; "
        "'auto': serve when the run has GPUs, in_process on CPU.")
    gpus: int | None = Field(None, ge=0, description="GPUs the run may use; None = the GPUs on the Ray cluster when the "
                             "run starts (an autoscaling cluster may show none yet: then say how many).")
    gpu_memory_gb: float | None = Field(None, gt=0, description="Memory of one GPU in GB; None = from the cluster's "
                                        "accelerator type (A10G/L4 24, L40S 48, A100 40, H100 80, H200 141).")
    gpus_per_node: int | None = Field(None, ge=1, description="GPUs on one node: the largest tensor-parallel group "
                                      "(None = all of `gpus`).")
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1, description="Fraction of each "
                                          "GPU the engines of a worker (or a replica) may use together.")
    engine_overhead_gb: float = Field(ENGINE_OVERHEAD_GB, ge=0, description="GPU memory an engine needs per GPU beside "
                                      "weights and KV cache (activations, CUDA graphs, CUDA context): an estimate; "
                                      "vLLM's start-up log gives the real figure for a model.")
    accelerator_type: str | None = Field(None, description="GPU type the Serve replicas ask Ray for (e.g. A10G, H100); "
                                         "None = any GPU.")
    app_name: str = Field("esc-eval-run", description="Serve application of the run's deployments (serve mode).")
    keep_serving: bool = Field(False, description="Leave the run's deployments up after it (serve mode); by default "
                               "they are deleted when the run ends.")
    health_timeout_s: float = Field(1800, gt=0, description="How long the run waits for its deployments to be healthy.")
    replica_env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the Serve replicas "
                                        "(never secrets), e.g. VLLM_CPU_OMP_THREADS_BIND for several CPU replicas on a node.")
    models: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per model, as the config names it: serve/serve_app.py ServeModelConfig "
        "fields (min_replicas, max_replicas, tensor_parallel_size, max_num_seqs, max_model_len, max_lora_rank, "
        "target_ongoing_requests, upscale_delay_s, downscale_delay_s, replica_cpus, ...). tensor_parallel_size also "
        "applies to in-process engines.")

    @field_validator("models")
    @classmethod
    def _serve_fields(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from esc_eval.serve.serve_app import ServeModelConfig

        for model, fields in v.items():
            bad = sorted(set(fields) & set(SERVE_MODEL_FIELDS_SET_BY_PLAN))
            if bad:
                raise ValueError(f"{model}: {', '.join(bad)} are set by the plan (use placement.{bad[0]} instead)")
            ServeModelConfig(name=model, **{"accelerator": "gpu" if "tensor_parallel_size" in fields else "cpu", **fields})
        return v


@dataclass(frozen=True)
class Hardware:
    """The GPUs a run has (none: a CPU run)."""

    gpus: int = 0
    gpu_memory_gb: float | None = None
    gpus_per_node: int | None = None
    accelerator_type: str | None = None

    def describe(self) -> str:
        if not self.gpus:
            return "no GPUs (CPU)"
        node = f", {self.gpus_per_node} per node" if self.gpus_per_node and self.gpus_per_node != self.gpus else ""
        kind = f" {self.accelerator_type}" if self.accelerator_type else ""
        return f"{self.gpus} x{kind} {self.gpu_memory_gb:g} GB GPUs{node}"


@dataclass
class ModelUse:
    """One model as the run's config names it, and what it is used for."""

    model: str  # registry name or backend spec, as written
    options: dict[str, Any]  # the config's backend options (engine kwargs for vllm/)
    use: str  # role | target | judge
    phase: Literal["simulation", "scoring"] = "simulation"

    @property
    def ref_key(self) -> str:
        return ref_key(self.model, self.options)


def ref_key(model: str, options: dict[str, Any] | None = None) -> str:
    """The identity of a configured model (what the placement map is keyed by)."""
    return model + "|" + json.dumps(options or {}, sort_keys=True, default=str)


@dataclass
class EnginePlan:
    """One engine (in-process) or deployment (serve), or an external model, and where it runs."""

    name: str  # registry name or spec
    refs: list[str]  # ref_keys of the configured models it serves
    uses: list[str]
    where: str  # "in-process" | "serve deployment" | "external (<backend>)"
    device: str  # "cpu" | "gpu" | "-"
    size_source: str = "-"  # registry | config.json | unknown | -
    params_b: float | None = None
    dtype: str | None = None
    tensor_parallel_size: int = 1
    replicas: tuple[int, int] | None = None  # serve: (min, max)
    gpus: int = 0  # GPUs of one engine / one replica
    weights_gb: float | None = None
    kv_gb: float | None = None  # one engine / one replica
    kv_tokens: int | None = None
    kv_sequences: float | None = None  # full max_model_len sequences the KV cache holds
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    engine: dict[str, Any] = field(default_factory=dict)  # in-process: kwargs the plan adds
    serve: dict[str, Any] = field(default_factory=dict)  # serve: ServeModelConfig fields
    notes: list[str] = field(default_factory=list)


@dataclass
class Plan:
    mode: Mode
    hardware: Hardware
    engines: list[EnginePlan]
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    app_name: str = "esc-eval-run"
    kv_cache_gib: int = 2  # CPU replicas' VLLM_CPU_KVCACHE_SPACE

    @property
    def ok(self) -> bool:
        return not self.refusals

    def check(self) -> "Plan":
        """Raise PlanError with the first refusal (and how many more) before anything starts."""
        if self.refusals:
            more = f" (and {len(self.refusals) - 1} more: run `esc-eval plan` on the config)" if len(self.refusals) > 1 else ""
            raise PlanError(self.refusals[0] + more)
        return self

    def placement_map(self) -> dict[str, dict[str, Any]]:
        """What the pool's workers read (PLACEMENT_ENV): configured model -> its engine kwargs or its
        Serve handle. Placement never changes a model's options, so dialogue ids and fingerprints stay."""
        out: dict[str, dict[str, Any]] = {}
        for e in self.engines:
            for ref in e.refs:
                if e.where == "serve deployment":
                    out[ref] = {"serve": {"spec": f"serve/{e.serve['name']}", "options": {"app_name": self.app_name}}}
                elif e.engine:
                    out[ref] = {"engine": dict(e.engine)}
        return out

    def serve_models(self) -> list[dict[str, Any]]:
        """ServeModelConfig fields of every deployment (serve mode)."""
        return [dict(e.serve) for e in self.engines if e.where == "serve deployment"]

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "hardware": asdict(self.hardware), "engines": [asdict(e) for e in self.engines],
                "refusals": list(self.refusals), "notes": list(self.notes), "app_name": self.app_name}

    def lines(self) -> list[str]:
        """The plan as text: one line per model, then refusals and notes."""
        out = [f"plan: {self.mode.replace('_', '-')} on {self.hardware.describe()}"]
        for e in self.engines:
            out.append(f"- {e.name} [{', '.join(e.uses)}]: {_where(e)}")
            mem = _memory(e)
            if mem:
                out.append(f"    {mem}")
            out.extend(f"    note: {n}" for n in e.notes)
        out.extend(f"refused: {r}" for r in self.refusals)
        out.extend(f"note: {n}" for n in self.notes)
        out.append("ok: nothing refused" if self.ok else f"{len(self.refusals)} refused: nothing was started")
        return out


def _where(e: EnginePlan) -> str:
    if e.where.startswith("external"):
        return e.where
    if e.where == "serve deployment":
        lo, hi = e.replicas or (1, 1)
        on = f"{e.gpus} GPU{'s' if e.gpus != 1 else ''} per replica" if e.device == "gpu" else "CPU"
        return f"Serve deployment {e.serve.get('name')}, {lo}-{hi} replicas, {on}"
    on = f"{e.gpus} GPU{'s' if e.gpus != 1 else ''} of each worker" if e.device == "gpu" else "CPU"
    return f"in-process engine in each worker, {on}"


def _memory(e: EnginePlan) -> str:
    parts = []
    if e.params_b is not None:
        parts.append(f"{e.params_b:g}B parameters ({e.size_source})")
    if e.weights_gb is not None:
        parts.append(f"weights {e.weights_gb:.1f} GB {e.dtype}" + (f" ({e.weights_gb / e.tensor_parallel_size:.1f} per GPU, "
                                                                    f"tensor_parallel_size {e.tensor_parallel_size})"
                                                                    if e.tensor_parallel_size > 1 else ""))
    if e.kv_gb is not None:
        per = "replica" if e.where == "serve deployment" else "engine"
        seqs = f" = {e.kv_sequences:.1f} x {e.max_model_len:,}-token sequences" if e.kv_sequences is not None else ""
        parts.append(f"KV cache {e.kv_gb:.1f} GB per {per} ({e.kv_tokens:,} tokens{seqs})")
    if e.gpu_memory_utilization is not None:
        parts.append(f"gpu_memory_utilization {e.gpu_memory_utilization:g}")
    return "; ".join(parts)


# ------------------------------------------------------------------ the planner
@dataclass
class _Engine:
    key: str
    facts: ModelFacts
    options: dict[str, Any]
    refs: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    phases: set[str] = field(default_factory=set)
    models: list[str] = field(default_factory=list)  # as configured


def _engine_key(facts: ModelFacts, model: str, options: dict[str, Any]) -> str:
    # Models naming the same weights with the same options share one engine (sim/participants.py does the same).
    return (facts.weights or facts.name if facts.backend == "vllm" else model) + "|" + json.dumps(
        options, sort_keys=True, default=str)


def _tp(options: dict[str, Any], overrides: dict[str, Any]) -> int:
    return int(overrides.get("tensor_parallel_size") or options.get("tensor_parallel_size") or 1)


def plan_run(uses: list[ModelUse], hardware: Hardware, placement: PlacementConfig | None = None, *,
             workers: int = 1, gpus_per_worker: float = 0.0, cpu_kv_cache_gib: float = 2.0,
             cpu_dtype: str = "float32", registry: Registry | None = None) -> Plan:
    """The plan for a run's models (see the module doc). `workers` and `gpus_per_worker` are the pool's
    (execution.workers, execution.num_gpus_per_worker); `cpu_dtype` the dtype CPU engines resolve to."""
    placement = placement or PlacementConfig()
    registry = registry or default_registry()
    mode: Mode = ("serve" if hardware.gpus else "in_process") if placement.mode == "auto" else placement.mode  # type: ignore[assignment]
    plan = Plan(mode=mode, hardware=hardware, engines=[], app_name=placement.app_name)
    engines: dict[str, _Engine] = {}
    for u in uses:
        facts = model_facts(u.model, registry)
        if facts.error:
            plan.refusals.append(f"{u.use} {u.model}: {facts.error}")
            continue
        key = _engine_key(facts, u.model, u.options)
        eng = engines.setdefault(key, _Engine(key, facts, dict(u.options)))
        if u.ref_key not in eng.refs:
            eng.refs.append(u.ref_key)
            eng.models.append(u.model)
        if u.use not in eng.uses:
            eng.uses.append(u.use)
        eng.phases.add(u.phase)
    if hardware.gpus and not hardware.gpu_memory_gb:
        plan.refusals.append(f"the run has {hardware.gpus} GPUs of unknown memory: set execution.placement.gpu_memory_gb "
                             f"(or --gpu-mem), or an accelerator_type Ray knows ({', '.join(GPU_MEMORY_GB)})")
        return plan
    self_hosted = [e for e in engines.values() if e.facts.backend == "vllm"]
    for e in engines.values():
        if e.facts.backend != "vllm":
            plan.engines.append(EnginePlan(name=e.facts.name, refs=e.refs, uses=e.uses, where=f"external ({e.facts.backend})",
                                           device="-"))
    if mode == "serve":
        _plan_serve(plan, self_hosted, placement, cpu_kv_cache_gib, cpu_dtype)
    else:
        _plan_in_process(plan, self_hosted, placement, workers, gpus_per_worker, cpu_kv_cache_gib, cpu_dtype)
    for e in self_hosted:
        _check_adapters(plan, e, placement, mode)
    return plan


def _dtype(options: dict[str, Any], gpu: bool, cpu_dtype: str) -> str:
    requested = str(options.get("dtype") or "auto")
    return ("bfloat16" if gpu else cpu_dtype) if requested == "auto" else requested


def _weights_bytes(e: _Engine, dtype: str) -> float | None:
    f = e.facts
    if f.weights_bytes_stored and f.stored_dtype_bytes:
        return f.weights_bytes_stored * (dtype_bytes(dtype) or 2) / f.stored_dtype_bytes
    if f.size is not None:
        return f.size.params_b * 1e9 * (dtype_bytes(dtype) or 2)
    return None


def _max_model_len(e: _Engine, overrides: dict[str, Any], default: int) -> int:
    entry = e.facts.entry
    return int(overrides.get("max_model_len") or e.options.get("max_model_len") or (entry.max_model_len if entry else None)
               or default)


def _sizes(e: EnginePlan, f: ModelFacts, weights: float | None, dtype: str) -> None:
    e.size_source, e.dtype = f.size_source, dtype
    e.params_b = f.size.params_b if f.size else None
    e.weights_gb = round(weights / GB, 2) if weights is not None else None


def _kv(e: EnginePlan, f: ModelFacts, kv_bytes: float, dtype: str) -> None:
    e.kv_gb = round(kv_bytes / GB, 2)
    if f.size is not None:
        e.kv_tokens = int(kv_bytes // f.size.kv_bytes_per_token(dtype_bytes(dtype) or 2))
        if e.max_model_len:
            e.kv_sequences = round(e.kv_tokens / e.max_model_len, 1)


def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def _describe(e: _Engine, weights: float | None, dtype: str) -> str:
    size = f"{e.facts.size.params_b:g}B parameters, " if e.facts.size else ""
    return f"{e.facts.name} ({size}{_gb(weights)} in {dtype})" if weights is not None else e.facts.name


def _tp_refusals(plan: Plan, e: _Engine, tp: int, holder: str, holder_gpus: float) -> bool:
    """Refuse a tensor-parallel size the GPUs cannot hold; True when refused."""
    size = e.facts.size
    if tp > holder_gpus:
        plan.refusals.append(f"model {e.facts.name}: tensor_parallel_size {tp} needs {tp} GPUs; {holder} has {holder_gpus:g}")
        return True
    if size is not None and size.attention_heads % tp:
        plan.refusals.append(f"model {e.facts.name}: tensor_parallel_size {tp} does not divide its {size.attention_heads} "
                             f"attention heads (vLLM refuses it); use a divisor of {size.attention_heads}")
        return True
    return False


def _plan_serve(plan: Plan, engines: list[_Engine], placement: PlacementConfig, cpu_kv_cache_gib: float,
                cpu_dtype: str) -> None:
    from esc_eval.serve.serve_app import ServeModelConfig

    hw = plan.hardware
    gpu = hw.gpus > 0
    plan.kv_cache_gib = max(1, int(cpu_kv_cache_gib))
    node_gpus = hw.gpus_per_node or hw.gpus
    names: set[str] = set()
    need_min = need_max = 0
    for e in engines:
        overrides = next((placement.models[m] for m in e.models if m in placement.models), {})
        name = e.facts.entry.name if e.facts.entry else None
        if name is None:
            plan.refusals.append(f"model {e.facts.name}: serve mode deploys registry models only; add it to the registry "
                                 f"(or a registry entry's local_path) or use execution.placement.mode: in_process")
            continue
        if name in names:
            plan.refusals.append(f"model {name}: configured twice with different options; serve mode deploys one "
                                 f"deployment per registry model (give both uses the same options)")
            continue
        names.add(name)
        dtype = _dtype({**e.options, **overrides}, gpu, cpu_dtype)
        tp = _tp(e.options, overrides) if gpu else 1
        fields: dict[str, Any] = {"name": name, **overrides}
        fields.setdefault("max_model_len", _max_model_len(e, overrides, COMMON_ENGINE["max_model_len"]))
        if "max_num_seqs" in e.options:
            fields.setdefault("max_num_seqs", e.options["max_num_seqs"])
        if dtype in ("float32", "bfloat16", "float16") and ("dtype" in e.options or "dtype" in overrides):
            fields["dtype"] = dtype
        if gpu:
            fields.update(accelerator="gpu", tensor_parallel_size=tp,
                          gpu_memory_utilization=placement.gpu_memory_utilization)
            if placement.accelerator_type or hw.accelerator_type:
                fields["accelerator_type"] = placement.accelerator_type or hw.accelerator_type
        cfg = ServeModelConfig(**fields)
        weights = _weights_bytes(e, dtype)
        ep = EnginePlan(name=name, refs=e.refs, uses=e.uses, where="serve deployment", device="gpu" if gpu else "cpu",
                        tensor_parallel_size=tp, replicas=(cfg.min_replicas, cfg.max_replicas), gpus=tp if gpu else 0,
                        max_model_len=cfg.max_model_len, serve=cfg.model_dump(exclude_defaults=True) | {"name": name})
        _sizes(ep, e.facts, weights, dtype)
        plan.engines.append(ep)
        if not gpu:
            _kv(ep, e.facts, plan.kv_cache_gib * 2**30, dtype)
            continue
        need_min += cfg.min_replicas * tp
        need_max += cfg.max_replicas * tp
        if _tp_refusals(plan, e, tp, "a node" if hw.gpus_per_node else "the run", node_gpus):
            continue
        if weights is None:
            plan.refusals.append(f"model {name}: size unknown (no registry `size`, no local config.json); cannot plan "
                                 f"its GPU memory")
            continue
        budget = placement.gpu_memory_utilization * hw.gpu_memory_gb * GB  # per GPU
        kv_per_gpu = budget - weights / tp - placement.engine_overhead_gb * GB
        ep.gpu_memory_utilization = placement.gpu_memory_utilization
        if kv_per_gpu <= 0:
            plan.refusals.append(
                f"model {_describe(e, weights, dtype)} does not fit on {tp} x {hw.gpu_memory_gb:g} GB GPU"
                f"{'s' if tp > 1 else ''} ({_gb(budget)} usable per GPU at gpu_memory_utilization "
                f"{placement.gpu_memory_utilization:g}, {placement.engine_overhead_gb:g} GB engine overhead): raise "
                f"placement.models.{name}.tensor_parallel_size (now {tp})")
            continue
        _kv(ep, e.facts, kv_per_gpu * tp, dtype)
        _one_sequence(plan, ep, e)
    if gpu and need_min > hw.gpus:
        plan.refusals.append(f"the deployments' min_replicas need {need_min} GPUs ("
                             + ", ".join(f"{p.name} {p.replicas[0]} x {p.gpus}" for p in plan.engines if p.replicas)
                             + f"); the run has {hw.gpus}")
    elif gpu and need_max > hw.gpus:
        plan.notes.append(f"at max_replicas the deployments would need {need_max} GPUs; the run has {hw.gpus}, so "
                          f"autoscaling stops short of some maxima")


def _one_sequence(plan: Plan, ep: EnginePlan, e: _Engine) -> None:
    if ep.kv_tokens is not None and ep.max_model_len and ep.kv_tokens < ep.max_model_len:
        plan.refusals.append(f"model {ep.name}: {ep.kv_gb:.1f} GB of KV cache holds {ep.kv_tokens:,} tokens, less than "
                             f"one {ep.max_model_len:,}-token sequence (vLLM refuses to start): lower max_model_len, or "
                             f"give it more GPU memory")


def _plan_in_process(plan: Plan, engines: list[_Engine], placement: PlacementConfig, workers: int,
                     gpus_per_worker: float, cpu_kv_cache_gib: float, cpu_dtype: str) -> None:
    hw = plan.hardware
    gpu = hw.gpus > 0
    if gpu and gpus_per_worker <= 0:
        plan.refusals.append(f"in-process engines on {hw.describe()} need GPUs in the workers: set "
                             f"execution.num_gpus_per_worker (or placement mode serve)")
        return
    if gpu and gpus_per_worker > 1 and gpus_per_worker != int(gpus_per_worker):
        plan.refusals.append(f"execution.num_gpus_per_worker {gpus_per_worker:g}: above 1 it must be a whole number")
        return
    if gpu and workers * gpus_per_worker > hw.gpus:
        plan.refusals.append(f"execution.workers {workers} x num_gpus_per_worker {gpus_per_worker:g} need "
                             f"{workers * gpus_per_worker:g} GPUs; the run has {hw.gpus}")
    plans: dict[str, EnginePlan] = {}
    for e in engines:
        overrides = next((placement.models[m] for m in e.models if m in placement.models), {})
        dtype = _dtype(e.options, gpu, cpu_dtype)
        tp = _tp(e.options, overrides)
        ep = EnginePlan(name=e.facts.name, refs=e.refs, uses=e.uses, where="in-process", device="gpu" if gpu else "cpu",
                        tensor_parallel_size=tp, gpus=tp if gpu else 0,
                        max_model_len=_max_model_len(e, overrides, COMMON_ENGINE["max_model_len"]))
        _sizes(ep, e.facts, _weights_bytes(e, dtype), dtype)
        plans[e.key] = ep
        plan.engines.append(ep)
        if not gpu:
            if tp != 1:
                plan.refusals.append(f"model {e.facts.name}: tensor_parallel_size {tp} needs GPUs; this run has none")
            _kv(ep, e.facts, cpu_kv_cache_gib * 2**30, dtype)
            if ep.kv_tokens is not None and ep.kv_tokens < ep.max_model_len:
                ep.notes.append(f"VLLM_CPU_KVCACHE_SPACE {cpu_kv_cache_gib:g} GiB holds {ep.kv_tokens:,} tokens, less than "
                                f"one {ep.max_model_len:,}-token sequence: raise it (execution.env) or lower max_model_len")
            continue
        if tp > 1 or "tensor_parallel_size" in overrides:
            ep.engine["tensor_parallel_size"] = tp
    if not gpu or any(p.weights_gb is None for p in plans.values()):
        for p in plans.values():
            if gpu and p.weights_gb is None:
                plan.refusals.append(f"model {p.name}: size unknown (no registry `size`, no local config.json); cannot "
                                     f"plan its GPU memory")
        return
    for e in engines:
        _tp_refusals(plan, e, plans[e.key].tensor_parallel_size, "a worker", max(gpus_per_worker, 1) if gpus_per_worker >= 1 else 1)
    _share_worker_gpus(plan, engines, plans, placement, gpus_per_worker)


def _share_worker_gpus(plan: Plan, engines: list[_Engine], plans: dict[str, EnginePlan], placement: PlacementConfig,
                       gpus_per_worker: float) -> None:
    """gpu_memory_utilization for each engine of a worker. A worker holds the role's engine with one
    target's at a time (sim/participants.py releases a target's engine before the next starts), and
    during scoring the judge's. Every engine spreads over its tensor-parallel GPUs starting at the
    worker's first, so that GPU holds a share of each: the budget below is per GPU."""
    hw = plan.hardware
    mem = hw.gpu_memory_gb * GB
    budget = placement.gpu_memory_utilization * mem * min(gpus_per_worker, 1.0)

    def fixed(key: str) -> float:  # weights + overhead on the first GPU
        p = plans[key]
        return p.weights_gb * GB / p.tensor_parallel_size + placement.engine_overhead_gb * GB

    def kv_rate(key: str) -> float:  # KV bytes per token on one GPU
        e = next(x for x in engines if x.key == key)
        per = e.facts.size.kv_bytes_per_token(dtype_bytes(plans[key].dtype) or 2) if e.facts.size else 1
        return per / plans[key].tensor_parallel_size

    role = next((e.key for e in engines if "role" in e.uses), None)
    targets = [e.key for e in engines if "target" in e.uses and e.key != role]
    share: dict[str, float] = {}
    if role is not None:
        # The role stays while targets change: its share is what it gets beside the most demanding target.
        splits = []
        for t in targets:
            rest = budget - fixed(role) - fixed(t)
            splits.append(fixed(role) + max(rest, 0) * kv_rate(role) / (kv_rate(role) + kv_rate(t)))
        share[role] = min(min(splits), budget) if splits else budget
    for t in targets:
        share[t] = budget - share.get(role, 0.0)
    for e in engines:
        share.setdefault(e.key, budget)  # the judge alone (or a model used by nothing above)
    for e in engines:
        p, s = plans[e.key], share[e.key]
        kv_per_gpu = s - fixed(e.key)
        if s > 0:
            p.gpu_memory_utilization = round(s / mem, 3)
            p.engine["gpu_memory_utilization"] = p.gpu_memory_utilization
        _kv(p, e.facts, max(kv_per_gpu, 0) * p.tensor_parallel_size, p.dtype)
        if kv_per_gpu > 0 and (p.kv_tokens is None or p.kv_tokens >= p.max_model_len):
            continue
        # the engines this one shares the worker with when it is short: the role with a target
        if e.key == role:
            together = [p] + ([max((plans[t] for t in targets), key=lambda x: x.weights_gb)] if targets else [])
        elif e.key in targets and role is not None:
            together = [plans[role], p]
        else:
            together = [p]
        names = " and ".join(f"{q.name} ({q.weights_gb:.1f} GB weights on {q.tensor_parallel_size} GPU"
                             f"{'s' if q.tensor_parallel_size > 1 else ''})" for q in together)
        held = (f"{gpus_per_worker:g} x {hw.gpu_memory_gb:g} GB GPU" if gpus_per_worker >= 1
                else f"{gpus_per_worker:g} of a {hw.gpu_memory_gb:g} GB GPU")
        refusal = (f"{'models ' + names + ' do' if len(together) > 1 else 'model ' + names + ' does'} not fit "
                   f"{'together ' if len(together) > 1 else ''}with one {p.max_model_len:,}-token sequence of KV cache "
                   f"each on a worker's {held} ({_gb(budget)} usable per GPU, {placement.engine_overhead_gb:g} GB overhead per "
                   f"engine): use placement mode serve (each model on its own GPUs) or give each worker more GPUs")
        if refusal not in plan.refusals:
            plan.refusals.append(refusal)


def _check_adapters(plan: Plan, e: _Engine, placement: PlacementConfig, mode: Mode) -> None:
    """An adapter rank over max_lora_rank is refused; an explicit max_lora_rank is what is checked
    (left unset, it is sized from the adapters themselves)."""
    entry = e.facts.entry
    adapters = dict(entry.adapters) if entry else {}
    adapters.update({k: str(v) for k, v in (e.options.get("adapters") or {}).items()})
    if not adapters:
        return
    overrides = next((placement.models[m] for m in e.models if m in placement.models), {})
    explicit = overrides.get("max_lora_rank") if mode == "serve" else e.options.get("max_lora_rank")
    ranks: dict[str, int] = {}
    for name, path in adapters.items():
        p = Path(path).expanduser()
        if not p.is_dir():
            if mode == "in_process":
                plan.refusals.append(f"model {e.facts.name}: adapter {name!r} folder {path} does not exist (the base "
                                     f"model is never used instead)")
                return
            continue
        r = lora_rank(p)
        if r:
            ranks[name] = r
    unknown = sorted(set(adapters) - set(ranks))
    ep = next((x for x in plan.engines if set(x.refs) == set(e.refs)), None)
    if ep is None:
        return  # refused already (e.g. not deployable)
    if unknown:
        ep.notes.append(f"LoRA rank unknown for {len(unknown)} adapter(s) not in a local folder ({', '.join(unknown[:3])}"
                        f"{', ...' if len(unknown) > 3 else ''}): checked when the replica loads them")
    if not ranks:
        return
    top_name, top = max(ranks.items(), key=lambda kv: kv[1])
    if top > VLLM_LORA_RANKS[-1]:
        plan.refusals.append(f"model {e.facts.name}: adapter {top_name!r} has LoRA rank {top}, over vLLM's largest "
                             f"max_lora_rank {VLLM_LORA_RANKS[-1]}")
        return
    where = f"placement.models.{e.models[0]}.max_lora_rank" if mode == "serve" else "options.max_lora_rank"
    if explicit is not None and top > int(explicit):
        plan.refusals.append(f"model {e.facts.name}: adapter {top_name!r} has LoRA rank {top}, over max_lora_rank "
                             f"{explicit} ({where}); raise it to {next(r for r in VLLM_LORA_RANKS if r >= top)}")
    elif explicit is None and mode == "serve":
        ep.serve["max_lora_rank"] = next(r for r in VLLM_LORA_RANKS if r >= top)


def hardware_for(gpus: int, gpu_memory_gb: float | None = None, gpus_per_node: int | None = None,
                 accelerator_type: str | None = None) -> Hardware:
    """Hardware from what is known: the memory from the accelerator type when not given."""
    if gpus and gpu_memory_gb is None and accelerator_type:
        gpu_memory_gb = GPU_MEMORY_GB.get(accelerator_type)
    return Hardware(gpus=gpus, gpu_memory_gb=gpu_memory_gb if gpus else None,
                    gpus_per_node=gpus_per_node, accelerator_type=accelerator_type)


def placement_from_env(env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The placement map a worker was given (empty: build every model as configured)."""
    raw = (os.environ if env is None else env).get(PLACEMENT_ENV, "")
    try:
        return json.loads(raw) if raw else {}
    except ValueError as e:
        raise RegistryError(f"{PLACEMENT_ENV}: not valid JSON ({e})") from None
