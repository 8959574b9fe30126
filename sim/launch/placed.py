"""The jobs' models placed before they start (pool/placement.py `placed` makes and follows the plan):

    with placed_simulation(cfg, run_dir) as cfg:    # what `esc-eval simulate` does
        run_simulation(cfg, run_dir)

Every model is checked first (sim/jobs/preflight.py, where `model_uses` says which models a simulation
and a scoring config name and what each is used for: role, target, judge); each job says how long its
sequences are expected to be (what a GPU Serve replica is sized by)."""
from __future__ import annotations

import contextlib
import logging
from typing import Callable, Iterator

from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.preflight import model_uses, preflight_run
from esc_eval.sim.jobs.scoring import expected_seq_tokens as scoring_seq_tokens
from esc_eval.sim.jobs.simulation_items import checked_inputs
from esc_eval.sim.jobs.simulation_items import expected_seq_tokens as simulation_seq_tokens
from esc_eval.sim.driver.placement import placed

log = logging.getLogger("esc_eval.placement")


@contextlib.contextmanager
def placed_simulation(cfg: SimulationConfig, run_dir: str | None = None,
                      say: Callable[[str], None] = log.info) -> Iterator[SimulationConfig]:
    checked_inputs(cfg, run_dir)  # a bad card file or output folder: one line at once, before the models
    preflight_run(cfg)  # every model checked before the plan deploys or starts any of them
    with placed(cfg.execution, model_uses(cfg), run_dir=run_dir, job="simulation", say=say,
                seq_tokens=lambda: simulation_seq_tokens(cfg)) as (ex, _plan):
        yield cfg.model_copy(update={"execution": ex})


@contextlib.contextmanager
def placed_scoring(cfg: ScoringConfig, run_dir: str | None = None,
                   say: Callable[[str], None] = log.info) -> Iterator[ScoringConfig]:
    preflight_run(scoring=cfg)
    with placed(cfg.execution, model_uses(scoring=cfg), run_dir=run_dir, job="scoring", say=say,
                seq_tokens=lambda: scoring_seq_tokens(cfg, run_dir)) as (ex, _plan):
        yield cfg.model_copy(update={"execution": ex})


__all__ = ["model_uses", "placed_scoring", "placed_simulation"]
