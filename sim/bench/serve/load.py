"""Load shapes of `esc-eval bench serve`: how units (dialogues, judge items, random requests) are
started against the endpoint, and what one load level records.

  fixed concurrency  C units in flight; a finished unit's slot takes the next one at once
  arrival rate       new units start as a Poisson process of R per second (exponential gaps,
                     seeded), optionally capped at C in flight (as vLLM's --max-concurrency)
A level first runs `warmup` units at the same shape and drops their records, then measures until
`count` units have started or `duration_s` has passed (no new start after it), and waits for the
units in flight. Every record is kept as it arrives, so an interrupted level still reports what
finished (`LevelRun` is the live state).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from esc_eval.sim.bench.serve.client import MeasuredModel, Recorder, StreamingClient
from esc_eval.sim.bench.serve.workloads import Unit


@dataclass
class LoadShape:
    """One level of a sweep."""

    concurrency: int | None = None  # units in flight (None: no cap, only with a rate)
    rate: float | None = None  # new units per second, Poisson (None: start as slots free up)
    count: int | None = None  # units measured (None: until duration_s)
    duration_s: float | None = None  # stop starting units after this (None: until count)
    warmup: int = 0  # units run first at the same shape, not measured
    seed: int = 0

    def label(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency}")
        if self.rate is not None:
            parts.append(f"{self.rate:g} units/s")
        return ", ".join(parts) or "unbounded"


@dataclass
class LevelRun:
    """What a level has done so far (read again after an interrupt)."""

    shape: LoadShape
    recorder: Recorder = field(default_factory=Recorder)
    started: float = 0.0
    finished: float | None = None
    launched: int = 0
    units_completed: int = 0
    units_failed: int = 0
    unit_errors: list[str] = field(default_factory=list)
    source_indices: list[int] = field(default_factory=list)
    warmup_indices: list[int] = field(default_factory=list)
    warmup_failed: int = 0
    stop: bool = False  # set on Ctrl-C: no unit is started after it, whatever a running one does with the cancel

    @property
    def duration_s(self) -> float:
        if not self.started:
            return 0.0
        return (self.finished or time.perf_counter()) - self.started

    @property
    def in_flight(self) -> int:
        return self.launched - self.units_completed - self.units_failed


async def _run_unit(unit: Unit, client: StreamingClient, recorder: Recorder) -> str | None:
    """Run one unit; its error text, or None when every request succeeded."""
    model = MeasuredModel(client, recorder, unit.name)
    try:
        await unit.run(model)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failed unit is data
        return model.failures[0] if model.failures else f"{type(exc).__name__}: {exc}"
    return None


async def run_level(units: Iterator[Unit], client: StreamingClient, run: LevelRun,
                    on_progress: Callable[[LevelRun], None] | None = None, progress_every_s: float = 10.0) -> LevelRun:
    """Warm up, then measure one level into `run` (updated as units finish)."""
    import numpy as np

    shape = run.shape
    if shape.warmup:
        warm = Recorder()
        sem = asyncio.Semaphore(shape.concurrency or shape.warmup)

        async def warm_one(unit: Unit) -> None:
            async with sem:
                if await _run_unit(unit, client, warm) is not None:
                    run.warmup_failed += 1

        warm_units = [next(units) for _ in range(shape.warmup)]
        run.warmup_indices = [u.source_index for u in warm_units]
        await asyncio.gather(*(warm_one(u) for u in warm_units))

    deadline = None
    run.started = time.perf_counter()
    if shape.duration_s is not None:
        deadline = run.started + shape.duration_s
    count = shape.count

    def more() -> bool:
        if run.stop or (count is not None and run.launched >= count):
            return False
        return deadline is None or time.perf_counter() < deadline

    def take() -> Unit:
        unit = next(units)
        run.launched += 1
        run.source_indices.append(unit.source_index)
        return unit

    async def finish(unit: Unit) -> None:
        err = await _run_unit(unit, client, run.recorder)
        if err is None:
            run.units_completed += 1
        else:
            run.units_failed += 1
            run.unit_errors.append(err)

    async def progress() -> None:
        while on_progress is not None:
            await asyncio.sleep(progress_every_s)
            on_progress(run)

    reporter = asyncio.create_task(progress())
    tasks: set[asyncio.Task] = set()
    try:
        if shape.rate is None:
            async def slot() -> None:
                while more():
                    await finish(take())

            await asyncio.gather(*(slot() for _ in range(shape.concurrency or 1)))
        else:
            rng = np.random.default_rng(shape.seed)
            sem = asyncio.Semaphore(shape.concurrency) if shape.concurrency else None

            async def capped(unit: Unit) -> None:
                if sem is None:
                    await finish(unit)
                else:
                    async with sem:
                        await finish(unit)

            next_at = time.perf_counter()
            while more():
                unit = take()
                task = asyncio.create_task(capped(unit))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                if count is not None and run.launched >= count:
                    break  # no gap to wait after the last start
                next_at += float(rng.exponential(1.0 / shape.rate))
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            if tasks:
                await asyncio.gather(*tasks)
        run.finished = time.perf_counter()
    finally:
        reporter.cancel()
        for task in tasks:
            task.cancel()
    return run
