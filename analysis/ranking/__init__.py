"""analysis.ranking (beyond the paper): how far a judge's ranking of the targets holds: rank-sets with
a simultaneous guarantee (`rank_sets.py`), the judge's length bias and whether the ranking survives
holding length fixed (`length_bias.py`), and their report sections (`bias_sections.py`).

Layer: above trust (rank-sets anchor on people's scores through its PPI means)."""
from esc_eval.analysis.ranking.length_bias import (length_audit, length_bias_markdown, length_bias_of_runs, length_frame,
                                                   words_per_turn)
from esc_eval.analysis.ranking.rank_sets import (build_rank_sets, rank_set_bounds, rank_sets_markdown, simultaneous_means,
                                                 with_rank_sets, write_rank_sets)

__all__ = ["build_rank_sets", "length_audit", "length_bias_markdown", "length_bias_of_runs", "length_frame",
           "rank_set_bounds", "rank_sets_markdown", "simultaneous_means", "with_rank_sets", "words_per_turn",
           "write_rank_sets"]
