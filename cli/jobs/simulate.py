"""`esc-eval simulate`: 5-round dialogues between ESC-Role and the target models into a run folder."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import STATE, emit, exit_for


def simulate(
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Simulation YAML (sim.jobs.config.SimulationConfig).")] = None,
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Run folder or storage URI, e.g. s3://bucket/prefix (re-running the same folder resumes).")] = None,
    cards: Annotated[Optional[Path], typer.Option("--cards", help="Card file (ours or official JSON); default: shipped samples.")] = None,
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="Model under test (registry name or spec); repeatable.")] = None,
    role: Annotated[Optional[str], typer.Option("--role", help="Role-play model (registry name or spec).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", help="Use at most N cards.")] = None,
    language: Annotated[Optional[str], typer.Option("--language", help="Only cards in this language (en|zh).")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Join an existing Ray cluster.")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="Worker actors.")] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", help="Dialogues in flight per worker.")] = None,
    rounds: Annotated[Optional[int], typer.Option("--rounds", help="Seeker/assistant rounds after the opener, 1-50 (the paper: 5).")] = None,
    seeker_stop: Annotated[Optional[bool], typer.Option("--seeker-stop/--no-seeker-stop", help="The seeker may end the conversation itself (its stop signal). Default: on for more than 5 rounds, off for 5 or fewer (the paper's protocol).")] = None,
    strategy: Annotated[Optional[list[str]], typer.Option("--strategy", help="Role-play strategy, repeatable: official, zero_shot, cot, icl, cot_icl, plain, resistant, low_engagement, volatile, or one with seeker controls ('zero_shot+resistance=strong').")] = None,
    control: Annotated[Optional[list[str]], typer.Option("--control", help="Sweep a seeker control over every strategy, repeatable: control=level[,level...], e.g. resistance=none,strong (controls: engagement, resistance, expression, disclosure, volatility).")] = None,
    seeker_ratings: Annotated[Optional[bool], typer.Option("--seeker-ratings/--no-seeker-ratings", help="The person's own view: after the dialogues the seeker rates each one as ESConv's seekers did (empathy, relevance, emotion intensity before and after, 1-5) into seeker_ratings rows; on for a finished run, it rates its dialogues.")] = None,
    keep_serving: Annotated[bool, typer.Option("--keep-serving", help="Leave the run's Serve deployments up after it (GPU clusters).")] = False,
) -> None:
    """Run 5-round dialogues between ESC-Role and the target models into a run folder."""
    from esc_eval.sim.launch.commands import simulate_command

    result, verdict = simulate_command(config, out, cards, target, role, limit, language, address, workers, concurrency,
                                       rounds, seeker_stop, strategy, control, keep_serving, verbose=STATE["verbose"],
                                       seeker_ratings=seeker_ratings)
    emit(result)
    exit_for(verdict)
