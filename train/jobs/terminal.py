"""What `esc-eval train role|rank --config FILE` do once their options are parsed: the config read and
checked, a rich progress bar per adapter while Ray Train runs (and one for the Table 4 evaluation),
and a summary table at the end, on stdout. A bad field or a bad data row raises TrainConfigError or
TrainInputError before Ray starts (the CLI says it in one line and exits 2)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from esc_eval.train.config import load_rank_config, load_role_config

console = Console()


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)


def show_summary(title: str, summary: dict[str, Any]) -> None:
    """A training job's summary: one row per adapter, the data, the evaluation where it ran, the registry entry."""
    table = Table(title=title)
    for col in ("adapter", "steps", "train ex.", "final loss", "val loss", "s/step", "first step after", "adapter path"):
        table.add_column(col)
    for r in summary.get("runs", []):
        final = r.get("final", {})
        table.add_row(r["name"], str(r["total_steps"]), str(r["n_train"]),
                      f"{final.get('loss', float('nan')):.4f}",
                      f"{final['val_loss']:.4f}" if final.get("val_loss") is not None else "-",
                      f"{r['mean_step_time_s']:.2f}" if r.get("mean_step_time_s") else "-",
                      f"{r['first_step_at_s']} s" if r.get("first_step_at_s") else "-", r["adapter_path"])
    console.print(table)
    console.print(f"data: {summary.get('data')}")
    if summary.get("evaluation"):
        console.print(Path(summary["evaluation"]["markdown"]).read_text(encoding="utf-8"))
    console.print(f"registry entry: [bold]{summary['registry_entry']}[/bold]")


def train_role_command(config: Path) -> dict[str, Any]:
    """`esc-eval train role`: ESC-Role (LoRA on the role-play dialogues; loss on the seeker's turns) with
    its progress and summary; the summary."""
    from esc_eval.train.jobs.role import run_role_job

    cfg = load_role_config(config)
    with _progress() as progress:
        task = progress.add_task(cfg.data.adapter_name, total=None, info="preparing data")

        def prepared(data, steps: int) -> None:
            progress.update(task, total=steps, info=f"{data.stats['train']} examples; starting Ray Train")

        def step(rec: dict) -> None:
            progress.update(task, completed=rec["step"], info=f"loss {rec['loss']:.4f}  {rec['step_time_s']:.1f} s/step")

        summary = run_role_job(cfg, on_step=step, on_prepared=prepared)
    show_summary("ESC-Role training", summary)
    return summary


def train_rank_command(config: Path) -> dict[str, Any]:
    """`esc-eval train rank`: ESC-RANK (LoRA judges from annotations) and Table 4 on the test split, with
    their progress and summary; the summary."""
    from esc_eval.train.jobs.rank import run_rank_job

    cfg = load_rank_config(config)
    with _progress() as progress:
        tasks: dict[str, Any] = {}
        scoring: list = []

        def prepared(data) -> None:
            from esc_eval.train.jobs.deepspeed_config import total_steps

            for name, (train, _) in data.groups.items():
                tasks[name] = progress.add_task(name, total=total_steps(cfg.train, len(train)), info="waiting")
            if cfg.evaluation.enabled and data.splits["test"]:
                n = len(data.splits["test"]) * (2 if cfg.evaluation.include_base else 1)
                scoring.append(progress.add_task("evaluation", total=n, info="after training"))

        def step(name: str, rec: dict) -> None:
            progress.update(tasks[name], completed=rec["step"],
                            info=f"loss {rec['loss']:.4f}  {rec['step_time_s']:.1f} s/step")

        def scored() -> None:
            if scoring:
                progress.update(scoring[0], advance=1, info="scoring")

        summary = run_rank_job(cfg, on_step=step, on_prepared=prepared, on_scored=scored)
    show_summary("ESC-RANK training", summary)
    return summary


__all__ = ["console", "show_summary", "train_rank_command", "train_role_command"]
