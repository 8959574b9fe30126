"""analysis.trust: how far a judge's scores can be trusted, against people's. Human scores from
sheets or a study (`human_scores.py`), the judge's accuracy (Table 4, `judge_accuracy.py`) and
agreement between judges (`judge_agreement.py`), correlations with intervals (Tables 3, 13-15,
`correlation.py`, `correlation_ci.py`), calibration of the judge's P(0..4) (`calibration.py`,
`calibration_runs.py`), prediction-powered means anchored on people (`ppi.py`,
`human_leaderboard.py`), the report's sections on them (`report_sections.py`), rank-sets with a
simultaneous guarantee (`rank_sets.py`), the judge's length bias (`length_bias.py`) and their
report sections (`bias_sections.py`).

Layer: above annotation, figures and results; beside seekers."""
from esc_eval.analysis.trust.calibration import brier, ece, make_recalibration, reliability
from esc_eval.analysis.trust.calibration_runs import CalibrationResult, calibrate, calibration_markdown, write_calibrated_rows
from esc_eval.analysis.trust.correlation import correlate, correlation_markdown, correlation_table, scores_wide
from esc_eval.analysis.trust.correlation_ci import correlation_ci_markdown, correlations_with_ci
from esc_eval.analysis.trust.human_leaderboard import anchored_markdown, compare_on_humans, human_anchored, write_anchored
from esc_eval.analysis.trust.human_scores import HumanScores, load_human_scores
from esc_eval.analysis.trust.judge_accuracy import accuracy_markdown, judge_accuracy, write_accuracy
from esc_eval.analysis.trust.judge_agreement import agreement_table_markdown, judge_agreement
from esc_eval.analysis.trust.length_bias import (
    length_audit, length_bias_markdown, length_bias_of_runs, length_frame, words_per_turn,
)
from esc_eval.analysis.trust.ppi import MeanEstimate, classical_mean, ppi_mean
from esc_eval.analysis.trust.rank_sets import (
    build_rank_sets, rank_set_bounds, rank_sets_markdown, simultaneous_means, with_rank_sets, write_rank_sets,
)

__all__ = ["CalibrationResult", "HumanScores", "MeanEstimate", "accuracy_markdown", "agreement_table_markdown",
           "anchored_markdown", "brier", "build_rank_sets", "calibrate", "calibration_markdown", "classical_mean",
           "compare_on_humans", "correlate", "correlation_ci_markdown", "correlation_markdown", "correlation_table",
           "correlations_with_ci", "ece", "human_anchored", "judge_accuracy", "judge_agreement", "length_audit",
           "length_bias_markdown", "length_bias_of_runs", "length_frame", "load_human_scores", "make_recalibration",
           "ppi_mean", "rank_set_bounds", "rank_sets_markdown", "reliability", "scores_wide", "simultaneous_means",
           "with_rank_sets", "words_per_turn", "write_accuracy", "write_anchored", "write_calibrated_rows",
           "write_rank_sets"]
