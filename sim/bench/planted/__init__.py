"""sim.bench.planted: runs of planted models (serve/backends/planted.py) through the real jobs, with
the truth planted in them, for the validity checks of the analyses (analysis/checks, analysis/validity):
the scenarios and what each plants (scenarios.py), their cards (cards.py), people's scores of their
dialogues (people.py), the truth (truth.py) and the runs themselves, chunked so that every size of a
replicate is the first chunks of one run (runs.py).

Layer: beside sim/bench's loops and serve benchmarks; imports the jobs below it; analysis never
imports it (the CLI hands `planted_runner` to analysis/validity)."""
from esc_eval.sim.bench.planted.runs import planted_runner, planted_runs, run_chunk
from esc_eval.sim.bench.planted.scenarios import NULL, PLANTED, SCENARIOS, Plan, plan
from esc_eval.sim.bench.planted.truth import scenario_truth, truth

__all__ = ["NULL", "PLANTED", "SCENARIOS", "Plan", "plan", "planted_runner", "planted_runs", "run_chunk",
           "scenario_truth", "truth"]
