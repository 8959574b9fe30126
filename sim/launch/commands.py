"""What `esc-eval simulate`, `esc-eval score`, `esc-eval analysis judge-agreement` and `esc-eval analysis
fidelity --judge` do once their options are parsed: the config from the options (options.py), the
driver's engine environment passed on, the job run on its placed models with progress on the terminal,
and the result with the verdict its exit status comes from (sim/driver/outcome.py `outcome_line`: None,
or the exit code and one line). The CLI prints the result and exits by the verdict.

The two analysis commands run a judge job and hand its output to analysis, which cannot run one: the
analysis function is passed in (`compare`, `fidelity`), as analysis' own functions take the job as a
callable (`score`, `rate`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from esc_eval.sim.launch.options import score_by_round_run, score_run, scoring_config, simulate_run, simulation_config

Verdict = tuple[int, str] | None  # (exit status, one line) when the command must exit non-zero


def priced_first(estimate: Callable[[], dict[str, Any]], dry_run: bool, max_cost: float | None) -> dict[str, Any] | None:
    """The price before the run (dry_run.py), where asked: the estimate shown (dry_run) and checked
    against max_cost (over it: one line, nothing sent); the estimate when the run stops there (dry_run),
    else None (the run goes ahead)."""
    if not dry_run and max_cost is None:
        return None
    from esc_eval.sim.launch.dry_run import check_max_cost
    from esc_eval.sim.launch.estimate_table import show_estimate

    est = estimate()
    if dry_run:
        show_estimate(est)
    check_max_cost(est, max_cost)
    return est if dry_run else None


def simulate_command(config: Path | None = None, out: str | None = None, cards: Path | None = None,
                     targets: list[str] | None = None, role: str | None = None, limit: int | None = None,
                     language: str | None = None, address: str | None = None, workers: int | None = None,
                     concurrency: int | None = None, rounds: int | None = None, seeker_stop: bool | None = None,
                     strategies: list[str] | None = None, controls: list[str] | None = None,
                     keep_serving: bool = False, verbose: bool = False, sessions: int | None = None,
                     memory: str | None = None, dry_run: bool = False, max_cost: float | None = None,
                     seeker_ratings: bool | None = None) -> tuple[dict[str, Any], Verdict]:
    """`esc-eval simulate`: the dialogues into the run folder `out` (default runs/sim-<UTC time>); with
    sessions > 1, each card's course of sessions (sim/courses/); with seeker_ratings, the seeker's own
    view of them after (sim/seekerview); with dry_run the estimate instead (nothing sent, nothing
    written), with max_cost a refusal over it."""
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.outcome import outcome_line
    from esc_eval.sim.driver.progress import console, job_progress
    from esc_eval.sim.runs.runfolder import now_utc
    from esc_eval.sim.runs.storage import redact_uri

    cfg = simulation_config(config, cards, targets, role, limit, language, address, workers, concurrency, rounds,
                            seeker_stop, strategies, controls, sessions=sessions, memory=memory,
                            seeker_ratings=seeker_ratings)
    from esc_eval.sim.launch.simulate_estimate import simulate_estimate

    estimate = priced_first(lambda: simulate_estimate(cfg), dry_run, max_cost)
    if estimate is not None:
        return estimate, None
    pass_driver_env(cfg.execution, verbose)
    cfg.execution.placement.keep_serving |= keep_serving
    out = out or str(Path("runs") / f"sim-{now_utc().strftime('%Y%m%d-%H%M%S')}")
    result, placed = simulate_run(cfg, out, progress=lambda: job_progress("simulate"), say=console.print)
    result = {"run_dir": redact_uri(out), **result}
    return result, outcome_line(result, "dialogues", placed.execution.max_failure_rate)


def score_command(input_path: str, out: str | None = None, config: Path | None = None, judges: list[str] | None = None,
                  method: str | None = None, parser: str | None = None, rubric: str | None = None,
                  official_out: Path | None = None, address: str | None = None, dimensions: str | None = None,
                  by_round: bool = False, every: int = 1, verbose: bool = False, by_reply: bool = False,
                  batch: bool = False, batch_fallback: str | None = None, rubric_mode: str | None = None,
                  dry_run: bool = False, max_cost: float | None = None,
                  reply_safety: bool = False) -> tuple[dict[str, Any], Verdict]:
    """`esc-eval score`: the input's dialogues scored, online or as provider batches (`batch`); with
    by_round each as it stood after each round, into `out` (by_reply: each round's reply rated in the
    context before it); rubric_mode one_call: one call per dialogue for every dimension; with dry_run the
    estimate instead (nothing sent, nothing written), with max_cost a refusal over it; each judge's
    unscored answers shown as a table; reply_safety: each reply after risk emerged rated in place
    (the per-reply safety rubric and its failure pattern: the run's reply_safety rows)."""
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.outcome import outcome_line
    from esc_eval.sim.driver.progress import console, job_progress

    cfg = scoring_config(config, judges, method, parser, rubric, address, dimensions, batch, batch_fallback,
                         rubric_mode=rubric_mode)
    from esc_eval.sim.launch.dry_run import reply_safety_estimate, score_estimate

    estimate = priced_first(lambda: reply_safety_estimate(cfg, input_path) if reply_safety
                            else score_estimate(cfg, input_path, out), dry_run, max_cost)
    if estimate is not None:
        return estimate, None
    pass_driver_env(cfg.execution, verbose)
    if reply_safety:  # each reply after risk emerged, rated in its context (sim/launch/emerging.py)
        from esc_eval.sim.launch.emerging import score_reply_safety_run

        result = score_reply_safety_run(cfg, input_path, progress=lambda: job_progress("score", unit="dialogues"),
                                        say=console.print)
    elif by_round or by_reply:
        result = score_by_round_run(cfg, input_path, out, every, progress=lambda: job_progress("score", unit="dialogues"),
                                    say=console.print, rule="reply" if by_reply else "prefix")
    else:
        result = score_run(cfg, input_path, out, official_out, progress=lambda: job_progress("score", unit="dialogues"),
                           say=console.print)
    show_parse_failures(result["parse_failures"], result.get("judge", cfg.judge.judge_id))
    return result, outcome_line(result, "scores", cfg.execution.max_failure_rate)


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


def judge_agreement_command(dialogues: Path, scores: Path, judge: str, out: str | None, config: Path | None,
                            method: str | None, rubric: str | None, n_boot: int, seed: int,
                            compare: Callable[..., tuple[str, dict[str, Any]]], verbose: bool = False) -> dict[str, Any]:
    """`esc-eval analysis judge-agreement`: the released dialogues scored by `judge` (resumable, into
    `out`), compared with the released scores by `compare` (analysis.trust.judge_agreement
    agreement_with_released, which asks for the scoring once it has read the released scores); its
    Markdown shown, its result returned."""
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.progress import console, job_progress
    from esc_eval.sim.jobs.scoring import run_scoring

    cfg = scoring_config(config, judge, method, None, rubric, None)
    pass_driver_env(cfg.execution, verbose)

    def score() -> tuple[str, str]:
        with job_progress("judge-agreement", unit="dialogues") as jp:
            return run_scoring(cfg, dialogues, out, on_summary=jp.on_summary, on_start=jp.on_start)["run_dir"], cfg.judge.judge_id

    markdown, result = compare(scores, score, n_boot, seed)
    console.print(markdown)
    return result


def fidelity_command(run_dirs: list[str], humans: str, fidelity: Callable[..., tuple[str, dict[str, Any]]],
                     judge: str | None = None, judge_out: str | None = None, config: Path | None = None,
                     method: str | None = None, **options: Any) -> tuple[str, dict[str, Any]]:
    """`esc-eval analysis fidelity`: `fidelity` (analysis.seekers.fidelity_report fidelity_of_runs) with
    `options`; with a judge (`judge` or a distress `config`, read and checked here, before anything
    runs) also the seeker's distress rated at every seeker turn (sim/jobs/distress.py) into `judge_out`
    (default <first run>/distress). Its Markdown and files."""
    rate = None
    if judge or config:  # the distress judge's config, read and checked at the door
        from esc_eval.serve.config import load_config
        from esc_eval.sim.jobs.distress import DistressConfig, distress_rater
        from esc_eval.sim.runs.storage import join_location

        rate = distress_rater(load_config(config, DistressConfig, {"judge.model": judge, "method": method}),
                              judge_out or join_location(run_dirs[0], "distress"))
    return fidelity(run_dirs, humans, rate=rate, **options)


__all__ = ["Verdict", "fidelity_command", "judge_agreement_command", "score_command", "show_parse_failures",
           "simulate_command"]
