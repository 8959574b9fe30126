"""sim: the ESC-Eval domain and the jobs that produce data — role cards and the taxonomy, prompts
as data, one dialogue as a pure async function, the Ray actor pool, simulation and scoring jobs."""
from sim.cards import CardError, RoleCard, load_cards, sample_cards, validate_cards, write_cards
from sim.config import (ConfigError, ExecutionConfig, JudgeConfig, ModelRef, PipelineConfig, ScoringConfig,
                        SimulationConfig, load_config)
from sim.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from sim.dimensions import DIMENSION_NAMES, DIMENSIONS
from sim.pool import WorkerPool, run_pool
from sim.runfolder import RunFolder
from sim.score_parser import parse_compat, parse_score, parse_strict
from sim.scoring import run_scoring, score_dialogue
from sim.simulation import run_simulation
from sim.taxonomy import load_taxonomy

__all__ = [
    "CardError", "ConfigError", "DIMENSIONS", "DIMENSION_NAMES", "DialogueSetup", "ExecutionConfig", "JudgeConfig",
    "ModelRef", "Participant", "PipelineConfig", "RoleCard", "RunFolder", "ScoringConfig", "SimulationConfig", "Turn",
    "WorkerPool", "load_cards", "load_config", "load_taxonomy", "parse_compat", "parse_score", "parse_strict",
    "run_dialogue", "run_pool", "run_scoring", "run_simulation", "sample_cards", "score_dialogue", "validate_cards",
    "write_cards",
]
