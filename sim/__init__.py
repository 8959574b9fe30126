"""sim: the ESC-Eval method and the machinery that runs it, one sub-package per concept.

The method (Figure 2 of the paper: role cards -> ESC-Role plays the seeker -> the model under test
answers -> ESC-RANK judges):
  cards/      the role cards, the taxonomy, crisis-risk levels
  dialogue/   one dialogue as a pure async function, role-play prompts, the transcript's lines
  judging/    dimensions, rubrics, the judge's prompts and plan, score parsing
  courses/    a card run as a course of sessions: the between-session step, the continuity prompt
The machinery:
  runs/       the run folder: schemas, storage, checkpoints, usage, the official JSON
  pool/       the batch layer: Ray actor pool, workers, call settings, capacity, placement
  jobs/       the simulation and scoring jobs, their configs, fingerprints, placement
  cardbuild/  building cards from source datasets (Section 2.2)
  bench/      the benchmarks and the release's reference loops
prompt_files.py finds the shipped data (sim/data/: prompts, card sets, taxonomy) for all of them;
console.py is the terminal (stderr) their progress and every command's tables go to.

Layers (pyproject [tool.importlinter], checked in CI): bench > jobs | cardbuild > pool > runs >
courses > judging > dialogue | cards > prompt_files | console; the domain never imports runs, pool or jobs; the pool
imports nothing of the domain. sim imports serve; it imports neither analysis, train nor cli.
This package exports the names most callers need, from where they live."""
from esc_eval.serve.config import ConfigError, load_config
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import (CardError, RoleCard, load_cards, safety_cards, sample_cards, validate_card_files,
                                     validate_cards, write_cards)
from esc_eval.sim.cards.risk import RISK_LEVELS, normalize_risk_level
from esc_eval.sim.cards.taxonomy import load_taxonomy
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig
from esc_eval.sim.launch.placed import placed_scoring, placed_simulation
from esc_eval.sim.jobs.scoring import run_scoring, score_dialogue
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, DIMENSIONS, EXTRA_DIMENSIONS, SAFETY
from esc_eval.sim.judging.score_parser import parse_compat, parse_score, parse_strict
from esc_eval.sim.pool.capacity import Concurrency, Demand, choose_concurrency
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.pool import MissingRowsError, WorkerPool, run_pool
from esc_eval.sim.runs.open import OutputFolder, open_storage
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import RunFolderError, RunStorage, is_uri
from esc_eval.sim.runs.usage import compute_usage, record_usage

__all__ = [
    "Concurrency", "Demand", "choose_concurrency", "compute_usage", "placed_scoring", "placed_simulation", "record_usage",
    "MissingRowsError", "OutputFolder", "RunFolderError", "RunStorage", "is_uri", "open_storage",
    "CardError", "ConfigError", "DIMENSIONS", "DIMENSION_NAMES", "DialogueSetup", "ExecutionConfig", "JudgeConfig",
    "ModelRef", "Participant", "PipelineConfig", "RoleCard", "RunFolder", "ScoringConfig", "SimulationConfig", "Turn",
    "WorkerPool", "load_cards", "load_config", "load_taxonomy", "parse_compat", "parse_score", "parse_strict",
    "run_dialogue", "run_pool", "run_scoring", "run_simulation", "sample_cards", "score_dialogue", "validate_card_files", "validate_cards",
    "write_cards", "ALL_DIMENSION_NAMES", "EXTRA_DIMENSIONS", "SAFETY", "RISK_LEVELS", "normalize_risk_level",
    "safety_cards",
]
