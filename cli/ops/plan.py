"""`esc-eval plan CONFIG [--gpus N --gpu-mem GB]`: where each model of a config would run, on how
many GPUs, with how much memory for weights and KV cache, what is refused, and (with GPUs) how long
the run would take by arithmetic on measured per-GPU rates (serve/plan/projection.py). Nothing is started.
The GPUs are the ones given (--gpus, or the config's `execution.placement.gpus`), else those found
as `esc-eval simulate` finds them at run time (serve/devices/gpus.py: NVML or nvidia-smi here,
CUDA_VISIBLE_DEVICES respected; a running Ray cluster's resources when the run would join one).

    esc-eval plan sim.yaml                        # on the GPUs found here
    esc-eval plan sim.yaml --gpus 8 --gpu-mem 24 --gpus-per-node 4
    esc-eval plan paper.yaml --gpus 8 --accelerator-type H100 --cards 655 --answer-tokens 100
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import exit_for


def plan(
    config: Annotated[Path, typer.Argument(help="Simulation, scoring, pipeline or Serve (serve up --config) YAML.")],
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=0, help="GPUs the run may use (default: execution.placement.gpus, else those found as `simulate` finds them).")] = None,
    gpu_mem: Annotated[Optional[float], typer.Option("--gpu-mem", min=1, help="Memory of one GPU in GB (default: execution.placement.gpu_memory_gb or the accelerator type's).")] = None,
    gpus_per_node: Annotated[Optional[int], typer.Option("--gpus-per-node", min=1, help="GPUs on one node: the largest tensor-parallel group.")] = None,
    accelerator_type: Annotated[Optional[str], typer.Option("--accelerator-type", help="GPU type, e.g. A10G, L4, H100 (gives the memory when --gpu-mem is not).")] = None,
    rates: Annotated[Optional[Path], typer.Option("--rates", help="Per-GPU rates for the projection: an `esc-eval bench gpu` JSON measured on the plan's GPU type (default: the figures of the one H100 run, ../shared/notes/gpu-h100.md).")] = None,
    answer_tokens: Annotated[Optional[str], typer.Option("--answer-tokens", help="Expected answer tokens for the projection: N, or per use role=N,target=M (default: the max_tokens caps, the worst case).")] = None,
    cards: Annotated[Optional[int], typer.Option("--cards", min=1, help="Project for this many role cards (default: the config's; e.g. 655 when the card file is on the cluster, not here).")] = None,
    dialogues: Annotated[Optional[int], typer.Option("--dialogues", min=1, help="Dialogues to score, for the projection of a scoring config (default: the simulation's).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Print where each model of CONFIG runs, on what, with how much memory, what is refused, and the projected time."""
    from esc_eval.sim.launch.run_plan import parse_answer_tokens, plan_command

    try:
        answers = parse_answer_tokens(answer_tokens)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    exit_for(plan_command(config, as_json, gpus=gpus, gpu_mem=gpu_mem, gpus_per_node=gpus_per_node,
                          accelerator_type=accelerator_type, rates=rates, answers=answers, cards=cards,
                          dialogues=dialogues))  # exit 1 where a model has no place: each refusal is printed, one line each
