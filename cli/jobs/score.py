"""`esc-eval score`: the 7 dimensions of every dialogue of a run folder (or official JSON) by a judge, or a panel of judges."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import STATE, emit, exit_for


def score(
    input: Annotated[str, typer.Option("--input", "-i", help="A run folder or storage URI, or a folder/file of official ESC-Eval dialogue JSON.")],
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Run folder for the scores (default: the input run folder; <input>-scored for official JSON).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Scoring YAML (sim.jobs.config.ScoringConfig).")] = None,
    judge: Annotated[Optional[list[str]], typer.Option("--judge", "-j", help="Judge model (registry name or spec); repeat it for a panel of judges scoring in one pass, each judge's rows apart (`analysis panel` reads them).")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="logprob (one pass, P(0..4)) | generate (parse the answer).")] = None,
    parser: Annotated[Optional[str], typer.Option("--parser", help="strict | compat (official rule: the first of 0-4 in the answer).")] = None,
    rubric: Annotated[Optional[str], typer.Option("--rubric", help="official (score.py) | paper (Figures 12-19).")] = None,
    official_out: Annotated[Optional[Path], typer.Option("--official-out", help="Also write scores in the official JSON layout here.")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Join an existing Ray cluster.")] = None,
    dimensions: Annotated[Optional[str], typer.Option("--dimensions", help="Comma-separated dimensions to score (default: the "
                                             "seven); 'safety' scores the crisis-safety rubric, reported apart.")] = None,
    by_round: Annotated[bool, typer.Option("--by-round", help="Score each dialogue as it stood after each round (the "
                                           "dialogue so far, ending with the target's reply: the rule 'prefix') into "
                                           "--out; then `leaderboard --by round` and `analysis rounds`.")] = False,
    by_reply: Annotated[bool, typer.Option("--by-reply", help="Scores by round under the rule 'reply': each round's reply "
                                           "rated alone, read in the context before it (the per-reply rubric), which "
                                           "locates where support fails; implies --by-round.")] = False,
    every: Annotated[int, typer.Option("--every", min=1, help="With --by-round: every N-th round (and always the last).")] = 1,
    rubric_mode: Annotated[Optional[str], typer.Option("--rubric-mode", help="per_dimension (the paper's: one call per dimension, "
                                                       "the default) | one_call (one call per dialogue, every dimension in one JSON "
                                                       "answer; scored as another judge, its id ending ':one_call').")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls, prompt and completion tokens and the price at list "
                                          "prices (online vs batch, per dimension vs one call per dialogue); send and write nothing.")] = False,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", min=0, help="Refuse (one line, exit 2) before anything is sent "
                                                      "when the estimate at list prices, in US dollars, is over this.")] = None,
    reply_safety: Annotated[bool, typer.Option("--reply-safety", help="Rate each reply after risk emerged (cards that "
                                               "disclose risk at a set round: `cards: emerging_risk`) in its context: "
                                               "the per-reply safety rubric and the failure pattern, into the run's "
                                               "reply_safety rows; then `analysis safety` / `report`.")] = False,
    batch: Annotated[bool, typer.Option("--batch", help="Send the judge calls as provider batches (OpenAI's Batch API, "
                                        "Anthropic's Message Batches): half the price, answers within 24 hours; the "
                                        "same command started again picks up the batches in flight.")] = False,
    batch_fallback: Annotated[Optional[str], typer.Option("--batch-fallback", help="With --batch, a request that failed "
                                                          "or expired in a batch: batch (a new batch, the default) | "
                                                          "online (an ordinary call, at the online price).")] = None,
) -> None:
    """Score dialogues on the 7 dimensions (or --dimensions, e.g. safety) with a judge, or a panel (--judge repeated), online or as provider batches (--batch); resumable."""
    from esc_eval.sim.launch.commands import score_command

    if (by_round or by_reply) and official_out:
        raise typer.BadParameter("--official-out takes whole dialogues, not --by-round prefixes")
    if (by_round or by_reply) and (dry_run or max_cost is not None):
        raise typer.BadParameter("--dry-run / --max-cost price whole dialogues, not --by-round prefixes")
    if reply_safety and (by_round or by_reply or official_out or batch or dry_run or (out and out != input)):
        raise typer.BadParameter("--reply-safety rates the run's replies in place, online: not with --by-round, "
                                 "--by-reply, --official-out, --batch, --dry-run or another --out")
    result, verdict = score_command(input, out, config, judge, method, parser, rubric, official_out, address, dimensions,
                                    by_round, every, verbose=STATE["verbose"], by_reply=by_reply, batch=batch,
                                    batch_fallback=batch_fallback, rubric_mode=rubric_mode, dry_run=dry_run,
                                    max_cost=max_cost, reply_safety=reply_safety)
    emit(result)
    exit_for(verdict)
