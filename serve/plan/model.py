"""What a placement plan is made of (serve/plan/planner.py makes it): the config (`execution.placement`),
the hardware, the models of a run, and the plan as data and as text."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from esc_eval.serve.app.application import KV_FLOOR_OFF, TENSOR_PARALLEL_SIZE
from esc_eval.serve.config.base import ConfigModel
from esc_eval.serve.devices.cpu import DEFAULT_KV_CACHE_GIB
from esc_eval.serve.devices.gpus import GPU_MEMORY_GB
from esc_eval.serve.registry.entry import RegistryError

GB = 1e9
ENGINE_OVERHEAD_GB = 2.0  # per GPU per engine (estimate; see serve/plan/planner.py)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM's own default
POOL_WORKERS = 1  # the pool's worker actors unless set (sim/pool/config.py ExecutionConfig.workers); the plan reads the same
PLACEMENT_ENV = "ESC_EVAL_PLACEMENT"  # JSON the pool's workers read: model as configured -> how to build it
SERVE_MODEL_FIELDS_SET_BY_PLAN = ("name", "accelerator", "accelerator_type", "gpu_memory_utilization", "gpu_fraction",
                                  "expected_kv_tokens", "kv_floor")
Mode = Literal["in_process", "serve"]


class PlanError(ValueError):
    """The run cannot be placed: the first refusal (each is one line naming the models, sizes and GPUs)."""


class PlacementConfig(ConfigModel):
    """Where a run's self-hosted models run (`execution.placement`)."""

    mode: Literal["auto", "in_process", "serve"] = Field(
        "auto", description="'serve': every vLLM model a Ray Serve deployment, packed onto the GPUs by memory (several "
        "on one GPU, or whole GPUs and tensor parallelism where a model needs them), the pool's workers CPU actors "
        "calling them (sticky per dialogue); 'in_process': engines inside the workers, targets one after another; "
        "'auto': serve when the run has GPUs and its models fit side by side, else in_process.")
    gpus: int | None = Field(None, ge=0, description="GPUs the run may use; None = those found when the run starts "
                             "(NVML or nvidia-smi on this machine, CUDA_VISIBLE_DEVICES respected; the Ray cluster's "
                             "when joining one: an autoscaling cluster may show none yet, then say how many).")
    gpu_memory_gb: float | None = Field(None, gt=0, description="Memory of one GPU in GB; None = as found (NVML, "
                                        "nvidia-smi) or from the accelerator type (A10G/L4 24, L40S 48, A100 40, H100 80, "
                                        "H200 141).")
    gpus_per_node: int | None = Field(None, ge=1, description="GPUs on one node: the largest tensor-parallel group "
                                      "(None = as found on the Ray cluster, else all of `gpus`).")
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1, description="Fraction of each "
                                          "GPU the engines on it may use together (split among the engines or replicas "
                                          "sharing it: each gets its share as its own gpu_memory_utilization).")
    engine_overhead_gb: float = Field(ENGINE_OVERHEAD_GB, ge=0, description="GPU memory an engine needs per GPU beside "
                                      "weights and KV cache (activations, CUDA graphs, CUDA context): an estimate; "
                                      "vLLM's start-up log gives the real figure for a model.")
    min_kv_sequences: float = Field(1.0, gt=0, description="KV cache every engine or replica must hold at least, in "
                                    "max_model_len sequences (vLLM refuses to start below one): the floor of the packing; "
                                    "the rest of each GPU goes to KV cache as well.")
    accelerator_type: str | None = Field(None, description="GPU type the Serve replicas ask Ray for (e.g. A10G, H100); "
                                         "None = any GPU.")
    app_name: str = Field("esc-eval-run", description="Serve application of the run's deployments (serve mode).")
    keep_serving: bool = Field(False, description="Leave the run's deployments up after it (serve mode); by default "
                               "they are deleted when the run ends.")
    health_timeout_s: float = Field(1800, gt=0, description="How long the run waits for its deployments to be healthy.")
    kv_floor: float = Field(0.5, ge=0, lt=1, description="A Serve replica sharing a GPU whose KV cache comes out below "
                            "this fraction of the plan's fails its start, naming both figures, and Serve starts it again "
                            "(replicas that profile the GPU's memory at once take each other's: serve/engines/kv_budget.py); "
                            "0 = only a warning in the replica's log.")
    usage_interval_s: float = Field(2.0, gt=0, description="How often the run samples its deployments' replicas "
                                    "(serve.status()) to charge GPU-seconds to what held the GPUs.")
    replica_env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the Serve replicas "
                                        "(never secrets), e.g. VLLM_CPU_OMP_THREADS_BIND for several CPU replicas on a node.")
    models: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per model, as the config names it: serve/app/application.py ServeModelConfig "
        "fields (min_replicas, max_replicas, tensor_parallel_size, max_num_seqs, max_model_len, max_lora_rank, "
        "target_ongoing_requests, upscale_delay_s, downscale_delay_s, replica_cpus, ...). Replicas or a tensor-parallel "
        "size set here are kept as given; tensor_parallel_size also applies to in-process engines.")

    @field_validator("models")
    @classmethod
    def _serve_fields(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from esc_eval.serve.app.application import ServeModelConfig

        for model, fields in v.items():
            bad = sorted(set(fields) & set(SERVE_MODEL_FIELDS_SET_BY_PLAN))
            if bad:
                raise ValueError(f"{model}: {', '.join(bad)} are set by the plan (use placement.{bad[0]} instead)")
            ServeModelConfig(name=model, **{"accelerator": "gpu" if "tensor_parallel_size" in fields else "cpu", **fields})
        return v


@dataclass(frozen=True)
class Hardware:
    """The GPUs a run has (none: a CPU run), and how they were found."""

    gpus: int = 0
    gpu_memory_gb: float | None = None
    gpus_per_node: int | None = None
    accelerator_type: str | None = None
    source: str = "described"  # described (config, --gpus) | nvml | nvidia-smi | driver | ray | none
    seen: int | None = None  # GPUs found on `seen_where` (None: not probed)
    seen_where: str = "this machine"
    seen_text: str = ""  # what was found, in words (for warnings)
    notes: tuple[str, ...] = ()  # what detection noticed (e.g. a CUDA_VISIBLE_DEVICES entry naming no GPU)
    problem: str | None = None  # this machine contradicting itself (serve/devices/accelerator.py): a refusal

    def describe(self) -> str:
        if not self.gpus:
            return "no GPUs (CPU)"
        node = f", {self.gpus_per_node} per node" if self.gpus_per_node and self.gpus_per_node != self.gpus else ""
        kind = f" {self.accelerator_type}" if self.accelerator_type else ""
        found = f" (found by {self.source})" if self.source not in ("described", "none") else ""
        return f"{self.gpus} x{kind} {self.gpu_memory_gb:g} GB GPU{'s' if self.gpus != 1 else ''}{node}{found}"


@dataclass
class ModelUse:
    """One model as the run's config names it, and what it is used for."""

    model: str  # registry name or backend spec, as written
    options: dict[str, Any]  # the config's backend options (engine kwargs for vllm/)
    use: str  # role | target | judge | served
    phase: Literal["simulation", "scoring"] = "simulation"

    @property
    def ref_key(self) -> str:
        return ref_key(self.model, self.options)


def ref_key(model: str, options: dict[str, Any] | None = None) -> str:
    """The identity of a configured model (what the placement map is keyed by)."""
    return model + "|" + json.dumps(options or {}, sort_keys=True, default=str)


def model_of(ref: str) -> str:
    """The configured model name of a ref_key."""
    return ref.split("|", 1)[0]


@dataclass
class EnginePlan:
    """One engine (in-process) or deployment (serve), or an external model, and where it runs."""

    name: str  # registry name or spec (serve: the deployment's model id)
    refs: list[str]  # ref_keys of the configured models it serves
    uses: list[str]
    where: str  # "in-process" | "serve deployment" | "external (<backend>)"
    device: str  # "cpu" | "gpu" | "-"
    phase: str = "simulation"
    size_source: str = "-"  # registry | config.json | unknown | -
    params_b: float | None = None
    dtype: str | None = None
    tensor_parallel_size: int = TENSOR_PARALLEL_SIZE
    replicas: tuple[int, int] | None = None  # serve: (min, max)
    gpus: int = 0  # whole GPUs of one engine / one replica
    gpu_fraction: float | None = None  # serve: share of one GPU a replica reserves (several replicas per GPU)
    weights_gb: float | None = None
    kv_gb: float | None = None  # one engine / one replica
    kv_tokens: int | None = None
    kv_sequences: float | None = None  # full max_model_len sequences the KV cache holds
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    engine: dict[str, Any] = field(default_factory=dict)  # in-process: kwargs the plan adds
    serve: dict[str, Any] = field(default_factory=dict)  # serve: ServeModelConfig fields
    notes: list[str] = field(default_factory=list)

    @property
    def gpus_per_replica(self) -> float:
        """GPUs one replica (or engine) holds: its fraction of a shared GPU, else its whole GPUs."""
        return self.gpu_fraction if self.gpu_fraction is not None else float(self.gpus)


@dataclass
class Plan:
    mode: Mode
    hardware: Hardware
    engines: list[EnginePlan]
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    app_name: str = "esc-eval-run"
    kv_cache_gib: int = DEFAULT_KV_CACHE_GIB  # CPU replicas' VLLM_CPU_KVCACHE_SPACE
    execution: dict[str, Any] = field(default_factory=dict)  # execution fields the plan sets (workers, GPUs per worker)
    layout: dict[str, list[list[str]]] = field(default_factory=dict)  # serve: per phase, per GPU, "model share"
    fits_at_once: bool = True  # serve: False when the models do not fit side by side (auto falls back to in_process)

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

    def serve_models(self, kv_floor: float = KV_FLOOR_OFF) -> list[dict[str, Any]]:
        """ServeModelConfig fields of every deployment (serve mode); a GPU deployment's replicas are told the
        KV tokens the plan gave each, and those sharing a GPU the `kv_floor` their start must reach."""
        out = []
        for e in self.engines:
            if e.where != "serve deployment":
                continue
            fields = dict(e.serve)
            if e.device == "gpu" and e.kv_tokens:
                fields["expected_kv_tokens"] = int(e.kv_tokens)
                fields["kv_floor"] = kv_floor if e.gpu_fraction is not None else KV_FLOOR_OFF
            out.append(fields)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "hardware": asdict(self.hardware), "engines": [asdict(e) for e in self.engines],
                "refusals": list(self.refusals), "notes": list(self.notes), "warnings": list(self.warnings),
                "execution": dict(self.execution), "layout": self.layout, "app_name": self.app_name}


def hardware_for(gpus: int, gpu_memory_gb: float | None = None, gpus_per_node: int | None = None,
                 accelerator_type: str | None = None, **found: Any) -> Hardware:
    """Hardware from what is known: the memory from the accelerator type when not given."""
    if gpus and gpu_memory_gb is None and accelerator_type:
        gpu_memory_gb = GPU_MEMORY_GB.get(accelerator_type)
    return Hardware(gpus=gpus, gpu_memory_gb=gpu_memory_gb if gpus else None,
                    gpus_per_node=gpus_per_node, accelerator_type=accelerator_type, **found)


def placement_from_env(env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The placement map a worker was given (empty: build every model as configured)."""
    raw = (os.environ if env is None else env).get(PLACEMENT_ENV, "")
    try:
        return json.loads(raw) if raw else {}
    except ValueError as e:
        raise RegistryError(f"{PLACEMENT_ENV}: not valid JSON ({e})") from None
