"""`esc-eval check`: prove a node (GPU or CPU) in one command within a time budget. The steps live in
sim/bench/node/check.py and steps.py; this command only parses, calls and prints.

    esc-eval check                                   # the embedded model, 9 minutes at most
    esc-eval check --role esc-role --target qwen1.5-7b-chat --judge qwen1.5-7b-chat -o check.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import local_out


def check(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge of the scoring steps (registry name or "
                              "vLLM spec).")] = "vllm/embedded",
    role: Annotated[str, typer.Option("--role", help="Role-play model of the simulation steps.")] = "vllm/embedded",
    target: Annotated[str, typer.Option("--target", "-t", help="Model under test of the simulation steps.")] = "vllm/embedded",
    budget_min: Annotated[float, typer.Option("--budget-min", help="Minutes the whole check may take; each step has its "
                                     "share and is killed past it (default: 9, sized for one H100/H200 with the "
                                     "random-weight 7B judge/target and 13B role).")] = 9.0,
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
    from rich.console import Console
    from rich.table import Table

    from esc_eval.serve.config import validate_config
    from esc_eval.sim.bench.node.check import CheckInputError, NodeCheckConfig, run_node_check, summary_rows

    data = {"judge": judge, "role": role, "target": target, "budget_min": budget_min, "max_tokens": max_tokens,
            "steps": [s.strip() for s in steps.split(",") if s.strip()] if steps else None,
            "source": str(source) if source else None, "cards": str(cards) if cards else None}
    cfg = validate_config(NodeCheckConfig, {k: v for k, v in data.items() if v is not None}, "check", CheckInputError)
    if out:
        _writable(out)  # an unwritable place fails now, not after the check (and nothing is created yet)
    console = Console(stderr=True)
    colors = {"ok": "green", "failed": "red", "stopped": "red", "skipped": "yellow"}

    def say(step: dict) -> None:
        console.print(f"[{colors.get(step['status'], 'white')}]{step['status']:>7}[/] {step['name']:<10} "
                      f"{step['seconds']:>5.0f} s  {step.get('why') or ''}", highlight=False, soft_wrap=True)

    console.print(f"[bold]esc-eval check[/bold]: judge {cfg.judge}, role {cfg.role}, target {cfg.target}; "
                  f"budget {cfg.budget_min:g} min")
    keep = out.with_name(out.stem + "-steps") if out else None
    result = run_node_check(cfg, say, keep=keep)
    table = Table(title=f"esc-eval check on {result['device']}: {result['seconds']:.0f} s of {cfg.budget_min * 60:.0f}")
    for col in ("step", "status", "seconds / deadline", "what it found"):
        table.add_column(col, overflow="fold")
    for name, status, limit, why in summary_rows(result):
        table.add_row(name, f"[{colors.get(status, 'white')}]{status}[/]", limit, why)
    console.print(table)
    for note in (result.get("budget") or {}).get("notes") or []:  # parts of a step its share did not hold
        console.print(f"budget: {note}", highlight=False, soft_wrap=True)
    text = json.dumps(result, indent=2, ensure_ascii=False, default=str)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
        console.print(f"JSON: {out}; step logs and run folders: {keep}")
    else:
        sys.stdout.write(text + "\n")
    if not result["ok"]:
        raise typer.Exit(1)


def _writable(path: Path) -> None:
    import os

    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not os.access(folder, os.W_OK) or path.is_dir():
        raise typer.BadParameter(f"{path}: cannot be written ({folder} is not writable, or it is a folder)",
                                 param_hint="--out")
