"""What the pool runs: a Job, with every hook the workers and the driver call declared here with a
working default (as Ray Serve LLM's engine protocol declares its hooks), so a job overrides what it
needs and a misspelled hook is a method nobody calls, visible in review, not a silent probe.

A job travels to the workers pickled (before setup); `kind`, `setup` and `run` are its own, the rest
is optional. The simulation, scoring and distress jobs are sim/jobs/*.py.
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar, Hashable

from esc_eval.sim.runs.runfolder import SCHEMAS

if TYPE_CHECKING:  # annotations only: the pool's modules import this one
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.pool.capacity import Demand
    from esc_eval.sim.pool.participants import ModelPool
    from esc_eval.sim.runs.runfolder import RunFolder

DEFAULT_CONCURRENCY = 32  # a job that says nothing: the simulation's CPU figure


class Job(abc.ABC):
    """A job's items run `concurrency` at a time in each worker; their rows go to the run folder's
    `kind` parts. A RunStopError from run() stops the job: no row for that item, no new item starts."""

    kind: ClassVar[str]  # the run-folder part kind its rows go to: "dialogues" | "scores" | "pairwise"
    unit: ClassVar[str] = "dialogue"  # what an item is, for the concurrency line
    default_concurrency: ClassVar[int] = DEFAULT_CONCURRENCY  # items in flight per worker without GPU engines
    calls_per_item: int | None = None  # model calls one item makes, for the progress line's ETA (None: unknown)

    @abc.abstractmethod
    async def setup(self, models: ModelPool) -> None:
        """Build what the job needs and start its engines (a model that cannot start raises
        RunStopError); `models` outlives the job (engines are shared and reused)."""

    @abc.abstractmethod
    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Process one item; return (rows to write, a small summary for progress)."""

    def open_run(self, run: RunFolder) -> None:
        """The run folder as this worker reaches it, before setup (e.g. where turn checkpoints go)."""

    def after_flush(self, items: list[dict[str, Any]]) -> None:
        """The items whose rows were just written (e.g. drop their checkpoints)."""

    def rerun(self, items: list[dict[str, Any]]) -> None:
        """Items re-sent here after the worker running them was lost (e.g. read the checkpoints it left)."""

    def finish(self) -> None:
        """The job ended on this worker, after its last flush (close files)."""

    def demands(self) -> list[tuple[ModelRef, Demand]]:
        """What an item asks of each model's engine; with the engines' capacities after setup it sizes
        the items in flight on GPUs. None declared: the concurrency stays as configured."""
        return []

    def item_keys(self, item: dict[str, Any]) -> list[Hashable] | None:
        """The row keys an item must leave in the run folder (the driver's final check); None: not checked."""
        return None

    def present_keys(self, run: RunFolder) -> set[Hashable]:
        """The row keys the run folder holds (read once, at the end, when item_keys gives keys)."""
        return set()


def check_job(job: Any) -> None:
    """A clear error before anything starts when `job` is not a Job or names no part kind."""
    if not isinstance(job, Job):
        raise TypeError(f"{type(job).__name__} is not a sim.pool.job.Job (subclass it: its hooks have defaults there)")
    if getattr(type(job), "kind", None) not in SCHEMAS:  # every part kind a run folder has a schema for
        raise TypeError(f"{type(job).__name__}.kind must name the part kind its rows go to: one of {sorted(SCHEMAS)}")
