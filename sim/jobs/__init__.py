"""jobs: Figure 2 run end to end on the pool: the simulation job (simulation.py; its cards, work
items and demands: simulation_items.py) and the scoring job (scoring.py), both from the commands'
options (options.py), their configs (config.py), what `esc-eval plan` computes from a config
(run_plan.py), the demo's pipeline (demo.py), the run fingerprints a resume is checked against (fingerprint.py), their models placed before
they start (placed.py), and (beyond the paper) a judge's rating of the seeker's distress at every
seeker turn of real and simulated dialogues (distress.py), and a judge comparing two targets' dialogues of
one card head to head (pairwise.py; which pairs meet: pairwise_plan.py; its config: pairwise_config.py).

Layer: the top of sim's core, beside sim/cardbuild/; may import every other sub-package (cards,
dialogue, judging, runs, pool); only sim/bench/ imports it."""
from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.demo import demo_config, run_pipeline
from esc_eval.sim.jobs.distress import DistressConfig, DistressJob, distress_ratings, run_distress
from esc_eval.sim.jobs.pairwise import PairwiseJob, judge_pairs, run_pairwise
from esc_eval.sim.jobs.pairwise_config import PairwiseConfig, pairwise_config
from esc_eval.sim.jobs.pairwise_plan import Pair, PairsPlan, plan_pairs
from esc_eval.sim.jobs.fingerprint import StaleRunError, check_resume, fingerprint, simulation_inputs
from esc_eval.sim.jobs.placed import model_uses, placed_scoring, placed_simulation
from esc_eval.sim.jobs.run_plan import PlanInputs, load_any_config, load_config_for_plan, plan_run
from esc_eval.sim.jobs.scoring import ScoringJob, is_run_folder, prepare_input, run_scoring, score_dialogue
from esc_eval.sim.jobs.options import score_run, scoring_config, simulate_run, simulation_config, write_run_official_scores
from esc_eval.sim.jobs.simulation import SimulationJob, run_simulation, versions
from esc_eval.sim.jobs.simulation_items import count_items, iter_items, select_cards

__all__ = [
    "DistressConfig", "DistressJob", "distress_ratings", "run_distress",
    "Pair", "PairsPlan", "PairwiseConfig", "PairwiseJob", "judge_pairs", "pairwise_config", "plan_pairs", "run_pairwise",
    "PipelineConfig", "PlanInputs", "ScoringConfig", "ScoringJob", "SimulationConfig", "SimulationJob", "StaleRunError",
    "check_resume", "count_items", "demo_config", "fingerprint", "is_run_folder", "iter_items", "load_any_config",
    "load_config_for_plan", "plan_run", "model_uses", "placed_scoring",
    "placed_simulation", "prepare_input", "run_pipeline", "run_scoring", "run_simulation", "score_dialogue", "score_run", "scoring_config",
    "select_cards", "simulate_run", "simulation_config", "simulation_inputs", "versions", "write_run_official_scores",
]
