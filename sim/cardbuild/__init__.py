"""Role-card construction (ESC-Eval Section 2.2, Appendix A): read the source datasets, extract
cards with an LLM (Figures 6/7), filter (Figure 8), remove near-duplicates, classify into the
Table 9 taxonomy, run the two-annotator + reviewer correction rules (A.2), and report the
paper's statistics (Tables 6 and 9, Figure 5); optionally (beyond the paper) label each card's
crisis-risk level from its source (risk.py).

Layer: beside sim/jobs/ (an LLM job with its own checkpoints); imports serve, sim/cards/, sim/runs/
(row ids, atomic writes) and sim/prompt_files.py: nothing of the pool or the jobs."""
from esc_eval.sim.cardbuild.annotation import (
    AnnotationOutcome,
    CardDecision,
    SheetError,
    Vote,
    agreement,
    apply_correction_rules,
    cohen_kappa,
    export_card_annotation_sheets,
    export_reviewer_sheet,
    finalize_cards,
    read_annotator_sheet,
    read_reviewer_sheet,
    resolve_leaf,
)
from esc_eval.sim.cardbuild.classify import (
    Classification,
    classification_messages,
    classify_reply,
    keyword_category,
    leaves_for,
    parse_category_reply,
)

from esc_eval.sim.cardbuild.config import CardBuildConfig, CardBuildConfigError, load_build_config, parse_build_config
from esc_eval.sim.cardbuild.dedup import Duplicate, find_near_duplicates, jaccard, shingles
from esc_eval.sim.cardbuild.extraction import extraction_messages, source_dialogue_text
from esc_eval.sim.cardbuild.fields import CardFields, CardFieldsError, age_band, normalize_age, normalize_gender, parse_card_fields
from esc_eval.sim.cardbuild.filtering import FilterVerdict, filter_choices, filter_messages, parse_filter_reply, render_card
from esc_eval.sim.cardbuild.items import OFFICIAL_SOURCE_NAMES, Rejection, SourceItem, Turn, canonical_dataset
from esc_eval.sim.cardbuild.risk import RiskLabel, parse_risk_reply, risk_choices, risk_messages
from esc_eval.sim.cardbuild.pipeline import BuildResult, build_cards, build_cards_async, read_sources
from esc_eval.sim.cardbuild.sources import READERS, ReadResult, detect_dataset, read_source
from esc_eval.sim.cardbuild.stats import card_summary, category_table, plot_distribution, stage_table, write_stats

__all__ = [
    "AnnotationOutcome", "BuildResult", "CardBuildConfig", "CardBuildConfigError", "CardDecision", "CardFields",
    "CardFieldsError", "Classification", "Duplicate", "FilterVerdict", "OFFICIAL_SOURCE_NAMES", "READERS",
    "ReadResult", "Rejection", "SheetError", "SourceItem", "Turn", "Vote", "age_band", "agreement",
    "apply_correction_rules", "build_cards", "build_cards_async", "canonical_dataset", "card_summary",
    "category_table", "classification_messages",
    "classify_reply", "cohen_kappa", "detect_dataset", "export_card_annotation_sheets", "export_reviewer_sheet",
    "extraction_messages", "filter_choices", "filter_messages", "finalize_cards", "find_near_duplicates",
    "jaccard", "keyword_category", "leaves_for", "load_build_config", "normalize_age", "normalize_gender",
    "parse_build_config", "parse_card_fields", "parse_category_reply", "parse_filter_reply", "plot_distribution",
    "read_annotator_sheet", "read_reviewer_sheet", "read_source", "read_sources", "render_card",
    "source_dialogue_text", "resolve_leaf", "RiskLabel", "parse_risk_reply", "risk_choices", "risk_messages", "shingles", "stage_table", "write_stats",
]
