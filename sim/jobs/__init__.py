"""jobs: Figure 2 run end to end on the pool: the simulation job (simulation.py; its cards, work
items and demands: simulation_items.py; a course of sessions as one item: simulation_courses.py) and the scoring job (scoring.py; its judges made ready:
scoring_judges.py; what it records in the manifest: scoring_record.py), their configs (config.py), every model checked before the first item
(preflight.py), the demo's pipeline (demo.py), the run fingerprints a resume is checked against
(fingerprint.py), and (beyond the paper) a judge's rating of the seeker's distress at every seeker
turn of real and simulated dialogues (distress.py).

Layer: the top of sim's core, beside sim/cardbuild/; may import every room below it (cards,
dialogue, judging, runs, pool, driver); sim/launch/, sim/pairwise/ and sim/bench/ import it."""
from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.demo import demo_config, run_demo, run_pipeline
from esc_eval.sim.jobs.distress import DistressConfig, DistressJob, distress_rater, distress_ratings, run_distress
from esc_eval.sim.jobs.fingerprint import StaleRunError, check_resume, fingerprint, simulation_inputs
from esc_eval.sim.jobs.scoring import ScoringJob, is_run_folder, prepare_input, run_scoring, score_dialogue
from esc_eval.sim.jobs.simulation import SimulationJob, run_simulation, versions
from esc_eval.sim.jobs.simulation_items import count_items, iter_items, select_cards

__all__ = [
    "DistressConfig", "DistressJob", "distress_rater", "distress_ratings", "run_distress",
    "PipelineConfig", "ScoringConfig", "ScoringJob", "SimulationConfig", "SimulationJob", "StaleRunError",
    "check_resume", "count_items", "demo_config", "fingerprint", "is_run_folder", "iter_items",
    "prepare_input", "run_demo", "run_pipeline", "run_scoring", "run_simulation", "score_dialogue",
    "select_cards", "simulation_inputs", "versions",
]
