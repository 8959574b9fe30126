"""Progress for long jobs: items done, items/s, tokens/s, failures, ETA.

On a terminal: a rich progress bar. Otherwise (a log file, CI, a pipe) a rich bar shows nothing
until the end, so plain lines are written instead: one at the start, one at the end, and one at
least every `interval_s` (30 s; $ESC_EVAL_PROGRESS_INTERVAL) in between, from a ticker thread even
when nothing finished, because a phase can go minutes between two finished dialogues (engine
start, long decodes) and a silent log looks hung.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from esc_eval.sim.console import console
from esc_eval.sim.pool.stats import PoolStats

DEFAULT_INTERVAL_S = 30.0
INTERVAL_ENV = "ESC_EVAL_PROGRESS_INTERVAL"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress_line(label: str, unit: str, done: int, total: int, tokens: int, failed: int, elapsed: float,
                  calls: int = 0, calls_per_item: float | None = None) -> str:
    """One self-contained line: 'simulate: 3/8 dialogues | 52 calls | 0.05 dialogues/s | 85 tok/s | ETA 1m40s | ...'.
    With the model calls answered so far (items in flight included) and the calls one item makes,
    the ETA follows the calls: items that all finish together still show progress on the way."""
    el = max(elapsed, 1e-6)
    rate = done / el
    eta = (total - done) / rate if rate > 0 else None
    expected = total * calls_per_item if calls_per_item else 0
    if calls and expected and calls < expected:
        eta = el * (expected - calls) / calls
    if done >= total:
        eta = 0.0
    calls_part = f" | {calls} calls" if calls else ""
    return (f"{label}: {done}/{total} {unit}{calls_part} | {rate:.3f} {unit}/s | {tokens / el:.0f} tok/s | "
            f"ETA {_duration(eta)} | elapsed {_duration(elapsed)} | failed {failed}")


class JobProgress:
    def __init__(self, label: str, unit: str = "dialogues", plain: bool | None = None,
                 interval_s: float | None = None):
        self.label, self.unit = label, unit
        self.plain = (not console.is_terminal) if plain is None else plain
        if interval_s is None:
            interval_s = float(os.environ.get(INTERVAL_ENV) or DEFAULT_INTERVAL_S)
        self.interval_s = max(0.05, interval_s)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.task = None
        self.total = 0
        self.stats: PoolStats | None = None
        self.started = time.monotonic()
        self._last_line = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._begun = False

    # -- plain lines ---------------------------------------------------------------------------
    def line(self) -> str:
        s = self.stats
        if s is None:
            return progress_line(self.label, self.unit, 0, self.total, 0, 0, time.monotonic() - self.started)
        return progress_line(self.label, self.unit, s.done, self.total, max(s.tokens, s.live_tokens), s.failed,
                             time.monotonic() - self.started, max(s.calls, s.live_calls), s.calls_per_item)

    def _emit(self, force: bool = False) -> None:
        if not self._begun:  # the total is not known before on_start
            return
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_line < self.interval_s:
                return
            self._last_line = now
            text = self.line()
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.interval_s / 4)):
            self._emit()

    def start_ticker(self) -> None:
        if self.plain and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name=f"progress-{self.label}", daemon=True)
            self._ticker.start()

    def stop_ticker(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(5)
            self._ticker = None

    # -- callbacks of run_simulation / run_scoring -------------------------------------------------
    def on_start(self, total: int, todo: int) -> None:
        if total != todo:
            console.print(f"[dim]{self.label}: {total - todo} of {total} {self.unit} already done, resuming[/dim]")
        self.total = todo
        self.started = time.monotonic()  # rates over this run's work, not the set-up before it
        self._begun = True
        if self.plain:
            self._emit(force=True)
            return
        self.task = self.progress.add_task(self.label, total=todo, rates="")

    def on_summary(self, summary: dict[str, Any], stats: PoolStats) -> None:
        """A finished item, or a live update (`summary["live"]`: calls and tokens of items in flight)."""
        self.stats = stats
        if summary.get("setup"):  # the workers set up: what each keeps in flight, and why
            reasons = sorted({w["concurrency"]["reason"] for w in stats.workers if w.get("concurrency")})
            for reason in reasons:
                console.print(f"[dim]{self.label}: {reason}[/dim]", highlight=False)
            return
        live = bool(summary.get("live"))
        if self.plain:
            self._emit(force=not live and stats.done >= self.total)
            return
        el = max(stats.elapsed, 1e-6)
        tokens, calls = max(stats.tokens, stats.live_tokens), max(stats.calls, stats.live_calls)
        rates = f"{calls} calls  {stats.done / el:.2f} {self.unit}/s  {tokens / el:.0f} tok/s  failed {stats.failed}"
        self.progress.update(self.task, advance=0 if live else 1, rates=rates)


@contextlib.contextmanager
def job_progress(label: str, unit: str = "dialogues", enabled: bool = True, plain: bool | None = None,
                 interval_s: float | None = None) -> Iterator[JobProgress]:
    """Progress of one phase: a rich bar on a terminal, plain lines every `interval_s` otherwise."""
    jp = JobProgress(label, unit, plain=plain, interval_s=interval_s)
    if not enabled:
        yield jp
        return
    if jp.plain:
        jp.start_ticker()
        try:
            yield jp
        finally:
            jp.stop_ticker()
        return
    with jp.progress:
        yield jp
