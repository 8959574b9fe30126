"""`esc-eval score`: the 7 dimensions of every dialogue of a run folder (or official JSON) by a judge, or a panel of judges."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from esc_eval.cli.common import console_env, emit, exit_for_outcome


def show_parse_failures(rows: list[dict[str, Any]], judge_id: str) -> None:
    """Each judge's unscored answers per (target model, dimension) as a table on stderr (none: nothing);
    a row's `judge` (a panel's) or `judge_id`."""
    from rich.table import Table

    from esc_eval.sim.driver.progress import console

    by_judge: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_judge.setdefault(r.get("judge") or judge_id, []).append(r)
    for jid, judge_rows in by_judge.items():
        t = Table(title=f"Unscored answers of {jid} (null scores, never zeros)", pad_edge=False)
        for c in ("Model", "Dimension", "n", "Parse failures", "Errors", "Rate"):
            t.add_column(c, justify="left" if c in ("Model", "Dimension") else "right")
        for r in judge_rows:
            t.add_row(r["target_model"], r["dimension"], str(r["n_scores"]), str(r["parse_failures"]), str(r["errors"]),
                      f"{r['failure_rate']:.0%}")
        console.print(t)


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
                                           "dialogue so far, ending with the target's reply) into --out; then "
                                           "`leaderboard --by round` and `analysis rounds`.")] = False,
    every: Annotated[int, typer.Option("--every", min=1, help="With --by-round: every N-th round (and always the last).")] = 1,
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
    from esc_eval.sim.launch.options import score_by_round_run, score_run, scoring_config
    from esc_eval.sim.driver.progress import console, job_progress

    cfg = scoring_config(config, judge, method, parser, rubric, address, dimensions, batch, batch_fallback)
    console_env(cfg.execution)
    if reply_safety:
        if by_round or official_out or batch or (out and out != input):
            raise typer.BadParameter("--reply-safety rates the run's replies in place, online: not with --by-round, "
                                     "--official-out, --batch or another --out")
        from esc_eval.sim.launch.emerging import score_reply_safety_run

        result = score_reply_safety_run(cfg, input, progress=lambda: job_progress("score", unit="dialogues"),
                                        say=console.print)
    elif by_round:
        if official_out:
            raise typer.BadParameter("--official-out takes whole dialogues, not --by-round prefixes")
        result = score_by_round_run(cfg, input, out, every, progress=lambda: job_progress("score", unit="dialogues"),
                                    say=console.print)
    else:
        result = score_run(cfg, input, out, official_out, progress=lambda: job_progress("score", unit="dialogues"),
                           say=console.print)
    show_parse_failures(result["parse_failures"], result.get("judge", cfg.judge.judge_id))
    emit(result)
    exit_for_outcome(result, "scores", cfg.execution.max_failure_rate)
