"""What `esc-eval check`, `esc-eval bench gpu` and `esc-eval bench serve` do once their options are parsed:
the benchmark's config validated (one line on a bad field, before anything starts), its progress lines
and tables on stderr, the result returned for the command to print (and write to --out), with the
verdict its exit status comes from: None, or (exit status, lines).

Layer: the top of sim.bench (it drives node/, gpu/ and serve/). Analysis may not be imported here: the
plots of `bench serve` come in as a function (analysis/figures/bench_plots.py)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from esc_eval.serve.registry.ref import DEFAULT_MODEL
from esc_eval.sim.bench.loops.rubric import RUBRIC_DIALOGUES
from esc_eval.sim.bench.node.check import CHECK_BUDGET_MIN

Verdict = tuple[int, list[str]] | None

COLORS = {"ok": "green", "failed": "red", "stopped": "red", "skipped": "yellow"}
RUBRIC_N_BOOT = 1000  # `bench rubric`: bootstrap resamples of the dialogues for each kappa's interval


def unwritable(path: Path) -> str | None:
    """Why `path` cannot be written (its nearest existing folder is not writable, or it is a folder), or
    None: an unwritable place fails before the check, not after it (and nothing is created yet)."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not os.access(folder, os.W_OK) or path.is_dir():
        return f"{path}: cannot be written ({folder} is not writable, or it is a folder)"
    return None


def check_command(judge: str = DEFAULT_MODEL, role: str = DEFAULT_MODEL, target: str = DEFAULT_MODEL,
                  budget_min: float = CHECK_BUDGET_MIN, steps: str | None = None, source: Path | None = None,
                  cards: Path | None = None, max_tokens: int | None = None,
                  out: Path | None = None) -> Verdict:
    """`esc-eval check`: prove this node (sim/bench/node/check.py run_node_check); `steps` comma-separated.
    None when every step passed, else the exit status 1 (each step's line is printed already)."""
    from rich.console import Console
    from rich.table import Table

    from esc_eval.serve.config import validate_config
    from esc_eval.sim.bench.node.check import CheckInputError, NodeCheckConfig, run_node_check, summary_rows

    data = {"judge": judge, "role": role, "target": target, "budget_min": budget_min, "max_tokens": max_tokens,
            "steps": [s.strip() for s in steps.split(",") if s.strip()] if steps else None,
            "source": str(source) if source else None, "cards": str(cards) if cards else None}
    cfg = validate_config(NodeCheckConfig, {k: v for k, v in data.items() if v is not None}, "check", CheckInputError)
    console = Console(stderr=True)

    def say(step: dict[str, Any]) -> None:
        console.print(f"[{COLORS.get(step['status'], 'white')}]{step['status']:>7}[/] {step['name']:<10} "
                      f"{step['seconds']:>5.0f} s  {step.get('why') or ''}", highlight=False, soft_wrap=True)

    console.print(f"[bold]esc-eval check[/bold]: judge {cfg.judge}, role {cfg.role}, target {cfg.target}; "
                  f"budget {cfg.budget_min:g} min")
    keep = out.with_name(out.stem + "-steps") if out else None
    result = run_node_check(cfg, say, keep=keep)
    table = Table(title=f"esc-eval check on {result['device']}: {result['seconds']:.0f} s of {cfg.budget_min * 60:.0f}")
    for col in ("step", "status", "seconds / deadline", "what it found"):
        table.add_column(col, overflow="fold")
    for name, status, limit, why in summary_rows(result):
        table.add_row(name, f"[{COLORS.get(status, 'white')}]{status}[/]", limit, why)
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
    return None if result["ok"] else (1, [])


def bench_gpu_command(out: Path | None = None, **options: Any) -> tuple[dict[str, Any], Verdict]:
    """`esc-eval bench gpu`: its `options` (GpuBenchConfig's fields; None: the default) validated, then the
    benchmark with its progress lines on stderr. The result, and exit status 1 with a line per phase of
    ours that did not answer every call (the JSON stays to read; its rates are no measurement)."""
    from esc_eval.serve.config import ConfigError, validate_config
    from esc_eval.sim.bench.gpu.bench import GpuBenchConfig, failed_phases, run_bench_gpu

    cfg = validate_config(GpuBenchConfig, _given(options), "bench gpu", ConfigError)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)  # an unwritable folder fails now, not after the run

    def say(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    result = run_bench_gpu(cfg, say)
    failed = failed_phases(result)
    return result, (1, failed) if failed else None


def bench_serve_command(out: Path | None = None, plots: Callable[[dict[str, Any], Path], list] | None = None,
                        verbose: bool = False, **options: Any) -> tuple[dict[str, Any], Verdict]:
    """`esc-eval bench serve`: its `options` (ServeBenchConfig's fields; None: the default) validated, then
    the load with a progress line per level on stderr; with routing, the machine the replicas ran on;
    with `out`, the plots beside it (`plots`: analysis/figures/bench_plots.py bench_serve_plots). The
    result, and exit status 130 when Ctrl-C stopped it (what was measured stays in the result)."""
    import logging

    from esc_eval.serve.config import validate_config
    from esc_eval.sim.bench.serve.bench import ServeBenchConfig, bench_serve
    from esc_eval.sim.bench.serve.client import BenchInputError

    if not verbose:  # one log line per measured request (httpx at INFO, once Ray set the root up) is noise
        logging.getLogger("httpx").setLevel(logging.WARNING)
    cfg = validate_config(ServeBenchConfig, _given({**options, "slos": options.get("slos") or []}), "bench serve",
                          BenchInputError)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)  # an unwritable folder fails now, not after the load
    result = bench_serve(cfg, on_progress=_progress_printer())
    if options.get("routing"):
        from esc_eval.serve.devices.cpu import resolve_dtype, runtime_summary

        result["machine"] = runtime_summary(resolve_dtype("auto"))  # the replicas ran here, dtype auto
    if out and plots is not None:
        result["plots"] = [str(p) for p in plots(result, out.with_suffix(""))]
    return result, (130, ["interrupted: wrote what was measured"]) if result["interrupted"] else None


def bench_rubric_command(agreement: Callable[..., dict[str, Any]], dialogues: int = RUBRIC_DIALOGUES, sources: list[Path] | None = None,
                         model: str = DEFAULT_MODEL, folder: Path | None = None, n_boot: int = RUBRIC_N_BOOT) -> dict[str, Any]:
    """`esc-eval bench rubric`: the same dialogues scored one call per dialogue and one per dimension
    (loops/rubric.py), then their agreement by `agreement` (analysis/bench/rubric.py rubric_agreement,
    passed in: sim may not import analysis), with the machine it ran on."""
    from esc_eval.serve.devices.cpu import runtime_summary
    from esc_eval.sim.bench.loops.rubric import bench_rubric_scoring

    scored = bench_rubric_scoring(dialogues=dialogues, sources=sources, model=model, folder=folder)
    judges = scored["judges"]
    return {"machine": runtime_summary(), **scored,
            **agreement(scored["run_dir"], judges["per_dimension"], judges["one_call"], n_boot=n_boot)}


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The options given (None: the config's default), paths as text."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in options.items() if v is not None}


def _progress_printer():
    """A progress line per level (and every 10 s while one runs) on stderr."""
    def show(arm: str, run) -> None:
        ok = run.recorder.records
        done = "done" if run.finished else "running"
        sys.stderr.write(f"[bench serve] {arm} {run.shape.label()}: {done}, {run.units_completed} units ok, "
                         f"{run.units_failed} failed, {sum(r.success for r in ok)} requests, "
                         f"{run.duration_s:.0f} s\n")
        sys.stderr.flush()

    return show


__all__ = ["bench_rubric_command", "Verdict", "bench_gpu_command", "bench_serve_command", "check_command", "unwritable"]
