"""Role-card construction (ESC-Eval Section 2.2, Appendix A): read the source datasets, extract
cards with an LLM (Figures 6/7), filter (Figure 8), remove near-duplicates, classify into the
Table 9 taxonomy, run the two-annotator + reviewer correction rules (A.2), and report the
paper's statistics (Tables 6 and 9, Figure 5); optionally (beyond the paper) label each card's
crisis-risk level from its source (stages/risk.py).

Rooms: sources/ (the records and the dataset readers), stages/ (each step's prompt and reply parser),
review/ (human annotation and the statistics); here: the config, the resumable pipeline, its stage
runner and per-stage checkpoints. The shipped example config, keyword data and samples are configs/,
data/ and samples/ (README.md says how to build).

Layer: beside sim/jobs/ (an LLM job with its own checkpoints); imports serve, sim/cards/, sim/runs/
(row ids, atomic writes) and sim/prompt_files.py: nothing of the pool or the jobs.
Inside: pipeline > runner > review | stages > checkpoint | config > sources."""
from esc_eval.sim.cardbuild.sources import (
    OFFICIAL_SOURCE_NAMES, READERS, ReadResult, Rejection, SourceItem, Turn, canonical_dataset, detect_dataset,
    read_source,
)
from esc_eval.sim.cardbuild.stages import (
    CardFields, CardFieldsError, Classification, Duplicate, FilterVerdict, RiskLabel, age_band,
    classification_messages, classify_reply, extraction_messages, filter_choices, filter_messages,
    find_near_duplicates, jaccard, keyword_category, leaves_for, normalize_age, normalize_gender, parse_card_fields,
    parse_category_reply, parse_filter_reply, parse_risk_reply, render_card, risk_choices, risk_messages, shingles,
    source_dialogue_text,
)
from esc_eval.sim.cardbuild.review import (
    AnnotationOutcome, CardDecision, SheetError, Vote, agreement, apply_correction_rules, card_summary,
    category_table, cohen_kappa, export_card_annotation_sheets, export_reviewer_sheet, finalize_cards,
    plot_distribution, read_annotator_sheet, read_reviewer_sheet, resolve_leaf, stage_table, write_stats,
)
from esc_eval.sim.cardbuild.config import CardBuildConfig, CardBuildConfigError, load_build_config, parse_build_config
from esc_eval.sim.cardbuild.pipeline import BuildResult, build_cards, build_cards_async, read_sources

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
