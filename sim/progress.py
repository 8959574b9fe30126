"""Rich progress for long jobs: items done, items/s, tokens/s, failures."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from esc_eval.sim.pool import PoolStats

console = Console(stderr=True)
if not console.is_terminal:  # logs and CI: do not squeeze tables into 80 columns
    console = Console(stderr=True, width=160)


class JobProgress:
    def __init__(self, label: str, unit: str = "dialogues"):
        self.label, self.unit = label, unit
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.task = None

    def on_start(self, total: int, todo: int) -> None:
        if total != todo:
            console.print(f"[dim]{self.label}: {total - todo} of {total} {self.unit} already done, resuming[/dim]")
        self.task = self.progress.add_task(self.label, total=todo, rates="")

    def on_summary(self, summary: dict[str, Any], stats: PoolStats) -> None:
        el = max(stats.elapsed, 1e-6)
        rates = f"{stats.done / el:.2f} {self.unit}/s  {stats.tokens / el:.0f} tok/s  failed {stats.failed}"
        self.progress.update(self.task, advance=1, rates=rates)


@contextlib.contextmanager
def job_progress(label: str, unit: str = "dialogues", enabled: bool = True) -> Iterator[JobProgress]:
    jp = JobProgress(label, unit)
    if not enabled:
        yield jp
        return
    with jp.progress:
        yield jp
