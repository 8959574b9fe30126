"""pairwise (beyond the paper): a judge compares two targets' dialogues of one card head to head,
on each dimension, in both orders (job.py, with what `esc-eval pairwise` runs: pairwise_command); which pairs meet, known before any call (plan.py); the
job's config (config.py).

Layer: above sim/jobs/ (its judges are made ready as the scoring job's); beside sim/launch/."""
from esc_eval.sim.pairwise.config import PairwiseConfig, pairwise_config
from esc_eval.sim.pairwise.job import PairwiseJob, judge_pairs, pairwise_command, run_pairwise
from esc_eval.sim.pairwise.plan import Pair, PairsPlan, plan_pairs

__all__ = ["Pair", "PairsPlan", "PairwiseConfig", "PairwiseJob", "judge_pairs", "pairwise_command", "pairwise_config", "plan_pairs", "run_pairwise"]
