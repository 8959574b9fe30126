"""analysis: everything that reads results — leaderboards (Table 2), judge accuracy (Table 4),
correlations (Tables 3, 13-15), paired model comparisons, text metrics, human annotation and
inter-annotator agreement, role-play evaluation (Table 1, Figure 3, fidelity checks), judge
calibration against human scores and human-anchored (prediction-powered) means, plots and the
HTML/Markdown report; beyond the paper, the harm-weighted crisis-safety summary (safety.py)
and cooperative vs worst-case seekers (seekers.py). The `esc-eval report|leaderboard|analysis` commands are in cli/.

Layer: reads results only. analysis may import sim's data definitions (dimensions, record
schemas, the official-format adapter, run folders); it never imports serve, train or cli, so
whatever needs the model registry (e.g. Table 2 groups) is passed in by the caller."""
from esc_eval.analysis.annotation import (
    AnnotationError,
    agreement_markdown,
    agreement_summary,
    export_annotation_sheets,
    icc_oneway,
    icc_table,
    import_annotations,
    krippendorff_alpha,
    pairwise_kappa,
    quadratic_weighted_kappa,
)
from esc_eval.analysis.compare import holm, paired_comparison, pairwise_comparisons
from esc_eval.analysis.correlation import correlate, correlation_markdown, correlation_table, scores_wide
from esc_eval.analysis.judge_agreement import agreement_table_markdown, judge_agreement
from esc_eval.analysis.judge_accuracy import accuracy_markdown, judge_accuracy, write_accuracy
from esc_eval.analysis.leaderboard import (
    build_leaderboard,
    build_leaderboard_by,
    format_cell,
    leaderboard_by_markdown,
    leaderboard_markdown,
    seed_spread,
    write_leaderboard,
)
from esc_eval.analysis.loaders import (
    AnalysisInputError,
    is_official_json,
    official_kind,
    load_dialogues,
    load_manifests,
    load_official_dialogues,
    load_official_scores,
    load_scores,
)
from esc_eval.analysis.roleplay import (
    character_breaks,
    emotion_trajectories,
    fidelity_summary,
    negativity,
    roleplay_markdown,
    roleplay_table,
    win_rates,
)
from esc_eval.analysis.text_metrics import corpus_text_metrics, dialogue_text_metrics, distinct_n, text_metrics, tokenize
from esc_eval.analysis.correlation_ci import correlation_ci_markdown, correlations_with_ci
from esc_eval.analysis.fake_runs import write_fake_run
from esc_eval.analysis.roleplay_sheets import export_pairwise_sheets, import_pairwise_sheets, win_rates_with_ci
from esc_eval.analysis.run_compare import compare_runs, comparison_markdown, write_comparison
from esc_eval.analysis.text_metric_runs import load_references, run_text_metrics
from esc_eval.analysis.usage_report import add_usage_columns, usage_rows
# beyond the paper: crisis safety (apart from the seven dimensions) and worst-case seekers
from esc_eval.analysis.safety import HARM_WEIGHTS, harm_weighted_summary, load_safety, safety_frame, safety_markdown, write_safety
from esc_eval.analysis.seekers import dialogue_values, load_seeker_values, ranking_shift, seeker_shift, seekers_markdown, write_seekers
from esc_eval.analysis.ppi import MeanEstimate, classical_mean, ppi_mean
from esc_eval.analysis.human_scores import HumanScores, load_human_scores
from esc_eval.analysis.expected_scores import expected_scores
from esc_eval.analysis.calibration import brier, ece, make_recalibration, reliability
from esc_eval.analysis.calibration_runs import CalibrationResult, calibrate, calibration_markdown, write_calibrated_rows
from esc_eval.analysis.human_leaderboard import anchored_markdown, compare_on_humans, human_anchored, write_anchored



_ANNOTATE = {
    "AnnotationStore": "annotation_store", "AnnotationStoreError": "annotation_answers",
    "StudyConfig": "annotation_study", "create_study": "annotation_study",
    "live_results": "annotation_results", "AnnotationService": "annotation_service",
    "make_annotation_server": "annotation_server", "annotation_table": "annotation_formats",
    "labelstudio_export": "annotation_formats", "import_labelstudio": "annotation_formats",
}


def __getattr__(name: str):
    # report/plots import matplotlib and jinja2 (slow): load them on first use.
    if name == "write_report":
        from esc_eval.analysis import report

        return getattr(report, name)
    if name in ("ResultsViewer", "make_server"):  # the viewer's modules load on first use too
        from esc_eval.analysis import viewer, viewer_server

        return getattr(viewer if name == "ResultsViewer" else viewer_server, name)
    if name in _ANNOTATE:  # the human-evaluation modules (annotate), on first use
        import importlib

        return getattr(importlib.import_module(f"esc_eval.analysis.{_ANNOTATE[name]}"), name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


__all__ = [
    "AnalysisInputError", "AnnotationError",
    "accuracy_markdown", "agreement_markdown", "agreement_summary", "agreement_table_markdown", "judge_agreement", "build_leaderboard", "build_leaderboard_by", "leaderboard_by_markdown", "seed_spread", "character_breaks",
    "corpus_text_metrics", "correlate", "correlation_markdown", "correlation_table", "dialogue_text_metrics",
    "distinct_n", "emotion_trajectories", "export_annotation_sheets", "fidelity_summary", "format_cell", "holm",
    "import_annotations", "is_official_json", "official_kind", "judge_accuracy", "krippendorff_alpha", "leaderboard_markdown",
    "load_dialogues", "load_manifests", "load_official_dialogues", "load_official_scores", "load_scores",
    "negativity", "paired_comparison", "pairwise_comparisons", "pairwise_kappa", "quadratic_weighted_kappa",
    "roleplay_markdown", "roleplay_table", "scores_wide", "text_metrics", "tokenize", "win_rates",
    "write_accuracy", "write_leaderboard", "write_report",
    "ResultsViewer", "add_usage_columns", "compare_runs", "comparison_markdown", "correlation_ci_markdown",
    "correlations_with_ci", "export_pairwise_sheets", "import_pairwise_sheets", "load_references", "make_server",
    "run_text_metrics", "usage_rows", "win_rates_with_ci", "write_comparison", "write_fake_run",
    "icc_oneway", "icc_table", *_ANNOTATE,
    "HARM_WEIGHTS", "harm_weighted_summary", "load_safety", "safety_frame", "safety_markdown", "write_safety",
    "dialogue_values", "load_seeker_values", "ranking_shift", "seeker_shift", "seekers_markdown", "write_seekers",
    "MeanEstimate", "classical_mean", "ppi_mean", "HumanScores", "load_human_scores", "expected_scores", "brier", "ece",
    "make_recalibration", "reliability", "CalibrationResult", "calibrate", "calibration_markdown",
    "write_calibrated_rows", "anchored_markdown", "compare_on_humans", "human_anchored", "write_anchored",
]
