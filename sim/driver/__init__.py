"""driver: what the driver does around a pool run, the pool itself knowing nothing of it: the
job's model calls prepared (calls.py: the call cache, limits per model for the whole run, the spend
cap), the run's models placed before it starts and the plan followed (placement.py), progress while
it runs (progress.py), what it came to, for the exit status (outcome.py), and the driver's engine
environment passed on to the workers (environment.py).

Layer: above sim/pool/ (what it drives); imports nothing of the domain (cards, dialogue, judging)."""
from esc_eval.sim.driver.calls import CallSettings, ModelCalls, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.driver.environment import ENGINE_ENV_KEYS, driver_env, pass_driver_env
from esc_eval.sim.driver.outcome import EXIT_BUDGET, EXIT_FAILURES, JobOutcome, outcome_line, run_stopped
from esc_eval.sim.driver.placement import cluster_hardware, make_plan, placed, plan_messages
from esc_eval.sim.driver.progress import console, job_progress, progress_line

__all__ = ["CallSettings", "ENGINE_ENV_KEYS", "EXIT_BUDGET", "EXIT_FAILURES", "JobOutcome", "ModelCalls", "PlannedModel", "check_calls",
           "cluster_hardware", "console", "driver_env", "job_progress", "make_plan", "outcome_line", "placed", "plan_messages",
           "pass_driver_env", "prepare_calls", "progress_line", "run_stopped"]
