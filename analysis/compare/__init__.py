"""analysis.compare: paired comparisons. Two score sets on the same dialogues or cards: the mean
difference, its bootstrap interval, a paired permutation p-value and Holm's correction
(`paired.py`), and two runs compared dimension by dimension, on people's scale when human scores
are given (`runs.py`, `esc-eval compare`).

Layer: above trust and results."""
from esc_eval.analysis.compare.paired import compare_models_of_runs, holm, paired_comparison, pairwise_comparisons
from esc_eval.analysis.compare.runs import compare_of_runs, compare_runs, comparison_markdown, write_comparison

__all__ = ["compare_of_runs", "compare_models_of_runs", "compare_runs", "comparison_markdown", "holm", "paired_comparison", "pairwise_comparisons", "write_comparison"]
