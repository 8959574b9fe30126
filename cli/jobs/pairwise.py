"""`esc-eval pairwise`: a judge compares two targets' dialogues of the same card on each dimension
(which supporter did better, or a tie), both orders, into the run folder's `pairwise` rows."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import STATE, emit, exit_for


def pairwise(
    input: Annotated[str, typer.Option("--input", "-i", help="The run folder (or storage URI) whose dialogues are compared; the rows are written there.")],
    judge: Annotated[Optional[str], typer.Option("--judge", "-j", help="Judge model (registry name or spec).")] = None,
    plan: Annotated[Optional[str], typer.Option("--plan", help="all (every pair of targets per card) | round_robin (each target meets one other per card, every pair equally often) | reference (every target against --reference).")] = None,
    reference: Annotated[Optional[str], typer.Option("--reference", help="With --plan reference: the target model every other target is compared with.")] = None,
    dimensions: Annotated[Optional[str], typer.Option("--dimensions", help="Comma-separated dimensions (default: the seven).")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="logprob (one pass, P(first, second, tie)) | generate (parse the answer).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (cards, targets, pairs, judge calls) and stop.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Pairwise YAML (sim.pairwise.config.PairwiseConfig).")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Join an existing Ray cluster.")] = None,
) -> None:
    """Compare targets head to head: for every card two targets both talked to, which supporter did better
    on each dimension (or a tie), asked in both orders; resumable. The plan is printed before anything runs."""
    from esc_eval.sim.pairwise.job import pairwise_command

    result, verdict = pairwise_command(input, judge, plan, reference, dimensions, method, dry_run, config, address,
                                       verbose=STATE["verbose"])
    emit(result)
    exit_for(verdict)
