"""`esc-eval plan CONFIG [--gpus N --gpu-mem GB]`: where each model of a config would run, on how
many GPUs, with how much memory for weights and KV cache, and what is refused. Nothing is started.
The GPUs are the ones given (--gpus, or the config's `execution.placement.gpus`), else those found
as `esc-eval simulate` finds them at run time (serve/gpu_detect.py: NVML or nvidia-smi here,
CUDA_VISIBLE_DEVICES respected; a running Ray cluster's resources when the run would join one).

    esc-eval plan sim.yaml                        # on the GPUs found here
    esc-eval plan sim.yaml --gpus 8 --gpu-mem 24 --gpus-per-node 4
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from esc_eval.cli.common import emit


def load_any_config(path: Path):
    """(model uses, execution) of a simulation, scoring, pipeline or Serve (`serve up --config`) YAML,
    told apart by their keys; a Serve config is planned as deployments (placement mode serve)."""
    uses, execution, _ = load_config_for_plan(path)
    return uses, execution


def load_config_for_plan(path: Path):
    """load_any_config, plus a function giving each configured model's expected sequence length (what
    GPU deployments are sized by at run time: sim/capacity.py size_serve_replicas)."""
    from esc_eval.serve.config_base import ConfigError, load_config, read_yaml_mapping
    from esc_eval.serve.plan import SERVE_MODEL_FIELDS_SET_BY_PLAN, ModelUse, PlacementConfig
    from esc_eval.serve.serve_app import ServeConfig
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig
    from esc_eval.sim.jobs.placed import model_uses

    data = read_yaml_mapping(path, ConfigError)
    if isinstance(data.get("models"), list):
        serve_cfg = ServeConfig.from_yaml(path)
        set_by_plan = set(SERVE_MODEL_FIELDS_SET_BY_PLAN)
        models = {m.name: m.model_dump(exclude_defaults=True, exclude=set_by_plan) for m in serve_cfg.models}
        types = {m.accelerator_type for m in serve_cfg.models} - {None}
        utils = {m.gpu_memory_utilization for m in serve_cfg.models} - {None}
        placement = PlacementConfig(mode="serve", models=models, app_name=serve_cfg.app_name,
                                    accelerator_type=types.pop() if len(types) == 1 else None,
                                    **({"gpu_memory_utilization": utils.pop()} if len(utils) == 1 else {}))
        return ([ModelUse(m.name, {}, "served") for m in serve_cfg.models],
                ExecutionConfig(placement=placement, env={"VLLM_CPU_KVCACHE_SPACE": str(serve_cfg.kv_cache_gib)}), dict)
    from esc_eval.sim.jobs import scoring, simulation_items as simulation

    if "simulation" in data or "scoring" in data:
        cfg = load_config(path, PipelineConfig)
        return (model_uses(cfg.simulation, cfg.scoring), cfg.simulation.execution,
                lambda: {**simulation.expected_seq_tokens(cfg.simulation), **scoring.expected_seq_tokens(cfg.scoring, None)})
    if "judge" in data:
        cfg = load_config(path, ScoringConfig)
        return model_uses(scoring=cfg), cfg.execution, lambda: scoring.expected_seq_tokens(cfg, None)
    cfg = load_config(path, SimulationConfig)
    return model_uses(cfg), cfg.execution, lambda: simulation.expected_seq_tokens(cfg)


def plan(
    config: Path = typer.Argument(..., help="Simulation, scoring, pipeline or Serve (serve up --config) YAML."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=0, help="GPUs the run may use (default: execution.placement.gpus, else those found as `simulate` finds them)."),
    gpu_mem: Optional[float] = typer.Option(None, "--gpu-mem", min=1, help="Memory of one GPU in GB (default: execution.placement.gpu_memory_gb or the accelerator type's)."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", min=1, help="GPUs on one node: the largest tensor-parallel group."),
    accelerator_type: Optional[str] = typer.Option(None, "--accelerator-type", help="GPU type, e.g. A10G, L4, H100 (gives the memory when --gpu-mem is not)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Print where each model of CONFIG runs, on what, with how much memory, and what is refused."""
    from esc_eval.serve.plan import hardware_for
    from esc_eval.sim.pool.capacity import size_serve_replicas
    from esc_eval.sim.pool.placement import cluster_hardware, make_plan

    uses, execution, seq_tokens = load_config_for_plan(config)
    p = execution.placement
    if gpus is None:  # what the run would find (and the config's placement, which it follows)
        shape = {k: v for k, v in (("gpu_memory_gb", gpu_mem), ("gpus_per_node", gpus_per_node),
                                   ("accelerator_type", accelerator_type)) if v is not None}
        hardware = cluster_hardware(execution.model_copy(update={"placement": p.model_copy(update=shape)}))
    else:
        hardware = hardware_for(gpus, gpu_mem if gpu_mem is not None else p.gpu_memory_gb,
                                gpus_per_node or p.gpus_per_node, accelerator_type or p.accelerator_type)
    result = make_plan(execution, uses, hardware)
    size_serve_replicas(result, seq_tokens, p)  # GPU deployments sized as the run sizes them
    if as_json:
        emit(result.as_dict())
    else:
        print("\n".join(result.lines()))
    if not result.ok:
        raise SystemExit(1)  # each refusal is printed above, one line each
