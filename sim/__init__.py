"""sim: the ESC-Eval domain and the jobs that produce data — role cards and the taxonomy, prompts
as data, one dialogue as a pure async function, the Ray actor pool, simulation and scoring jobs,
the official-format adapter (sim/official.py), card construction (sim/cardbuild/) and the
benchmarks with their reference loops (sim/bench/).

Layer: above serve. sim may import serve; it imports neither analysis, train nor cli."""
from esc_eval.sim.capacity import Concurrency, Demand, choose_concurrency
from esc_eval.sim.cards import CardError, RoleCard, load_cards, safety_cards, sample_cards, validate_card_files, validate_cards, write_cards
from esc_eval.sim.config import (ConfigError, ExecutionConfig, JudgeConfig, ModelRef, PipelineConfig, ScoringConfig,
                        SimulationConfig, load_config)
from esc_eval.sim.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from esc_eval.sim.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, DIMENSIONS, EXTRA_DIMENSIONS, SAFETY
from esc_eval.sim.risk import RISK_LEVELS, normalize_risk_level
from esc_eval.sim.placement import placed_scoring, placed_simulation
from esc_eval.sim.pool import MissingRowsError, WorkerPool, run_pool
from esc_eval.sim.runfolder import RunFolder
from esc_eval.sim.storage import OutputFolder, RunFolderError, RunStorage, is_uri, open_storage
from esc_eval.sim.score_parser import parse_compat, parse_score, parse_strict
from esc_eval.sim.scoring import run_scoring, score_dialogue
from esc_eval.sim.simulation import run_simulation
from esc_eval.sim.taxonomy import load_taxonomy
from esc_eval.sim.usage import compute_usage, record_usage

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
