"""Progress of a batched scoring: batches and requests, and the score rows they became.

On a terminal a rich bar of score rows written with the batches' and requests' counts beside it;
otherwise (a log, CI, a pipe) plain lines, as the jobs' progress writes them (sim/driver/progress.py):
one at the start, one on every change of a batch's state, and one at least every `interval_s` in
between (a batch can run for hours without a change).
"""
from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from esc_eval.sim.driver.progress import DEFAULT_INTERVAL_S, INTERVAL_ENV, console


@dataclass
class BatchCounts:
    """What the batches of this scoring came to so far."""

    rows_total: int = 0  # score rows this scoring owes (dimensions x judges of the dialogues to score)
    rows_done: int = 0
    states: Counter = field(default_factory=Counter)  # batches by the provider's status (this scoring's)
    sent: int = 0  # requests in batches sent by this scoring (found again after a restart included)
    answered: int = 0  # requests answered
    failed: int = 0  # requests failed, errored, expired or cancelled

    def line(self, label: str, elapsed: float) -> str:
        batches = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "none yet"
        return (f"{label}: batches {sum(self.states.values())} ({batches}) | requests {self.answered}/{self.sent} "
                f"answered, {self.failed} failed | score rows {self.rows_done}/{self.rows_total} | "
                f"elapsed {int(elapsed) // 60}m{int(elapsed) % 60:02d}s")


class BatchProgress:
    """See the module docstring."""

    def __init__(self, label: str, plain: bool | None = None, interval_s: float | None = None):
        self.label = label
        self.plain = (not console.is_terminal) if plain is None else plain
        self.interval_s = max(0.05, float(interval_s if interval_s is not None
                                          else os.environ.get(INTERVAL_ENV) or DEFAULT_INTERVAL_S))
        self.counts = BatchCounts()
        self.started = time.monotonic()
        self._last, self._last_text = 0.0, ""
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)
        self.task = None

    def update(self, force: bool = False) -> None:
        c = self.counts
        if not self.plain:
            states = ", ".join(f"{n} {s}" for s, n in sorted(c.states.items())) or "none yet"
            info = f"batches: {states}  requests {c.answered}/{c.sent} answered, {c.failed} failed"
            if self.task is None:
                self.task = self.progress.add_task(f"{self.label} (score rows)", total=c.rows_total, info=info)
            self.progress.update(self.task, total=c.rows_total, completed=c.rows_done, info=info)
            return
        now = time.monotonic()
        text = c.line(self.label, now - self.started)
        changed = text.split(" | elapsed")[0] != self._last_text.split(" | elapsed")[0]
        if force or changed or now - self._last >= self.interval_s:
            self._last, self._last_text = now, text
            console.print(text, markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def batch_progress(label: str = "score --batch", plain: bool | None = None) -> Iterator[BatchProgress]:
    """A BatchProgress shown while the batches run (rich on a terminal, plain lines otherwise)."""
    bp = BatchProgress(label, plain=plain)
    if bp.plain:
        yield bp
        bp.update(force=True)
        return
    with bp.progress:
        yield bp
