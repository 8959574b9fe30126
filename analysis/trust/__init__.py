"""analysis.trust: how far a judge's scores can be trusted, against people's. Human scores from
sheets or a study (`human_scores.py`), the judge's accuracy (Table 4, `judge_accuracy.py`) and
agreement between judges (`judge_agreement.py`), correlations with intervals (Tables 3, 13-15,
`correlation.py`, `correlation_ci.py`), calibration of the judge's P(0..4) (`calibration.py`,
`calibration_runs.py`), prediction-powered means anchored on people (`ppi.py`,
`human_leaderboard.py`), and the report's sections on them (`report_sections.py`). Rank-sets and the length audit,
which build on these, are analysis.ranking.

Layer: above annotation, figures and results; beside seekers."""
from esc_eval.analysis.trust.calibration import brier, ece, make_recalibration, reliability
from esc_eval.analysis.trust.calibration_runs import CalibrationResult, calibrate, calibration_markdown, write_calibrated_rows
from esc_eval.analysis.trust.correlation import correlate, correlation_markdown, correlation_table, scores_wide
from esc_eval.analysis.trust.correlation_ci import correlation_ci_markdown, correlations_with_ci
from esc_eval.analysis.trust.human_leaderboard import anchored_markdown, compare_on_humans, human_anchored, write_anchored
from esc_eval.analysis.trust.human_scores import HumanScores, load_human_scores, read_humans
from esc_eval.analysis.trust.judge_accuracy import accuracy_markdown, judge_accuracy, write_accuracy
from esc_eval.analysis.trust.judge_agreement import agreement_table_markdown, judge_agreement
from esc_eval.analysis.trust.ppi import MeanEstimate, classical_mean, ppi_mean

__all__ = ["read_humans", "CalibrationResult", "HumanScores", "MeanEstimate", "accuracy_markdown", "agreement_table_markdown",
           "anchored_markdown", "brier", "calibrate", "calibration_markdown", "classical_mean",
           "compare_on_humans", "correlate", "correlation_ci_markdown", "correlation_markdown", "correlation_table",
           "correlations_with_ci", "ece", "human_anchored", "judge_accuracy", "judge_agreement",
           "load_human_scores", "make_recalibration",
           "ppi_mean", "reliability", "scores_wide",
           "write_accuracy", "write_anchored", "write_calibrated_rows"]
