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
    sessions: Annotated[Optional[int], typer.Option("--sessions", help="Run each card as a course of N sessions with the same target, 1-20 (1: the paper's single session); a row per session.")] = None,
    memory: Annotated[Optional[str], typer.Option("--memory", help="With --sessions > 1, what the target keeps of earlier sessions: none | summary (its own notes) | transcripts.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls, prompt and completion tokens (replies at their max_tokens: "
                                          "an upper bound) and the price at list prices, online vs batch; send and write nothing.")] = False,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", min=0, help="Refuse (one line, exit 2) before anything is sent "
                                                      "when the estimate at list prices, in US dollars, is over this.")] = None,
) -> None:
    """Run 5-round dialogues between ESC-Role and the target models into a run folder."""
    from esc_eval.sim.launch.commands import simulate_command

    result, verdict = simulate_command(config, out, cards, target, role, limit, language, address, workers, concurrency,
                                       rounds, seeker_stop, strategy, control, keep_serving, verbose=STATE["verbose"],
                                       sessions=sessions, memory=memory, dry_run=dry_run, max_cost=max_cost,
                                       seeker_ratings=seeker_ratings)
    emit(result)
    exit_for(verdict)
