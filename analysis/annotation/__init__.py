"""analysis.annotation: people's scores of dialogues. Sheets to fill and read back, and the
agreement between annotators (`sheets.py`, `agreement.py`: Cohen's kappa, Krippendorff's alpha,
ICC; `kappa_interval.py`: kappa with a bootstrap interval), studies in the browser (`study.py`: which dialogues, who sees what), their SQLite store and
what an answer is (`store.py`, `answers.py`), exports and imports (`formats.py`: CSV, Label
Studio), and the rubric people score by (`rubric.py`).

Layer: above results; beside figures and textmetrics. The web pages that collect answers are in
analysis.web; what answers say about a judge is in analysis.trust."""
from esc_eval.analysis.annotation.agreement import (agreement_markdown, agreement_of_sheets, agreement_summary, icc_oneway, icc_table,
                                                    krippendorff_alpha, pairwise_kappa, quadratic_weighted_kappa,
                                                    sheet_agreement)
from esc_eval.analysis.annotation.answers import AnnotationStoreError
from esc_eval.analysis.annotation.kappa_interval import kappa_of_tables, kappa_with_interval
from esc_eval.analysis.annotation.formats import annotation_table, import_labelstudio, labelstudio_export
from esc_eval.analysis.annotation.sheets import (AnnotationError, export_annotation_sheets, import_annotations,
                                                sheet_dialogue_text, sheets_of_runs)
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.study import StudyConfig, create_study

__all__ = ["agreement_of_sheets", "sheets_of_runs", "AnnotationError", "AnnotationStore", "AnnotationStoreError", "StudyConfig", "agreement_markdown",
           "agreement_summary", "annotation_table", "create_study", "export_annotation_sheets", "icc_oneway", "icc_table",
           "import_annotations", "import_labelstudio", "kappa_of_tables", "kappa_with_interval", "krippendorff_alpha", "labelstudio_export", "pairwise_kappa",
           "quadratic_weighted_kappa", "sheet_agreement", "sheet_dialogue_text"]
