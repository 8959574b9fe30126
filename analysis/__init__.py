"""analysis: everything that reads results, one room per concept.

  results/      run folders and the official JSON read into rows; the leaderboard (Table 2),
                expected scores, usage and spend, crisis safety (beyond the paper), fake runs
  textmetrics/  BLEU, ROUGE, METEOR, distinct-n against reference replies (Tables 13-15)
  figures/      every plot (matplotlib)
  annotation/   people's scores: sheets, studies, their store, formats, agreement between annotators
  trust/        the judge against people: accuracy (Table 4), agreement, correlations (Tables 3,
                13-15), calibration, prediction-powered means anchored on people
  seekers/      the simulated seeker: role-play fidelity (Table 1, Figure 3), worst-case seekers
  compare/      paired comparisons of models and runs
  courses/      courses of several sessions: scores and continuity by session, the change across them
  web/          the results viewer and the human-evaluation app in the browser
  report/       the HTML/Markdown report
  bench/        the analysis benchmarks
The `esc-eval report|leaderboard|analysis|annotate|view` commands are in cli/.

Layers (pyproject [tool.importlinter], checked in CI): bench > report | web > compare >
trust | seekers > annotation | figures | textmetrics > results. analysis may import sim's data
definitions (dimensions, record schemas, the official-format adapter, run folders); it never
imports serve, train or cli, so whatever needs the model registry (e.g. Table 2 groups) is passed
in by the caller. This package exports the names most callers need, from where they live, the web apps
included (they add about 0.2 s to `import esc_eval.analysis`, 4.5-6 s on the loaded 2-core AVX-512
EPYC, measured 2026-12-05). `write_report` is not among them: its module loads jinja2 and matplotlib,
1.0-1.5 s more there; import it from analysis.report.report."""

from esc_eval.analysis.annotation import (AnnotationError, AnnotationStore, AnnotationStoreError, StudyConfig,
                                          agreement_markdown, agreement_summary, annotation_table, create_study,
                                          export_annotation_sheets, icc_oneway, icc_table, import_annotations,
                                          import_labelstudio, krippendorff_alpha, labelstudio_export, pairwise_kappa,
                                          quadratic_weighted_kappa)
from esc_eval.analysis.compare import (compare_runs, comparison_markdown, holm, paired_comparison, pairwise_comparisons,
                                       write_comparison)
from esc_eval.analysis.results import (AnalysisInputError, add_usage_columns, build_leaderboard,
                                       build_leaderboard_by, format_cell,
                                       is_official_json, leaderboard_by_markdown, leaderboard_markdown, load_dialogues,
                                       load_manifests, load_official_dialogues, load_official_scores,
                                       load_scores, official_kind, seed_spread, usage_rows,
                                       write_fake_run, write_leaderboard,)
from esc_eval.analysis.judgments import expected_scores
from esc_eval.analysis.safety import (HARM_WEIGHTS, harm_weighted_summary, load_safety, safety_frame, safety_markdown,
                                      write_safety)
from esc_eval.analysis.seekers import (character_breaks, dialogue_values, emotion_trajectories, export_pairwise_sheets,
                                       fidelity_summary, import_pairwise_sheets, negativity,
                                       ranking_shift, roleplay_markdown, roleplay_table, seeker_shift, seekers_markdown,
                                       win_rates, win_rates_with_ci, write_seekers)
from esc_eval.analysis.textmetrics import (corpus_text_metrics, dialogue_text_metrics, distinct_n, load_references,
                                           run_text_metrics, text_metrics, tokenize)
from esc_eval.analysis.trust import (CalibrationResult, HumanScores, MeanEstimate, accuracy_markdown,
                                     agreement_table_markdown, anchored_markdown, brier, calibrate, calibration_markdown,
                                     classical_mean, compare_on_humans, correlate, correlation_ci_markdown,
                                     correlation_markdown, correlation_table, correlations_with_ci, ece, human_anchored,
                                     judge_accuracy, judge_agreement, load_human_scores, make_recalibration, ppi_mean,
                                     reliability, scores_wide, write_accuracy, write_anchored, write_calibrated_rows)
from esc_eval.analysis.web import (AnnotationService, ResultsViewer, live_results, make_annotation_server,
                                   make_server)

__all__ = [
    "AnalysisInputError", "AnnotationError",
    "accuracy_markdown", "agreement_markdown", "agreement_summary", "agreement_table_markdown", "judge_agreement", "build_leaderboard", "build_leaderboard_by", "leaderboard_by_markdown", "seed_spread", "character_breaks",
    "corpus_text_metrics", "correlate", "correlation_markdown", "correlation_table", "dialogue_text_metrics",
    "distinct_n", "emotion_trajectories", "export_annotation_sheets", "fidelity_summary", "format_cell", "holm",
    "import_annotations", "is_official_json", "official_kind", "judge_accuracy", "krippendorff_alpha", "leaderboard_markdown",
    "load_dialogues", "load_manifests", "load_official_dialogues", "load_official_scores", "load_scores",
    "negativity", "paired_comparison", "pairwise_comparisons", "pairwise_kappa", "quadratic_weighted_kappa",
    "roleplay_markdown", "roleplay_table", "scores_wide", "text_metrics", "tokenize", "win_rates",
    "write_accuracy", "write_leaderboard",
    "ResultsViewer", "add_usage_columns", "compare_runs", "comparison_markdown", "correlation_ci_markdown",
    "correlations_with_ci", "export_pairwise_sheets", "import_pairwise_sheets", "load_references", "make_server",
    "run_text_metrics", "usage_rows", "win_rates_with_ci", "write_comparison", "write_fake_run",
    "icc_oneway", "icc_table", "AnnotationStore", "AnnotationStoreError", "StudyConfig", "create_study",
    "live_results", "AnnotationService", "make_annotation_server", "annotation_table", "labelstudio_export", "import_labelstudio",
    "HARM_WEIGHTS", "harm_weighted_summary", "load_safety", "safety_frame", "safety_markdown", "write_safety",
    "dialogue_values", "ranking_shift", "seeker_shift", "seekers_markdown", "write_seekers",
    "MeanEstimate", "classical_mean", "ppi_mean", "HumanScores", "load_human_scores", "expected_scores", "brier", "ece",
    "make_recalibration", "reliability", "CalibrationResult", "calibrate", "calibration_markdown",
    "write_calibrated_rows", "anchored_markdown", "compare_on_humans", "human_anchored", "write_anchored",
]
