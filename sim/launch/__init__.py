"""launch: a job from what a user typed, before it starts: the jobs from the options of
`esc-eval simulate` and `esc-eval score` (options.py; `score --reply-safety`: emerging.py), their
models placed (placed.py), what `esc-eval plan` computes from a config (run_plan.py), what those
commands (and the analyses that run a judge job) do once their options are parsed (commands.py), and
the check of a judge against the people who were helped (seeker_check.py: people's dialogues, the
judge as their seeker, the seven dimensions).

Layer: above sim/jobs/ (the jobs it launches) and sim/driver/ (the placement it follows); beside
sim/pairwise/; only sim/bench/ imports it."""
from esc_eval.sim.launch.commands import (fidelity_command, judge_agreement_command, score_command,
                                         show_parse_failures, simulate_command)
from esc_eval.sim.launch.emerging import score_reply_safety_run
from esc_eval.sim.launch.options import score_run, scoring_config, simulate_run, simulation_config, write_run_official_scores
from esc_eval.sim.launch.placed import model_uses, placed_scoring, placed_simulation
from esc_eval.sim.launch.run_plan import PlanInputs, load_any_config, load_config_for_plan, plan_run
from esc_eval.sim.launch.seeker_check import (SeekerCheckConfig, run_seeker_check, seeker_check_command,
                                              seeker_check_runner)

__all__ = ["SeekerCheckConfig", "run_seeker_check", "seeker_check_command", "seeker_check_runner", "PlanInputs",
           "fidelity_command", "judge_agreement_command", "score_command", "show_parse_failures",
           "simulate_command", "load_any_config", "load_config_for_plan", "model_uses", "placed_scoring", "placed_simulation",
           "plan_run", "score_reply_safety_run", "score_run", "scoring_config", "simulate_run", "simulation_config",
           "write_run_official_scores"]
