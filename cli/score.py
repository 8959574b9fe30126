"""`esc-eval score`: the 7 dimensions of every dialogue of a run folder (or official JSON) by a judge."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from esc_eval.cli.common import console_env, emit, exit_for_outcome


def load_score_config(config, judge, method, parser, rubric, address, dimensions: str | None = None):
    from esc_eval.serve.registry.registry import default_registry, is_spec
    from esc_eval.sim.jobs.config import ScoringConfig
    from esc_eval.serve.config import load_config

    dims = [d.strip() for d in dimensions.split(",") if d.strip()] if dimensions else None
    o: dict[str, Any] = {"judge.model.model": judge, "judge.method": method, "judge.parser": parser,
                         "judge.rubric": rubric, "execution.ray_address": address, "judge.dimensions": dims}
    cfg = load_config(config, ScoringConfig, o)
    if judge and not is_spec(judge) and default_registry().get(judge).adapters:
        # A registry judge with adapters (ESC-RANK): one engine, one LoRA per dimension.
        from esc_eval.sim.judging.judges import judge_from_registry

        cfg.judge = judge_from_registry(judge, method=cfg.judge.method, rubric=cfg.judge.rubric,
                                        dimensions=cfg.judge.dimensions)
        cfg.judge.parser = parser or cfg.judge.parser
    console_env(cfg.execution)
    return cfg


def report_parse_failures(run_dir: str, judge_id: str) -> list[dict[str, Any]]:
    """(Target model, dimension) pairs whose answers did not all become scores: a table on
    stderr and the same rows in the JSON result (an empty list when every answer parsed)."""
    from rich.table import Table

    from esc_eval.sim.runs.parse_failures import parse_failure_report
    from esc_eval.sim.pool.progress import console

    report = parse_failure_report(run_dir, judge=judge_id)
    failing = report[report["failure_rate"] > 0]
    if not failing.empty:
        t = Table(title=f"Unscored answers of {judge_id} (null scores, never zeros)", pad_edge=False)
        for c in ("Model", "Dimension", "n", "Parse failures", "Errors", "Rate"):
            t.add_column(c, justify="left" if c in ("Model", "Dimension") else "right")
        for r in failing.itertuples():
            t.add_row(r.target_model, r.dimension, str(r.n_scores), str(r.parse_failures), str(r.errors), f"{r.failure_rate:.0%}")
        console.print(t)
    return failing.to_dict(orient="records")


def write_official(run_dir: str, out_dir: Path, judge_id: str) -> list[Path]:
    from esc_eval.sim.runs.official import write_official_scores
    from esc_eval.sim.runs.runfolder import RunFolder

    run = RunFolder(run_dir, create=False)
    scores = [r for r in run.iter_rows("scores") if r["judge"] == judge_id]
    return write_official_scores(scores, list(run.iter_rows("dialogues")), out_dir)


def score(
    input: str = typer.Option(..., "--input", "-i", help="A run folder or storage URI, or a folder/file of official ESC-Eval dialogue JSON."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Run folder for the scores (default: the input run folder; <input>-scored for official JSON)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Scoring YAML (sim.jobs.config.ScoringConfig)."),
    judge: Optional[str] = typer.Option(None, "--judge", "-j", help="Judge model (registry name or spec)."),
    method: Optional[str] = typer.Option(None, "--method", help="logprob (one pass, P(0..4)) | generate (parse the answer)."),
    parser: Optional[str] = typer.Option(None, "--parser", help="strict | compat (official rule: the first of 0-4 in the answer)."),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="official (score.py) | paper (Figures 12-19)."),
    official_out: Optional[Path] = typer.Option(None, "--official-out", help="Also write scores in the official JSON layout here."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
    dimensions: Optional[str] = typer.Option(None, "--dimensions", help="Comma-separated dimensions to score (default: the "
                                             "seven); 'safety' scores the crisis-safety rubric, reported apart."),
) -> None:
    """Score dialogues on the 7 dimensions (or --dimensions, e.g. safety) with a judge; resumable."""
    from esc_eval.sim.jobs.placed import placed_scoring
    from esc_eval.sim.pool.progress import console, job_progress
    from esc_eval.sim.jobs.scoring import run_scoring

    cfg = load_score_config(config, judge, method, parser, rubric, address, dimensions)
    with placed_scoring(cfg, out or input, say=console.print) as cfg, job_progress("score", unit="dialogues") as jp:
        result = run_scoring(cfg, input, out, on_summary=jp.on_summary, on_start=jp.on_start)
    judge_id = result.get("judge", cfg.judge.judge_id)  # the judge id of the method used (a fallback says generate)
    if official_out:
        result["official_files"] = [str(p) for p in write_official(result["run_dir"], official_out, judge_id)]
    result["parse_failures"] = report_parse_failures(result["run_dir"], judge_id)
    emit(result)
    exit_for_outcome(result, "scores", cfg.execution.max_failure_rate)
