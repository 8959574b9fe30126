"""`esc-eval check`: prove a node (GPU or CPU) in one command within a time budget. The steps live in
sim/bench/node/check.py and steps.py, what the command does with its options in sim/bench/commands.py;
this command only parses and calls.

    esc-eval check                                   # the embedded model, 9 minutes at most
    esc-eval check --role esc-role --target qwen1.5-7b-chat --judge qwen1.5-7b-chat -o check.json
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import exit_for, local_out
from esc_eval.serve.registry.ref import DEFAULT_MODEL
from esc_eval.sim.bench.node.check import CHECK_BUDGET_MIN


def check(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge of the scoring steps (registry name or "
                              "vLLM spec).")] = DEFAULT_MODEL,
    role: Annotated[str, typer.Option("--role", help="Role-play model of the simulation steps.")] = DEFAULT_MODEL,
    target: Annotated[str, typer.Option("--target", "-t", help="Model under test of the simulation steps.")] = DEFAULT_MODEL,
    budget_min: Annotated[float, typer.Option("--budget-min", help="Minutes the whole check may take; each step has its "
                                     "share and is killed past it (default: 9, sized for one H100/H200 with the "
                                     "random-weight 7B judge/target and 13B role).")] = CHECK_BUDGET_MIN,
    steps: Annotated[Optional[str], typer.Option("--steps", help="Steps to run, comma-separated (default: all: "
                                        "machine, plan, engines, workload, bad_engine, demo; machine always runs).")] = None,
    source: Annotated[Optional[Path], typer.Option("--source", help="Dialogues the scoring steps use (run folder or "
                                          "official JSON); copies are tagged distinct.")] = None,
    cards: Annotated[Optional[Path], typer.Option("--cards", help="Role cards the simulation steps use.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Max new tokens per simulated turn (default: "
                                             "64 on a GPU, 8 on the CPU).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Write the JSON here (else to stdout), and each "
                                       "step's log and run folders beside it (<stem>-steps/).")] = None,
) -> None:
    """Prove this node: machine, plan, every engine, a small workload next to the references, an engine
    that cannot start, the demo; one JSON and a summary table."""
    from esc_eval.sim.bench.commands import check_command, unwritable

    if out and unwritable(out):
        raise typer.BadParameter(unwritable(out), param_hint="--out")
    exit_for(check_command(judge, role, target, budget_min, steps, source, cards, max_tokens, out))
