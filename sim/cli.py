"""The `esc-eval` command line: it only parses and calls.

Subcommands: demo, simulate, score, report, leaderboard, cards, serve, train, bench.
Errors on bad input exit non-zero with one line naming the file and field; --debug shows the
traceback.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from sim.progress import console, job_progress

app = typer.Typer(add_completion=False, no_args_is_help=True, help="ESC-Eval on Ray + vLLM: role-played emotional-support dialogues, 7-dimension judging, the paper's tables.")
cards_app = typer.Typer(no_args_is_help=True, help="Role cards: validate, build from source datasets, statistics, export.")
serve_app = typer.Typer(no_args_is_help=True, help="Ray Serve deployments of the models (vLLM, OpenAI routes).")
train_app = typer.Typer(no_args_is_help=True, help="LoRA SFT of ESC-Role and ESC-RANK on Ray Train + DeepSpeed.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks printing JSON.")
analysis_app = typer.Typer(no_args_is_help=True, help="Analysis: model comparison, judge accuracy, annotation sheets and agreement, role-play fidelity.")
app.add_typer(cards_app, name="cards")
app.add_typer(serve_app, name="serve")
app.add_typer(train_app, name="train")
app.add_typer(bench_app, name="bench")
app.add_typer(analysis_app, name="analysis")

_STATE = {"debug": False, "verbose": False}


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
          verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details (retries, engines).")) -> None:
    _STATE["debug"] = debug
    _STATE["verbose"] = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Quiet engines by default; workers inherit this through the Ray runtime env.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def _emit(data: Any, **kw: Any) -> None:
    """Results go to stdout as JSON (progress and errors go to stderr)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str, **kw))


def _exec_env() -> dict[str, str]:
    keys = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_LOGGING_LEVEL", "ESC_EVAL_CACHE", "ESC_EVAL_MODEL_PATHS", "HF_HUB_OFFLINE")
    return {k: os.environ[k] for k in keys if k in os.environ}


def _sim_overrides(cards, target, role, limit, language, out_address, workers, concurrency) -> dict[str, Any]:
    o: dict[str, Any] = {"cards": str(cards) if cards else None, "limit": limit,
                         "languages": [language] if language else None,
                         "execution.ray_address": out_address, "execution.workers": workers,
                         "execution.concurrency": concurrency}
    if target:
        o["targets"] = [{"model": t} for t in target]
    if role:
        o["role.model"] = role
    return o


def _load_sim_config(config: Optional[Path], overrides: dict[str, Any]):
    from sim.config import SimulationConfig, load_config

    cfg = load_config(config, SimulationConfig, overrides)
    _console_env(cfg.execution)
    return cfg


def _console_env(ex) -> None:
    ex.env = {**ex.env, **_exec_env()}
    # Engines are chatty: their logs stay in Ray's log files unless --verbose.
    ex.log_to_driver = ex.log_to_driver and _STATE["verbose"]


def _default_out(prefix: str) -> Path:
    from sim.runfolder import now_utc

    return Path("runs") / f"{prefix}-{now_utc().strftime('%Y%m%d-%H%M%S')}"


@app.command()
def simulate(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Simulation YAML (sim.config.SimulationConfig)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run folder (re-running the same folder resumes)."),
    cards: Optional[Path] = typer.Option(None, "--cards", help="Card file (ours or official JSON); default: shipped samples."),
    target: Optional[list[str]] = typer.Option(None, "--target", "-t", help="Model under test (registry name or spec); repeatable."),
    role: Optional[str] = typer.Option(None, "--role", help="Role-play model (registry name or spec)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="Use at most N cards."),
    language: Optional[str] = typer.Option(None, "--language", help="Only cards in this language (en|zh)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Worker actors."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Dialogues in flight per worker."),
) -> None:
    """Run 5-round dialogues between ESC-Role and the target models into a run folder."""
    from sim.simulation import run_simulation

    cfg = _load_sim_config(config, _sim_overrides(cards, target, role, limit, language, address, workers, concurrency))
    out = out or _default_out("sim")
    with job_progress("simulate") as jp:
        result = run_simulation(cfg, out, on_summary=jp.on_summary, on_start=jp.on_start)
    _emit({"run_dir": str(out), **result})


def _load_score_config(config, judge, method, parser, rubric, address):
    from sim.config import ScoringConfig, load_config

    o: dict[str, Any] = {"judge.model.model": judge, "judge.method": method, "judge.parser": parser,
                         "judge.rubric": rubric, "execution.ray_address": address}
    cfg = load_config(config, ScoringConfig, o)
    if judge and _registry_adapters(judge):
        # A registry judge with adapters (ESC-RANK): one engine, one LoRA per dimension.
        from sim.judges import judge_from_registry

        cfg.judge = judge_from_registry(judge, method=cfg.judge.method, rubric=cfg.judge.rubric,
                                        dimensions=cfg.judge.dimensions)
        cfg.judge.parser = parser or cfg.judge.parser
    _console_env(cfg.execution)
    return cfg


def _registry_adapters(name: str) -> bool:
    from serve.chat import BACKENDS

    if name.partition("/")[0] in BACKENDS and "/" in name:
        return False
    from serve.registry import default_registry

    return bool(default_registry().get(name).adapters)


@app.command()
def score(
    input: Path = typer.Option(..., "--input", "-i", help="A run folder, or a folder/file of official ESC-Eval dialogue JSON."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run folder for the scores (default: the input run folder; <input>-scored for official JSON)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Scoring YAML (sim.config.ScoringConfig)."),
    judge: Optional[str] = typer.Option(None, "--judge", "-j", help="Judge model (registry name or spec)."),
    method: Optional[str] = typer.Option(None, "--method", help="logprob (one pass, P(0..4)) | generate (parse the answer)."),
    parser: Optional[str] = typer.Option(None, "--parser", help="strict | compat (official first-digit rule)."),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="official (score.py) | paper (Figures 12-19)."),
    official_out: Optional[Path] = typer.Option(None, "--official-out", help="Also write scores in the official JSON layout here."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
) -> None:
    """Score dialogues on the 7 dimensions with a judge; resumable."""
    from sim.scoring import run_scoring

    cfg = _load_score_config(config, judge, method, parser, rubric, address)
    with job_progress("score", unit="dialogues") as jp:
        result = run_scoring(cfg, input, out, on_summary=jp.on_summary, on_start=jp.on_start)
    if official_out:
        result["official_files"] = [str(p) for p in _write_official(Path(result["run_dir"]), official_out, cfg.judge.judge_id)]
    result["parse_failures"] = _report_parse_failures(Path(result["run_dir"]), cfg.judge.judge_id)
    _emit(result)


def _report_parse_failures(run_dir: Path, judge_id: str) -> list[dict[str, Any]]:
    """(Target model, dimension) pairs whose answers did not all become scores: a table on
    stderr and the same rows in the JSON result (an empty list when every answer parsed)."""
    from rich.table import Table

    from sim.parse_failures import parse_failure_report

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


def _write_official(run_dir: Path, out_dir: Path, judge_id: str) -> list[Path]:
    from sim.official import write_official_scores
    from sim.runfolder import RunFolder

    run = RunFolder(run_dir, create=False)
    scores = [r for r in run.iter_rows("scores") if r["judge"] == judge_id]
    return write_official_scores(scores, list(run.iter_rows("dialogues")), out_dir)


@app.command()
def leaderboard(run_dirs: list[Path] = typer.Argument(..., help="Run folders (or official score JSON folders)."),
                out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for leaderboard.md/.csv (default <first run>/report).")) -> None:
    """The paper's Table 2: mean x 25 per dimension with bootstrap 95% CIs."""
    _print_leaderboard(run_dirs, out)


def _print_leaderboard(run_dirs: list[Path], out: Optional[Path]) -> dict[str, Path]:
    from analysis import build_leaderboard, load_scores, write_leaderboard

    scores = load_scores(run_dirs)
    groups = _model_groups()
    table = build_leaderboard(scores, groups=groups)
    paths = write_leaderboard(table, out or (Path(run_dirs[0]) / "report"))
    _show_table(table)
    return paths


def _model_groups() -> dict[str, str]:
    from serve.registry import default_registry

    groups: dict[str, str] = {}
    for entry in default_registry().models.values():
        groups[entry.name] = entry.group
        if entry.weights or "{path}" not in entry.spec:
            groups[entry.resolved_spec()] = entry.group
    return groups


def _show_table(table) -> None:
    from rich.table import Table

    from sim.dimensions import DIMENSION_TITLES

    cols = [*DIMENSION_TITLES.values(), "Average"]
    t = Table(title="Leaderboard: mean score x 25 (CIs in leaderboard.md)", pad_edge=False)
    for c in ["Lang", "Group", "Model", "n", *[c[:3] for c in cols], "Fail"]:
        t.add_column(c, justify="right" if c not in ("Lang", "Group", "Model") else "left", overflow="fold")
    for _, r in table.iterrows():
        vals = ["-" if r[c] != r[c] else f"{r[c]:.1f}" for c in cols]  # NaN -> "-"
        t.add_row(r["language"], r["group"], r["model"], str(r["n_dialogues"]), *vals, f"{r['parse_failure_rate']:.0%}")
    console.print(t)


@app.command()
def report(run_dirs: list[Path] = typer.Argument(..., help="Run folders."),
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="Report folder (default <first run>/report).")) -> None:
    """Leaderboard, plots and a self-contained HTML + Markdown report."""
    paths = _print_leaderboard(run_dirs, out)
    try:
        from analysis.report import write_report
    except ImportError:
        write_report = None
    if write_report is not None:
        paths.update(write_report(run_dirs, out))
    _emit({k: str(v) for k, v in paths.items()})


DEMO_CARDS = 8


@app.command()
def demo(
    cards: int = typer.Option(DEMO_CARDS, "--cards", "-n", help="Number of shipped sample cards to play."),
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", help="Run folder (re-running resumes)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Pipeline YAML (sim.config.PipelineConfig) to replace the demo defaults."),
    address: Optional[str] = typer.Option(None, "--address", help="Join an existing Ray cluster."),
) -> None:
    """The whole pipeline on the embedded model: simulate -> score -> leaderboard + report."""
    from sim.config import PipelineConfig, load_config
    from sim.pool import WorkerPool
    from sim.scoring import run_scoring
    from sim.simulation import run_simulation

    cfg = load_config(config, PipelineConfig) if config else demo_config(cards)
    for ex in (cfg.simulation.execution, cfg.scoring.execution):
        _console_env(ex)
        ex.ray_address = address or ex.ray_address
    sim_cfg = cfg.simulation
    console.print(f"[bold]esc-eval demo[/bold]: {cards} cards x {', '.join(t.model for t in sim_cfg.targets)} "
                  f"(role {sim_cfg.role.model}, judge {cfg.scoring.judge.model.model}) -> {out}")
    # One pool for both phases: the engines started for the dialogues also serve the judge.
    with WorkerPool(sim_cfg.execution) as pool:
        with job_progress("simulate") as jp:
            sim_result = run_simulation(sim_cfg, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
        with job_progress("score", unit="dialogues") as jp:
            score_result = run_scoring(cfg.scoring, out, on_summary=jp.on_summary, on_start=jp.on_start, pool=pool)
    paths = _print_leaderboard([out], None)
    try:
        from analysis.report import write_report

        paths.update(write_report([out]))
    except ImportError:
        pass
    _emit({"run_dir": str(out), "simulation": sim_result, "scoring": score_result,
           "files": {k: str(v) for k, v in paths.items()}})


def demo_config(n_cards: int = DEMO_CARDS):
    """The demo's defaults: shorter replies than the paper's 512 tokens so it runs in minutes on CPU."""
    from serve.chat import GenerationParams
    from sim.config import ExecutionConfig, JudgeConfig, ModelRef, PipelineConfig, ScoringConfig, SimulationConfig

    sim_cfg = SimulationConfig(
        cards="sample", languages=["en"], limit=n_cards,
        role=ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=96)),
        targets=[ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=160))],
        execution=ExecutionConfig(workers=1, concurrency=32, chunk_size=4),
    )
    scoring = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded")),
                            execution=ExecutionConfig(workers=1, concurrency=16, chunk_size=4))
    return PipelineConfig(simulation=sim_cfg, scoring=scoring)


@cards_app.command("validate")
def cards_validate(path: Path = typer.Argument(..., help="Card file (ours or the official ESC-Eval JSON).")) -> None:
    """Load and check a card file; print counts."""
    from sim.cards import validate_cards

    _emit(validate_cards(path))


def _register_optional() -> None:
    """Subcommands whose implementations live in other packages (imported lazily when called)."""
    optional = [
        (cards_app, "build", "sim.cardbuild.cli", "cards_build"),
        (cards_app, "stats", "sim.cardbuild.cli", "cards_stats"),
        (cards_app, "export", "sim.cardbuild.cli", "cards_export"),
        (serve_app, "up", "serve.cli", "serve_up"),
        (serve_app, "status", "serve.cli", "serve_status"),
        (serve_app, "down", "serve.cli", "serve_down"),
        (serve_app, "write-config", "serve.cli", "serve_write_config"),
        (train_app, "role", "train.cli", "train_role"),
        (train_app, "rank", "train.cli", "train_rank"),
        (bench_app, "sim", "sim.bench_sim", "bench_sim"),
        (bench_app, "score", "sim.bench_score", "bench_score"),
        (bench_app, "routing", "sim.bench_routing", "bench_routing"),
    ]
    import importlib

    try:
        from analysis.cli import COMMANDS

        for name, fn in COMMANDS.items():
            if name not in ("report", "leaderboard"):  # those two are top-level commands
                analysis_app.command(name)(fn)
    except ImportError:
        pass
    for group, name, module, func in optional:
        try:
            fn = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError):
            continue
        group.command(name)(fn)


_register_optional()


KNOWN_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, TimeoutError, KeyError, OSError)


def _unwrap(exc: BaseException) -> BaseException:
    # Errors raised inside Ray actors arrive wrapped (RayTaskError); show the original.
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def main() -> None:
    try:
        app(standalone_mode=False)
    except SystemExit as e:
        raise
    except typer.Abort:
        console.print("aborted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if _STATE["debug"]:
            raise
        err = _unwrap(exc)
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        sys.stderr.write(f"error: {msg}\n")
        sys.exit(2 if isinstance(err, KNOWN_ERRORS) else 1)


if __name__ == "__main__":
    main()
