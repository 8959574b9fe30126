"""sim.bench.node: `esc-eval check`, what a lab runs on a new node: check.py plans the steps' deadlines
and runs each step in its own process; steps.py holds the steps (machine, plan, engines, workload,
bad engine, demo). What the command does with its options is sim/bench/commands.py.

steps.py is not imported here: each step's process runs it with `python -m`, and a module already
imported by its package would be run a second time (runpy warns)."""
from esc_eval.sim.bench.node.check import CheckInputError, NodeCheckConfig, check_budget, planned_ends, run_node_check, summary_rows

__all__ = ["CheckInputError", "NodeCheckConfig", "check_budget", "planned_ends", "run_node_check", "summary_rows"]
