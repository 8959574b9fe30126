"""sim.cardbuild.review: the built cards looked over: by people (annotation.py: sheets for two
annotators, the A.2 correction rules, a reviewer) and by the numbers (stats.py: Tables 6 and 9, a
Figure 5 style chart)."""
from esc_eval.sim.cardbuild.review.annotation import (
    AnnotationOutcome, CardDecision, SheetError, Vote, agreement, apply_correction_rules, cohen_kappa,
    export_card_annotation_sheets, export_reviewer_sheet, finalize_cards, read_annotator_sheet, read_reviewer_sheet,
    resolve_leaf,
)
from esc_eval.sim.cardbuild.review.stats import card_summary, category_table, plot_distribution, stage_table, write_stats

__all__ = [
    "AnnotationOutcome", "CardDecision", "SheetError", "Vote", "agreement", "apply_correction_rules",
    "card_summary", "category_table", "cohen_kappa", "export_card_annotation_sheets", "export_reviewer_sheet",
    "finalize_cards", "plot_distribution", "read_annotator_sheet", "read_reviewer_sheet", "resolve_leaf",
    "stage_table", "write_stats",
]
